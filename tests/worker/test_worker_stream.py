"""`Worker.stream` and `Worker.resume_stream`: the events, the result, closing, errors."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import llm_worker
from llm_worker import (
    BlockDelta,
    ConfigurationError,
    Decision,
    HookError,
    PauseStateError,
    RunCompleted,
    RunEvent,
    RunStatus,
    RunStream,
    TextComplete,
    TextDelta,
    TextPart,
    ToolCallComplete,
    ToolResultReady,
    ToolUsePart,
    TurnEnded,
    TurnStarted,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
RAN: list[str] = []


@tool
async def send(to: str) -> str:
    """Send a message."""
    RAN.append(to)
    return f"sent to {to}"


async def pause_unless_resumed(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("ask a person")


def test_the_stream_types_are_public() -> None:
    from llm_worker import state, worker

    assert llm_worker.RunStream is worker.RunStream
    for name in ("RunCompleted", "TurnStarted", "TurnEnded", "TextComplete", "ToolResultReady"):
        assert getattr(llm_worker, name) is getattr(state, name)
    assert llm_worker.RunEvent is state.RunEvent


async def test_the_stream_holds_its_result_once_read_to_the_end() -> None:
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[send])
    events: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            assert isinstance(stream, RunStream)
            with pytest.raises(ConfigurationError, match="no result yet"):
                _ = stream.result
            async for event in stream:
                events.append(event)
    last = events[-1]
    assert isinstance(last, RunCompleted)
    assert stream.result is last.result
    assert stream.result.status is RunStatus.FINISHED
    assert stream.result.text == "ok"
    kinds = {type(e) for e in events}
    assert {TurnStarted, TurnEnded, BlockDelta, TextComplete, ToolCallComplete} <= kinds
    assert [e.result.content for e in events if isinstance(e, ToolResultReady)] == ["sent to ana"]


async def test_a_failed_run_raises_where_read_and_its_stream_has_no_result() -> None:
    async def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook bug")

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})])])
    worker = Worker(client, tools=[send])
    worker.add_before_tool_call_hook(broken)
    stream = worker.stream("go")
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="hook bug"):
        async for _ in stream:
            pass
    with pytest.raises(ConfigurationError, match="failed with HookError"):
        _ = stream.result


async def test_a_stream_closed_early_has_no_result_and_frees_the_worker() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([TextPart("y" * 200)], chunk_size=1, delay=0.01),
            ScriptedResponse.text("next"),
        ]
    )
    worker = Worker(client)
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            async for _ in stream:
                break
        with pytest.raises(ConfigurationError, match="no result"):
            _ = stream.result
        again = await worker.run("again")  # the cancelled run no longer holds the Worker
    assert again.text == "next"


async def test_resume_stream_streams_the_resumed_run_to_its_result() -> None:
    RAN.clear()
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})]),
            ScriptedResponse.text("Sent.", chunk_size=2),
        ]
    )
    worker = Worker(client, tools=[send])
    worker.add_before_tool_call_hook(pause_unless_resumed)
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as first:
            async for _ in first:
                pass
        state = first.result.state
        assert first.result.status is RunStatus.PAUSED and state is not None
        assert RAN == []
        events: list[RunEvent] = []
        async with worker.resume_stream(state) as resumed:
            events = [event async for event in resumed]
    assert RAN == ["ana"]
    assert [e.result.content for e in events if isinstance(e, ToolResultReady)] == ["sent to ana"]
    text = [
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]
    assert text == ["Se", "nt", "."]  # as it streamed
    assert isinstance(events[-1], RunCompleted)
    assert resumed.result.status is RunStatus.FINISHED
    assert resumed.result.text == "Sent."


async def test_resume_stream_with_a_denying_decision_over_a_real_wire() -> None:
    RAN.clear()
    script = [
        ScriptedResponse([ToolUsePart("", "send", {"to": "bob"})]),
        ScriptedResponse.text("I did not send it."),
    ]
    async with ScriptedModelServer("openai_chat", script) as server, server.client() as client:
        worker = Worker(client, tools=[send])
        worker.add_before_tool_call_hook(pause_unless_resumed)
        with anyio.fail_after(TIMEOUT):
            paused = await worker.run("go")
            assert paused.state is not None
            [pending] = paused.state.pending
            decisions = {pending.call.id: Decision.deny("the user said no")}
            async with worker.resume_stream(paused.state, decisions=decisions) as stream:
                events = [event async for event in stream]
    assert RAN == []
    [ready] = [e for e in events if isinstance(e, ToolResultReady)]
    assert ready.result.is_error
    assert "the user said no" in ready.result.content
    assert stream.result.text == "I did not send it."
    assert b"the user said no" in server.requests[1].body


async def test_resume_stream_raises_a_bad_decision_where_read_and_leaves_the_worker() -> None:
    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})])])
    worker = Worker(client, tools=[send])
    worker.add_before_tool_call_hook(pause_unless_resumed)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("go")
        assert paused.state is not None
        history = list(worker.history)
        stream = worker.resume_stream(paused.state, decisions={"nope": Decision.approve()})
        with pytest.raises(PauseStateError, match="nope"):
            async for _ in stream:
                pass
    assert worker.history == history


async def test_worker_cancel_during_resume_stream_ends_it_cancelled() -> None:
    started = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns by itself."""
        started.set()
        await anyio.sleep_forever()
        return "unreachable"

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "wait_forever", {})])])
    worker = Worker(client, tools=[wait_forever])
    worker.add_before_tool_call_hook(pause_unless_resumed)
    seen: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("go")
        assert paused.state is not None
        async with anyio.create_task_group() as group:

            async def read() -> None:
                async with worker.resume_stream(paused.state) as stream:  # type: ignore[arg-type]
                    seen.extend([event async for event in stream])

            group.start_soon(read)
            await started.wait()
            worker.cancel()
    assert isinstance(seen[-1], RunCompleted)
    assert seen[-1].result.status is RunStatus.CANCELLED
    assert worker.history[-1].tool_results[0].is_error  # the call got its "cancelled" result
