"""Regression tests for bugs found in the review of the Worker layer (one test per bug)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from llm_worker import (
    BlobError,
    HookError,
    Message,
    PauseState,
    PauseStateError,
    TextPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.blobs import Content, MemoryBlobStore
from llm_worker.collectors import ToolCall
from llm_worker.hooks import Pause, Skip, ToolCallContext
from llm_worker.state import Decision, PendingCall, RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

RUNS: list[str] = []


@tool(effect="side_effect")
def transfer(amount: int) -> str:
    """Move money (a side effect: must never run twice)."""
    RUNS.append(f"transfer:{amount}")
    return f"moved {amount}"


@tool(effect="read_only")
async def lookup(key: str) -> str:
    """Read a value."""
    return f"value of {key}"


@tool(effect="read_only")
async def big() -> str:
    """Return a large output."""
    return "line\n" * 1000


def assert_paired(history: list[Message]) -> None:
    for i, message in enumerate(history):
        if message.role == "assistant" and message.tool_uses:
            ids = [r.tool_use_id for r in history[i + 1].tool_results]
            assert ids == [c.id for c in message.tool_uses]


# -- hooks ---------------------------------------------------------------------------------


async def test_a_hook_raising_timeout_error_is_not_reported_as_its_own_timeout() -> None:
    # Bug: _call mapped any TimeoutError to "ran past its timeout of None s".
    async def fetch(ctx: ToolCallContext) -> None:
        raise TimeoutError("the approval service did not answer")

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "lookup", {"key": "k"})])])
    worker = Worker(client, tools=[lookup])
    worker.add_before_tool_call_hook(fetch)
    with anyio.fail_after(5), pytest.raises(HookError) as info:
        await worker.run("go")
    message = str(info.value)
    assert "past its timeout" not in message
    assert "TimeoutError: the approval service did not answer" in message


async def test_a_hook_past_its_own_timeout_is_still_reported_as_such() -> None:
    async def slow(ctx: ToolCallContext) -> None:
        await anyio.sleep_forever()

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "lookup", {"key": "k"})])])
    worker = Worker(client, tools=[lookup])
    worker.add_before_tool_call_hook(slow, timeout=0.01)
    with anyio.fail_after(5), pytest.raises(HookError, match=r"past its timeout of 0\.01 s"):
        await worker.run("go")
    assert_paired(worker.history)


async def test_early_start_keeps_the_cause_of_a_hook_error() -> None:
    # Bug: _early_group re-raised the single error `from None`, erasing HookError.__cause__.
    async def broken(ctx: ToolCallContext) -> None:
        raise ValueError("bad policy file")

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "lookup", {"key": "k"})])])
    worker = Worker(client, tools=[lookup], early_tool_start=True)
    worker.add_before_tool_call_hook(broken)
    with anyio.fail_after(5), pytest.raises(HookError) as info:
        await worker.run("go")
    assert isinstance(info.value.__cause__, ValueError)


# -- tool execution ------------------------------------------------------------------------


class BrokenStore(MemoryBlobStore):
    """A store whose writes fail (a full disk)."""

    async def store(self, content: Content) -> Any:
        raise BlobError("disk full")


async def test_a_blob_store_failure_is_a_result_not_an_exception_group() -> None:
    # Bug: the failure escaped the batch's task group as an ExceptionGroup, and cancelled the
    # other calls of the batch mid-way (a side-effecting one included).
    RUNS.clear()
    client = ScriptedClient(
        [
            ScriptedResponse(
                [ToolUsePart("c1", "big", {}), ToolUsePart("c2", "transfer", {"amount": 3})]
            ),
            ScriptedResponse.text("Done."),
        ]
    )
    worker = Worker(client, tools=[big, transfer], blob_store=BrokenStore())
    with anyio.fail_after(5):
        result = await worker.run("go")
    assert result.status is RunStatus.FINISHED
    assert RUNS == ["transfer:3"]
    results = client.requests[1].messages[-1].tool_results
    assert [r.tool_use_id for r in results] == ["c1", "c2"]
    assert results[0].is_error
    assert "disk full" in results[0].content
    assert "ran" in results[0].content  # the model learns the tool did run
    assert results[1].content == "moved 3"


# -- pause and resume ----------------------------------------------------------------------


async def approval(ctx: ToolCallContext) -> Pause | None:
    if ctx.meta is not None and ctx.meta.effect == "read_only":
        return None
    return None if ctx.resumed else Pause("needs approval")


async def test_resume_with_a_call_of_an_unknown_tool_gives_it_an_error_result() -> None:
    # Bug: a call the model made to a tool that does not exist (which the loop answers with
    # an error result) made every resume fail with "this Worker has no tool named ...".
    RUNS.clear()
    client = ScriptedClient(
        [
            ScriptedResponse(
                [ToolUsePart("c1", "transfer", {"amount": 5}), ToolUsePart("c2", "nosuch", {})]
            ),
            ScriptedResponse.text("Done."),
        ]
    )
    worker = Worker(client, tools=[transfer])
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    fresh = Worker(client, tools=[transfer])
    fresh.add_before_tool_call_hook(approval)
    with anyio.fail_after(5):
        # The approval hook asks about every call it has not seen: c2 gets its decision here.
        result = await fresh.resume(state, decisions={"c2": Decision.approve()})
    assert result.status is RunStatus.FINISHED
    assert RUNS == ["transfer:5"]
    results = client.requests[1].messages[-1].tool_results
    assert results[1].is_error and "no tool named 'nosuch'" in results[1].content


async def test_resume_still_refuses_a_worker_without_the_pausing_workers_tools() -> None:
    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "transfer", {"amount": 5})])])
    worker = Worker(client, tools=[transfer])
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    with pytest.raises(PauseStateError, match="transfer"):
        await Worker(client, tools=[lookup]).resume(state)


async def test_a_refused_resume_leaves_the_workers_history_alone() -> None:
    # Bug: resume() replaced the history before checking the state and the decisions.
    state = PauseState(
        [Message.user("pay"), Message("assistant", [ToolUsePart("c1", "transfer", {})])],
        [PendingCall(ToolCall("c1", "transfer", {}))],
    )
    worker = Worker(ScriptedClient([]), tools=[transfer], history=[Message.user("earlier")])
    with pytest.raises(PauseStateError):
        await worker.resume(state, decisions={"nope": Decision.approve()})
    assert worker.history == [Message.user("earlier")]


async def test_approving_with_edited_arguments_repairs_a_call_with_invalid_arguments() -> None:
    # Bug: Decision.approve(input=...) edited the caller's own PauseState, and a call whose
    # arguments had not parsed still failed with "was not run" after the edit.
    RUNS.clear()
    bad = ToolCall("c1", "transfer", {}, raw_input='{"amount": 5', error="not valid JSON")
    state = PauseState(
        [Message.user("pay"), Message("assistant", [ToolUsePart("c1", "transfer", {})])],
        [PendingCall(bad)],
    )
    client = ScriptedClient([ScriptedResponse.text("Done.")])
    worker = Worker(client, tools=[transfer])
    with anyio.fail_after(5):
        result = await worker.resume(state, decisions={"c1": Decision.approve(input={"amount": 5})})
    assert result.status is RunStatus.FINISHED
    assert RUNS == ["transfer:5"]
    assert state.pending[0].call.input == {}  # the caller's state is not modified
    assert state.pending[0].call.error == "not valid JSON"


async def test_resuming_a_batch_with_no_calls_sends_no_empty_message() -> None:
    # Bug: Batch.run appended Message("user", []) when it had no result, which providers reject.
    client = ScriptedClient([ScriptedResponse.text("Hello.")])
    worker = Worker(client)
    state = PauseState([Message.user("hi")])
    with anyio.fail_after(5):
        result = await worker.resume(state)
    assert result.status is RunStatus.FINISHED
    assert all(m.content for m in client.requests[0].messages)


# -- the event stream ----------------------------------------------------------------------


async def test_leaving_a_stream_early_unregisters_it() -> None:
    # Bug: `async with worker.stream(...)` left its queue registered as a sink when the reader
    # stopped early; every later run kept feeding events into it.
    client = ScriptedClient([ScriptedResponse.text("One two three."), ScriptedResponse.text("x")])
    worker = Worker(client)
    with anyio.fail_after(5):
        async with worker.stream("hi") as events:
            async for _ in events:
                break
        await worker.run("again")
    assert worker._cfg.sinks == []  # pyright: ignore[reportPrivateUsage]


async def test_a_stream_closed_early_leaves_no_task_behind() -> None:
    client = ScriptedClient([ScriptedResponse.text("One two three.", delay=0.01)])
    worker = Worker(client)
    before = len(asyncio.all_tasks())
    with anyio.fail_after(5):
        async with worker.stream("hi") as events:
            async for _ in events:
                break
    assert len(asyncio.all_tasks()) == before
    assert [m.role for m in worker.history] == ["user"]  # no half answer was kept


# -- cancellation with early start -----------------------------------------------------------


def blocking_read_only() -> tuple[Any, anyio.Event, list[str]]:
    started = anyio.Event()
    log: list[str] = []

    @tool(effect="read_only")
    async def watch() -> str:
        """Never returns by itself."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            log.append("cancelled")
        return "unreachable"

    return watch, started, log


