"""Adversarial probes of the Worker's surface: streams, closing, approval, sync hooks, run_sync."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import anyio
import pytest

from llm_worker import (
    ConfigurationError,
    Decision,
    HookError,
    PauseState,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStatus,
    RunStream,
    TextPart,
    ToolUsePart,
    TurnStarted,
    Worker,
    tool,
)
from llm_worker.hooks import (
    AbortContext,
    Cancel,
    MessageSendContext,
    Skip,
    ToolCallContext,
    ToolResultContext,
)
from llm_worker.messages import Part
from llm_worker.providers import AnthropicClient
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
RAN: list[str] = []


@tool(requires_approval=True)
async def pay(invoice: str) -> str:
    """Pay an invoice."""
    RAN.append(invoice)
    return f"{invoice} paid"


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def leaked_sockets() -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


async def drain(stream: RunStream, into: list[RunEvent], pause: float = 0.0) -> None:
    """Read `stream` to its end into `into` (kept when it raises), pausing after each event."""
    async with stream:
        async for event in stream:
            into.append(event)
            if pause:
                await anyio.sleep(pause)  # the other run streams meanwhile


def slow_text(n: int = 200) -> ScriptedResponse:
    return ScriptedResponse([TextPart("y" * n)], chunk_size=1, delay=0.005)


@pytest.fixture
async def server(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[ScriptedModelServer[AnthropicClient]]:
    """A scripted Anthropic model that `Worker("anthropic:…")` reaches (no real API)."""
    async with ScriptedModelServer("anthropic", [ScriptedResponse.text("one")]) as running:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.base_url)
        yield running


# -- two runs at once ----------------------------------------------------------------------


async def test_a_second_stream_on_a_busy_worker_yields_none_of_the_first_runs_events() -> None:
    worker = Worker(ScriptedClient([slow_text()]))
    second: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("first") as first:
            seen = 0
            async for _ in first:
                seen += 1
                if seen == 3:
                    # The first run is going: the second cannot start, and must not show
                    # the first run's events as if they were its own.
                    with pytest.raises(ConfigurationError, match="already running"):
                        await drain(worker.stream("second"), second)
    assert second == []
    assert first.result.status is RunStatus.FINISHED


async def test_a_stream_started_beside_a_plain_run_yields_none_of_its_events() -> None:
    worker = Worker(ScriptedClient([slow_text()]))
    second: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run, "first")
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ConfigurationError, match="already running"):
                await drain(worker.stream("second"), second)
    assert second == []


async def test_a_second_stream_never_shows_events_the_first_run_sends_meanwhile() -> None:
    go_on = anyio.Event()

    async def wait_for_the_second(ctx: MessageSendContext) -> None:
        await go_on.wait()

    first_answer = ScriptedResponse.text("first run's text", chunk_size=4, delay=0.01)
    worker = Worker(ScriptedClient([first_answer]))
    worker.add_on_message_send_hook(wait_for_the_second)
    second: list[RunEvent] = []

    async def read_second() -> None:
        go_on.set()  # the first run streams from the next loop iteration on
        with pytest.raises(ConfigurationError, match="already running"):
            await drain(worker.stream("second"), second)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group, worker.stream("first") as first:
            async for event in first:
                if isinstance(event, TurnStarted):
                    group.start_soon(read_second)
    assert second == []
    assert first.result.text == "first run's text"


# -- a reader cancelled from outside -------------------------------------------------------


async def test_a_reader_cancelled_from_outside_waits_for_the_runs_clean_up() -> None:
    aborted = anyio.Event()
    release = anyio.Event()
    reader_left: list[bool] = []

    async def slow_abort(ctx: AbortContext) -> None:
        aborted.set()
        await release.wait()

    worker = Worker(ScriptedClient([slow_text(), ScriptedResponse.text("next")]))
    worker.add_on_abort_hook(slow_abort)

    async def read() -> None:
        with anyio.CancelScope() as scope:
            async with worker.stream("go") as stream:
                async for _ in stream:
                    scope.cancel()
        reader_left.append(True)

    async def release_once_all_wait() -> None:
        await aborted.wait()
        await anyio.wait_all_tasks_blocked()
        reader_left.append(False)  # the reader is still waiting for the clean-up
        release.set()

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            group.start_soon(release_once_all_wait)
        # The reader has left: the run's clean-up is over, the Worker free for the next run.
        again = await worker.run("again")
    assert reader_left == [False, True]
    assert again.text == "next"


# -- a closed stream -----------------------------------------------------------------------


async def test_a_stream_closed_before_reading_never_starts_its_run() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("never")]))
    stream = worker.stream("go")
    await stream.aclose()
    with anyio.fail_after(TIMEOUT):
        events = [event async for event in stream]
    assert events == []
    assert worker.history == []


async def test_an_abandoned_stream_can_be_read_on_to_its_result() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("abc", chunk_size=1)]))
    with anyio.fail_after(TIMEOUT):
        stream = worker.stream("go")
        async for event in stream:
            assert isinstance(event, TurnStarted)
            break
        with pytest.raises(ConfigurationError, match="no result yet"):
            _ = stream.result
        rest = [event async for event in stream]
        await stream.aclose()
    assert isinstance(rest[-1], RunCompleted)
    assert stream.result.text == "abc"


async def test_an_error_in_the_stream_block_cancels_the_run_and_frees_the_worker() -> None:
    aborts: list[str] = []
    worker = Worker(ScriptedClient([slow_text(), ScriptedResponse.text("next")]))
    worker.add_on_abort_hook(lambda ctx: aborts.append(ctx.kind))

    async def read_badly() -> None:
        async with worker.stream("go") as stream:
            async for _ in stream:
                raise ValueError("reader bug")

    with anyio.fail_after(TIMEOUT):
        with pytest.raises(ValueError, match="reader bug"):
            await read_badly()
        again = await worker.run("again")
    assert aborts == ["cancelled"]
    assert again.text == "next"


# -- closing the Worker --------------------------------------------------------------------


async def test_closing_a_worker_with_an_unclosed_stream_ends_its_run_and_leaks_nothing(
    server: ScriptedModelServer[AnthropicClient],
) -> None:
    server.script[:] = [ScriptedResponse([TextPart("y" * 400)], chunk_size=1, delay=0.01)]
    with anyio.fail_after(TIMEOUT):
        async with Worker("anthropic:claude-sonnet-4-5") as worker:
            stream = worker.stream("hi")
            async for _ in stream:
                break  # no `async with`, no aclose: the run goes on in the background
        # Closing the Worker cancelled that run: what is left of the stream says so.
        rest = [event async for event in stream]
    assert isinstance(rest[-1], RunCompleted)
    assert rest[-1].result.status is RunStatus.CANCELLED
    del worker, stream
    assert leaked_sockets() == []


async def test_aclose_while_a_run_is_going_cancels_it_first_and_leaks_nothing(
    server: ScriptedModelServer[AnthropicClient],
) -> None:
    # One SSE event per 10 ms, 4 s in all: the close comes long before the end.
    server.script[:] = [ScriptedResponse([TextPart("y" * 400)], chunk_size=1, delay=0.01)]
    worker = Worker("anthropic:claude-sonnet-4-5")
    streaming = anyio.Event()
    worker.on_text_block(lambda event: streaming.set())
    outcome: list[Any] = []

    async def run(running: Worker) -> None:
        try:
            outcome.append(await running.run("hi"))
        except Exception as exc:
            outcome.append(exc)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(run, worker)
            await streaming.wait()  # the answer streams over the pooled connection
            await worker.aclose()
        await worker.aclose()  # twice: nothing more to close
    del worker
    assert leaked_sockets() == []
    assert isinstance(outcome[0], RunResult)  # the run was cancelled, then the pool closed
    assert outcome[0].status is RunStatus.CANCELLED


async def test_an_error_in_the_worker_block_closes_its_client_and_propagates(
    server: ScriptedModelServer[AnthropicClient],
) -> None:
    async def failing_body() -> None:
        async with Worker("anthropic:claude-sonnet-4-5") as worker:
            await worker.run("hi")
            raise KeyError("body")

    with anyio.fail_after(TIMEOUT), pytest.raises(KeyError):
        await failing_body()
    assert leaked_sockets() == []


# -- requires_approval ---------------------------------------------------------------------


async def test_a_hook_setting_approved_to_a_non_bool_is_a_hook_error() -> None:
    def sloppy(ctx: ToolCallContext) -> None:
        ctx.approved = "no"  # type: ignore[assignment]  # a caller without type checking

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "pay", {"invoice": "I"})])])
    worker = Worker(client, tools=[pay])
    worker.add_before_tool_call_hook(sloppy)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="approved"):
        await worker.run("pay")
    assert RAN == []


async def test_resume_stream_twice_with_one_state_is_refused_the_second_time() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "pay", {"invoice": "I"})]),
            ScriptedResponse.text("paid"),
        ]
    )
    worker = Worker(client, tools=[pay])
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("pay")
        state = paused.state
        assert state is not None
        decisions = {"c1": Decision.approve()}
        async with worker.resume_stream(state, decisions=decisions) as first:
            _ = [event async for event in first]
        with pytest.raises(Exception, match="already resumed"):
            async with worker.resume_stream(state, decisions=decisions) as second:
                _ = [event async for event in second]
    assert RAN == ["I"]
    assert first.result.text == "paid"


async def test_a_tampered_state_is_trusted_like_the_history() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "pay", {"invoice": "I"})]),
            ScriptedResponse.text("paid"),
        ]
    )
    worker = Worker(client, tools=[pay])
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("pay")
        assert paused.state is not None
        text = paused.state.to_json().replace('"approved":false', '"approved":true')
        assert '"approved":true' in text
        await Worker(client, tools=[pay]).resume(PauseState.from_json(text))
    assert RAN == ["I"]


async def test_early_start_runs_a_read_only_neighbour_once_across_an_approval_pause() -> None:
    seen: list[tuple[str, str]] = []

    @tool(effect="read_only")
    async def balance() -> str:
        """Read the balance."""
        RAN.append("balance")
        return "100"

    def after(ctx: ToolResultContext) -> None:
        seen.append((ctx.call.name, ctx.outcome))

    calls = [ToolUsePart("c1", "balance", {}), ToolUsePart("c2", "pay", {"invoice": "I"})]
    worker = Worker(
        ScriptedClient([ScriptedResponse(list[Part](calls))]),
        tools=[balance, pay],
        early_tool_start=True,
    )
    worker.add_after_tool_call_hook(after)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("check then pay")
    assert paused.state is not None and RAN == ["balance"]
    assert seen == []  # the after hooks see the batch once, when it completes
    state = PauseState.from_json(paused.state.to_json())
    fresh = Worker(
        ScriptedClient([ScriptedResponse.text("paid")]),
        tools=[balance, pay],
        early_tool_start=True,
    )
    fresh.add_after_tool_call_hook(after)
    with anyio.fail_after(TIMEOUT):
        done = await fresh.resume(state, decisions={"c2": Decision.approve()})
    assert done.text == "paid"
    assert RAN == ["balance", "I"]
    assert seen == [("balance", "done"), ("pay", "done")]


async def test_a_denied_approval_passes_the_after_hooks_which_may_reword_it() -> None:
    def reword(ctx: ToolResultContext) -> None:
        if ctx.outcome == "denied":
            ctx.result.content = f"[{ctx.outcome}] {ctx.result.content}"

    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "pay", {"invoice": "I"})]),
            ScriptedResponse.text("not paid"),
        ]
    )
    worker = Worker(client, tools=[pay])
    worker.add_after_tool_call_hook(reword)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("pay")
        assert paused.state is not None
        await worker.resume(paused.state, decisions={"c1": Decision.deny("no budget")})
    [result] = worker.history[-2].tool_results
    assert result.content == "[denied] Denied: no budget"
    assert RAN == []


async def test_a_hooks_approval_loses_to_a_later_hooks_skip() -> None:
    def approve(ctx: ToolCallContext) -> None:
        ctx.approved = True

    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "pay", {"invoice": "I"})]),
            ScriptedResponse.text("skipped"),
        ]
    )
    worker = Worker(client, tools=[pay])
    worker.add_before_tool_call_hook(approve)
    worker.add_before_tool_call_hook(lambda ctx: Skip("not today"))
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("pay")
    assert result.status is RunStatus.FINISHED and RAN == []
    assert "not today" in worker.history[-2].tool_results[0].content


@pytest.mark.parametrize("provider", ["openai_responses", "openai_chat"])
async def test_an_approval_streamed_over_a_real_wire_in_a_fresh_worker(provider: str) -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "pay", {"invoice": "INV-9"})]),
        ScriptedResponse.text("Paid INV-9.", chunk_size=3),
    ]
    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        with anyio.fail_after(TIMEOUT):
            async with Worker(client, tools=[pay]) as worker, worker.stream("pay") as first:
                _ = [event async for event in first]
            state = first.result.state
            assert state is not None and RAN == []
            [pending] = state.pending
            decisions = {pending.call.id: Decision.approve()}
            fresh = Worker(client, tools=[pay])
            loaded = PauseState.from_json(state.to_json())
            async with fresh.resume_stream(loaded, decisions=decisions) as resumed:
                events = [event async for event in resumed]
    assert RAN == ["INV-9"]
    assert isinstance(events[-1], RunCompleted)
    assert resumed.result.text == "Paid INV-9."
    assert b"INV-9 paid" in server.requests[1].body


@pytest.mark.parametrize(
    "point", ["on_message_send", "before_tool_call", "after_tool_call", "on_turn_end", "on_abort"]
)
async def test_a_plain_function_returning_a_coroutine_is_awaited_at_every_point(
    point: str,
) -> None:
    awaited: list[str] = []

    async def body(ctx: object) -> None:
        awaited.append(point)

    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "echo", {"text": "x"})]),
            ScriptedResponse.text("done"),
        ]
    )
    worker = Worker(client, tools=[echo])

    def plain(ctx: object) -> Coroutine[Any, Any, None]:  # not async: returns a coroutine
        return body(ctx)

    getattr(worker, f"add_{point}_hook")(plain)
    if point == "on_abort":
        worker.add_on_message_send_hook(lambda ctx: Cancel("stop"))
    with anyio.fail_after(TIMEOUT):
        await worker.run("go")
    assert awaited[:1] == [point]


async def test_a_stream_closed_from_another_task_while_read_stops_its_reader() -> None:
    worker = Worker(ScriptedClient([slow_text(), ScriptedResponse.text("next")]))
    seen: list[RunEvent] = []
    stream = worker.stream("go")

    async def read() -> None:
        async for event in stream:
            seen.append(event)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            while len(seen) < 3:
                await anyio.wait_all_tasks_blocked()
            await stream.aclose()  # a "stop" button, while the reader waits for the next event
        again = await worker.run("again")
    assert again.text == "next"
    with pytest.raises(ConfigurationError, match="no result"):
        _ = stream.result