async def test_worker_cancel_with_an_early_started_tool_returns_cancelled() -> None:
    watch, started, log = blocking_read_only()
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "watch", {}), TextPart("and more " * 50)], delay=0.01)]
    )
    worker = Worker(client, tools=[watch], early_tool_start=True)

    async def cancel_when_started() -> None:
        await started.wait()
        worker.cancel()

    result = None
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_started)
            result = await worker.run("go")
    assert result is not None
    assert result.status is RunStatus.CANCELLED
    assert log == ["cancelled"]
    assert_paired(worker.history)


async def test_cancelling_the_task_with_an_early_started_tool_raises_cancelled_error() -> None:
    watch, started, log = blocking_read_only()
    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "watch", {})])])
    worker = Worker(client, tools=[watch], early_tool_start=True)
    task = asyncio.ensure_future(worker.run("go"))
    with anyio.fail_after(5):
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert log == ["cancelled"]
    assert_paired(worker.history)


# -- requests ------------------------------------------------------------------------------


async def test_an_on_message_send_hook_may_replace_the_request() -> None:
    # Bug: the request a hook assigned to ctx.request was ignored; only in-place edits counted.
    import dataclasses

    from llm_worker.hooks import MessageSendContext

    async def cooler(ctx: MessageSendContext) -> None:
        ctx.request = dataclasses.replace(ctx.request, temperature=0.1)

    async def extra(ctx: MessageSendContext) -> None:
        ctx.request.messages = [*ctx.request.messages, Message.user("be brief")]

    client = ScriptedClient([ScriptedResponse.text("ok")])
    worker = Worker(client)
    worker.add_on_message_send_hook(cooler)
    worker.add_on_message_send_hook(extra)
    with anyio.fail_after(5):
        await worker.run("hi")
    sent = client.requests[0]
    assert sent.temperature == 0.1
    assert [m.text for m in sent.messages] == ["hi", "be brief"]


async def test_a_cancelled_request_is_not_counted_as_made() -> None:
    # Bug: RunResult.requests counted the request an on_message_send Cancel stopped.
    from llm_worker.hooks import Cancel, MessageSendContext

    numbers: list[int] = []

    async def stop_second(ctx: MessageSendContext) -> Cancel | None:
        numbers.append(ctx.request_number)
        return Cancel("enough") if ctx.request_number == 2 else None

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "lookup", {"key": "k"})]), ScriptedResponse.text("x")]
    )
    worker = Worker(client, tools=[lookup])
    worker.add_on_message_send_hook(stop_second)
    with anyio.fail_after(5):
        result = await worker.run("hi")
    assert result.status is RunStatus.CANCELLED
    assert numbers == [1, 2]
    assert result.requests == len(client.requests) == 1


async def test_a_second_concurrent_run_on_one_worker_is_refused() -> None:
    # Bug: two overlapping runs interleaved their messages in the one history (which the
    # provider then rejects) and worker.cancel() reached only the later one.
    from llm_worker import ConfigurationError

    client = ScriptedClient(
        [ScriptedResponse.text("slow answer " * 20, delay=0.01), ScriptedResponse.text("b")]
    )
    worker = Worker(client)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run, "first")
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ConfigurationError, match="already running"):
                await worker.run("second")
    assert [m.text for m in worker.history if m.role == "user"] == ["first"]
    result = await worker.run("third")  # once the first run ended, the worker is free again
    assert result.text == "b"


async def test_a_sync_hook_runs_where_it_once_got_an_error() -> None:
    # Once: a plain `def` hook failed with "raised TypeError: object NoneType can't be used in
    # 'await' expression"; then with an error asking for `async def`. Plain hooks now run.
    def skip_it(ctx: ToolCallContext) -> Skip:
        return Skip("not today")

    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "lookup", {"key": "k"})]),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[lookup])
    worker.add_before_tool_call_hook(skip_it)
    with anyio.fail_after(5):
        result = await worker.run("go")
    assert result.text == "ok"
    assert "not today" in worker.history[-2].tool_results[0].content
