"""The Worker's loop, hooks, limits, cancellation and events, with a scripted model."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import (
    Aborted,
    HookError,
    LimitExceededError,
    Message,
    OverloadedError,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.events import StopReason, UsageEvent
from llm_worker.hooks import (
    Abort,
    AbortContext,
    Cancel,
    Continue,
    ContinueWithMessages,
    MessageSendContext,
    Skip,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
)
from llm_worker.state import RunCompleted, RunStatus, ToolResultReady, TurnEnded, TurnStarted
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


def call(tool_name: str, call_id: str = "", **args: Any) -> ToolUsePart:
    return ToolUsePart(call_id, tool_name, dict(args))


@tool
async def get_weather(city: str) -> str:
    """Get the weather of a city."""
    return f"Sunny in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def assert_paired(history: list[Message]) -> None:
    """Every tool call is followed by exactly one result, in order, in the next message."""
    for i, message in enumerate(history):
        if message.role == "assistant" and message.tool_uses:
            follower = history[i + 1]
            ids = [r.tool_use_id for r in follower.tool_results]
            assert ids == [c.id for c in message.tool_uses]


async def test_plain_answer_finishes_with_text_and_usage() -> None:
    client = ScriptedClient(
        [ScriptedResponse.text("Hello there.", usage=UsageEvent(input_tokens=10, output_tokens=3))]
    )
    worker = Worker(client)
    result = await worker.run("hi")
    assert result.status is RunStatus.FINISHED
    assert result.text == "Hello there."
    assert result.usage.input_tokens == 10
    assert result.usage.output_tokens == 3
    assert [m.role for m in worker.history] == ["user", "assistant"]
    assert result.messages == worker.history
    client.assert_all_used()


async def test_tool_loop_runs_calls_and_sends_results_in_call_order() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse(
                [
                    TextPart("Let me check."),
                    call("get_weather", city="Kyoto"),
                    call("add", a=2, b=3),
                ],
                usage=UsageEvent(input_tokens=5, output_tokens=5),
            ),
            ScriptedResponse.text(
                "Sunny, and 5.", usage=UsageEvent(input_tokens=7, output_tokens=2)
            ),
        ]
    )
    worker = Worker(client, tools=[get_weather, add])
    result = await worker.run("weather and sum?")
    assert result.status is RunStatus.FINISHED
    assert result.text == "Sunny, and 5."
    assert result.usage.input_tokens == 12
    assert result.requests == 2
    # Text before the calls is kept in the same assistant message and did not end the turn.
    first = worker.history[1]
    assert first.text == "Let me check."
    assert [c.name for c in first.tool_uses] == ["get_weather", "add"]
    results = worker.history[2].tool_results
    assert [r.content for r in results] == ["Sunny in Kyoto", "5"]
    assert not any(r.is_error for r in results)
    # The second request carried the results.
    sent = client.requests[1].messages
    assert sent[-1].tool_results == results
    assert [t.name for t in client.requests[0].tools] == ["get_weather", "add"]
    assert_paired(worker.history)


async def test_bad_calls_become_error_results_and_the_loop_goes_on() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([call("nope", x=1), call("add", a="not a number", b=1)]),
            ScriptedResponse.text("Sorry."),
        ]
    )
    worker = Worker(client, tools=[add])
    result = await worker.run("go")
    assert result.status is RunStatus.FINISHED
    unknown, invalid = worker.history[2].tool_results
    assert unknown.is_error and "nope" in unknown.content and "add" in unknown.content
    assert invalid.is_error and "a" in invalid.content


async def test_before_hooks_rewrite_in_order_and_first_decisive_result_ends_chain() -> None:
    seen: list[str] = []

    async def double_a(ctx: ToolCallContext) -> Continue:
        seen.append(f"first:{ctx.call.input['a']}")
        ctx.call.input["a"] = ctx.call.input["a"] * 2
        return Continue()

    async def skip_big(ctx: ToolCallContext) -> Skip | None:
        seen.append(f"second:{ctx.call.input['a']}")
        if ctx.call.input["a"] > 10:
            return Skip("too big")
        return None

    async def never(ctx: ToolCallContext) -> None:
        seen.append("third")

    client = ScriptedClient(
        [
            ScriptedResponse([call("add", a=1, b=1), call("add", a=50, b=1)]),
            ScriptedResponse.text("done"),
        ]
    )
    worker = Worker(client, tools=[add])
    worker.add_before_tool_call_hook(double_a)
    worker.add_before_tool_call_hook(skip_big)
    worker.add_before_tool_call_hook(never)
    await worker.run("go")
    assert seen == ["first:1", "second:2", "third", "first:50", "second:100"]
    ok, skipped = worker.history[2].tool_results
    assert ok.content == "3" and not ok.is_error
    assert skipped.is_error and "Skipped" in skipped.content and "too big" in skipped.content
    assert_paired(worker.history)


async def test_abort_runs_on_abort_hooks_and_raises() -> None:
    aborted: list[AbortContext] = []

    async def deny(ctx: ToolCallContext) -> Abort:
        return Abort("not allowed here")

    async def on_abort(ctx: AbortContext) -> None:
        aborted.append(ctx)

    client = ScriptedClient([ScriptedResponse([call("add", a=1, b=2)])])
    worker = Worker(client, tools=[add])
    worker.add_before_tool_call_hook(deny)
    worker.add_on_abort_hook(on_abort)
    with pytest.raises(Aborted, match="not allowed here"):
        await worker.run("go")
    assert [(a.kind, a.reason) for a in aborted] == [("aborted", "not allowed here")]
    assert_paired(worker.history)


async def test_after_hook_masks_result_and_sees_call() -> None:
    @tool
    def secret() -> str:
        """Return a secret."""
        return "the key is sk-12345"

    async def mask(ctx: ToolResultContext) -> None:
        assert ctx.call.name == "secret"
        ctx.result.content = ctx.result.content.replace("sk-12345", "[masked]")

    client = ScriptedClient([ScriptedResponse([call("secret")]), ScriptedResponse.text("ok")])
    worker = Worker(client, tools=[secret])
    worker.add_after_tool_call_hook(mask)
    await worker.run("go")
    assert worker.history[2].tool_results[0].content == "the key is [masked]"
    assert "sk-12345" not in str(client.requests[1].messages)


async def test_on_turn_end_continues_until_accepted_and_limits_continuations() -> None:
    async def want_json(ctx: TurnEndContext) -> ContinueWithMessages | None:
        if not ctx.text.startswith("{"):
            return ContinueWithMessages([Message.user("Answer in JSON.")])
        return None

    client = ScriptedClient([ScriptedResponse.text("plain"), ScriptedResponse.text('{"a": 1}')])
    worker = Worker(client)
    worker.add_on_turn_end_hook(want_json)
    result = await worker.run("go")
    assert result.status is RunStatus.FINISHED
    assert result.text == '{"a": 1}'
    assert client.requests[1].messages[-1].text == "Answer in JSON."

    stubborn = ScriptedClient([ScriptedResponse.text("plain") for _ in range(3)])
    worker = Worker(stubborn, max_continuations=2)
    worker.add_on_turn_end_hook(want_json)
    with pytest.raises(LimitExceededError) as info:
        await worker.run("go")
    assert info.value.limit == "max_continuations"


async def test_max_requests_bounds_a_tool_loop() -> None:
    client = ScriptedClient([ScriptedResponse([call("add", a=1, b=1)]) for _ in range(3)])
    worker = Worker(client, tools=[add], max_requests=3)
    with pytest.raises(LimitExceededError, match="max_requests=3"):
        await worker.run("loop forever")
    assert client.remaining == 0
    assert_paired(worker.history)


async def test_on_message_send_edits_the_request_or_cancels() -> None:
    async def inject(ctx: MessageSendContext) -> None:
        ctx.messages.insert(0, Message.user("[context]"))
        ctx.request.temperature = 0.0

    client = ScriptedClient([ScriptedResponse.text("ok")])
    worker = Worker(client)
    worker.add_on_message_send_hook(inject)
    await worker.run("hi")
    assert client.requests[0].messages[0].text == "[context]"
    assert client.requests[0].temperature == 0.0
    assert worker.history[0].text == "hi"  # the history itself is unchanged

    async def stop(ctx: MessageSendContext) -> Cancel:
        return Cancel("budget exhausted")

    aborted: list[str] = []

    async def on_abort(ctx: AbortContext) -> None:
        aborted.append(ctx.kind)

    worker = Worker(ScriptedClient([]))
    worker.add_on_message_send_hook(stop)
    worker.add_on_abort_hook(on_abort)
    result = await worker.run("hi")
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "budget exhausted"
    assert aborted == ["cancelled"]


async def test_a_raising_hook_ends_the_run_with_its_name_after_on_abort() -> None:
    async def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("boom")

    calls: list[str] = []

    async def on_abort(ctx: AbortContext) -> None:
        calls.append(ctx.kind)
        assert isinstance(ctx.error, HookError)

    worker = Worker(ScriptedClient([ScriptedResponse([call("add", a=1, b=1)])]), tools=[add])
    worker.add_before_tool_call_hook(broken)
    worker.add_on_abort_hook(on_abort)
    with pytest.raises(HookError, match="broken") as info:
        await worker.run("go")
    assert info.value.kind == "before_tool_call"
    assert calls == ["failed"]
    assert_paired(worker.history)


async def test_hook_timeout() -> None:
    never = anyio.Event()

    async def slow(ctx: MessageSendContext) -> None:
        await never.wait()

    worker = Worker(ScriptedClient([ScriptedResponse.text("x")]))
    worker.add_on_message_send_hook(slow, timeout=0.05)
    with anyio.fail_after(5), pytest.raises(HookError, match="timeout"):
        await worker.run("hi")


async def test_hooks_object_registers_its_methods() -> None:
    class Audit:
        def __init__(self) -> None:
            self.log: list[str] = []

        async def on_message_send(self, ctx: MessageSendContext) -> None:
            self.log.append("send")

        async def before_tool_call(self, ctx: ToolCallContext) -> None:
            self.log.append(f"before:{ctx.call.name}")

        async def after_tool_call(self, ctx: ToolResultContext) -> None:
            self.log.append(f"after:{ctx.result.content}")

        async def on_turn_end(self, ctx: TurnEndContext) -> None:
            self.log.append("end")

    audit = Audit()
    client = ScriptedClient([ScriptedResponse([call("add", a=1, b=2)]), ScriptedResponse.text("3")])
    worker = Worker(client, tools=[add])
    worker.add_hooks(audit)
    await worker.run("go")
    assert audit.log == ["send", "before:add", "after:3", "send", "end"]


async def test_tools_run_concurrently_and_exclusive_tools_alone() -> None:
    started: list[str] = []
    all_started = anyio.Event()
    active = 0
    max_active = 0

    @tool(effect="read_only")
    async def wait_all(name: str) -> str:
        """Wait until all four have started."""
        nonlocal active, max_active
        started.append(name)
        active += 1
        max_active = max(max_active, active)
        if len(started) == 4:
            all_started.set()
        await all_started.wait()
        active -= 1
        return name

    @tool(exclusive=True)
    async def alone() -> str:
        """Must run alone."""
        assert active == 0
        return "alone"

    client = ScriptedClient(
        [
            ScriptedResponse([*(call("wait_all", name=n) for n in "abcd"), call("alone")]),
            ScriptedResponse.text("done"),
        ]
    )
    worker = Worker(client, tools=[wait_all, alone])
    with anyio.fail_after(5):
        await worker.run("go")
    assert max_active == 4
    assert [r.content for r in worker.history[2].tool_results] == ["a", "b", "c", "d", "alone"]


async def test_stream_yields_events_results_in_call_order_and_the_result_last() -> None:
    release_first = anyio.Event()

    @tool
    async def slow(n: int) -> str:
        """Finish in reverse order."""
        if n == 0:
            await release_first.wait()
        else:
            release_first.set()
        return str(n)

    client = ScriptedClient(
        [ScriptedResponse([call("slow", n=0), call("slow", n=1)]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[slow])
    events: list[Any] = []
    with anyio.fail_after(5):
        async for event in worker.stream("go"):
            events.append(event)
    assert isinstance(events[0], TurnStarted)
    assert isinstance(events[-1], RunCompleted)
    assert isinstance(events[-2], TurnEnded)
    assert events[-1].result.text == "ok"
    ready = [e.result.content for e in events if isinstance(e, ToolResultReady)]
    assert ready == ["0", "1"]


async def test_subscriber_gets_scoped_blocks_completions_and_turns() -> None:
    class UI:
        def __init__(self) -> None:
            self.log: list[str] = []

        def new_text_block_scope(self) -> list[str]:
            return []

        def on_text_block(self, scope: list[str], event: Any) -> None:
            from llm_worker.events import TextDelta

            if isinstance(event, TextDelta):
                scope.append(event.text)
                self.log.append("".join(scope))

        def on_text_complete(self, text: str) -> None:
            self.log.append(f"complete:{text}")

        def on_tool_call_complete(self, c: Any) -> None:
            self.log.append(f"call:{c.name}")

        def on_turn_start(self, turn: int) -> None:
            self.log.append(f"start:{turn}")

        def on_turn_end(self, turn: int) -> None:
            self.log.append(f"end:{turn}")

    ui = UI()
    client = ScriptedClient(
        [
            ScriptedResponse([TextPart("abcd"), call("add", a=1, b=1)], chunk_size=2),
            ScriptedResponse.text("ef", chunk_size=1),
        ]
    )
    worker = Worker(client, tools=[add])
    worker.subscribe(ui)
    await worker.run("go")
    assert ui.log == [
        "start:0",
        "ab",
        "abcd",
        "complete:abcd",
        "call:add",
        "e",
        "ef",
        "complete:ef",
        "end:0",
    ]


async def test_overloaded_mid_stream_is_retried_and_handlers_see_the_abort() -> None:
    aborts: list[Any] = []
    overloaded = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
    client = ScriptedClient(
        [
            ScriptedResponse(
                [TextPart("partial")],
                fail_with=overloaded,
                usage=UsageEvent(input_tokens=3, output_tokens=1),
            ),
            ScriptedResponse.text("complete", usage=UsageEvent(input_tokens=3, output_tokens=2)),
        ]
    )
    from llm_worker.worker._turn import StreamRetry

    worker = Worker(client, stream_retry=StreamRetry(delay=0))
    worker.timeline.on_text_block(
        lambda e: aborts.append(e) if "Abort" in type(e).__name__ else None
    )
    result = await worker.run("hi")
    assert result.text == "complete"
    assert len(aborts) == 1
    assert result.requests == 1
    assert [m.role for m in worker.history] == ["user", "assistant"]

    failing = ScriptedClient([ScriptedResponse([TextPart("x")], fail_with=overloaded)])
    worker = Worker(failing, stream_retry=StreamRetry(max_retries=0))
    with pytest.raises(OverloadedError):
        await worker.run("hi")
    assert [m.role for m in worker.history] == ["user"]


async def test_history_loaded_with_a_dangling_call_is_repaired_before_sending() -> None:
    history = [
        Message.user("go"),
        Message("assistant", [call("add", "c1", a=1, b=1), call("add", "c2", a=2, b=2)]),
        Message("user", [ToolResultPart("c2", "4"), ToolResultPart("zzz", "orphan")]),
    ]
    client = ScriptedClient([ScriptedResponse.text("ok")])
    worker = Worker(client, tools=[add], history=history)
    await worker.run("and now?")
    sent = client.requests[0].messages
    results = sent[2].tool_results
    assert [r.tool_use_id for r in results] == ["c1", "c2"]
    assert results[0].is_error and "interrupted" in results[0].content
    assert results[1].content == "4"
    assert_paired(sent)


async def test_thinking_and_signatures_reach_the_history_with_their_origin() -> None:
    client = ScriptedClient(
        [ScriptedResponse([ThinkingPart("hmm", signature="sig=="), TextPart("answer")])],
        model="m1",
        provider="anthropic",
    )
    worker = Worker(client)
    await worker.run("hi")
    thinking = worker.history[1].content[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.signature == "sig=="
    assert thinking.origin is not None and thinking.origin.provider == "anthropic"


async def test_pause_turn_stop_reason_sends_the_answer_back() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse.text("searching…", stop_reason=StopReason.PAUSE_TURN),
            ScriptedResponse.text("found it"),
        ]
    )
    worker = Worker(client)
    result = await worker.run("search")
    assert result.text == "found it"
    assert result.requests == 2


@pytest.mark.parametrize("early", [True, False])
async def test_early_start_runs_a_tool_while_the_answer_still_streams(early: bool) -> None:
    log: list[str] = []

    @tool(effect="read_only")
    async def lookup(key: str) -> str:
        """Look a key up."""
        log.append("tool done")
        return key.upper()

    def on_text(event: object) -> None:
        if type(event).__name__ == "TextBlockStop":
            log.append("stream done")

    slow_tail = TextPart("and more text " * 10)
    client = ScriptedClient(
        [
            ScriptedResponse([call("lookup", key="k"), slow_tail], chunk_size=4, delay=0.002),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[lookup], early_tool_start=early)
    worker.timeline.on_text_block(on_text)
    with anyio.fail_after(10):
        result = await worker.run("go")
    assert result.text == "ok"
    expected = ["tool done", "stream done"] if early else ["stream done", "tool done"]
    assert log[:2] == expected
    assert worker.history[2].tool_results[0].content == "K"
    assert_paired(worker.history)


async def test_an_empty_final_answer_is_not_confused_with_an_earlier_one() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([TextPart("Checking."), call("add", a=1, b=2)]),
            ScriptedResponse([], stop_reason=StopReason.CONTENT_FILTER),
        ]
    )
    worker = Worker(client, tools=[add])
    result = await worker.run("go")
    assert result.status is RunStatus.FINISHED
    assert result.text == ""
    assert result.stop_reason is StopReason.CONTENT_FILTER


async def test_result_reports_a_truncated_answer() -> None:
    client = ScriptedClient([ScriptedResponse.text("cut he", stop_reason=StopReason.MAX_TOKENS)])
    result = await Worker(client).run("go")
    assert result.text == "cut he"
    assert result.stop_reason is StopReason.MAX_TOKENS


async def test_a_hook_can_supply_arguments_for_a_call_whose_own_did_not_parse() -> None:
    from collections.abc import AsyncIterator

    from llm_worker import Request
    from llm_worker.events import (
        BlockDelta,
        BlockStart,
        BlockStop,
        BlockType,
        Event,
        InputJsonDelta,
        TextDelta,
        TextMetadata,
        ToolUseMetadata,
    )

    class RawClient:
        """Plays raw events: here a call whose JSON arguments were cut."""

        provider = "raw"
        model = "m"

        def __init__(self) -> None:
            self.answers: list[list[Event]] = [
                [
                    BlockStart(0, BlockType.TOOL_USE, ToolUseMetadata("c1", "add")),
                    BlockDelta(0, InputJsonDelta('{"a": 1, "b":')),
                    BlockStop(0, BlockType.TOOL_USE, StopReason.TOOL_USE),
                ],
                [
                    BlockStart(0, BlockType.TEXT, TextMetadata()),
                    BlockDelta(0, TextDelta("done")),
                    BlockStop(0, BlockType.TEXT, StopReason.END_TURN),
                ],
            ]
            self.requests: list[Request] = []

        async def stream(self, request: Request) -> AsyncIterator[Event]:
            self.requests.append(request)
            for event in self.answers.pop(0):
                yield event

    seen: list[str | None] = []

    async def fix_arguments(ctx: ToolCallContext) -> None:
        seen.append(ctx.call.error)
        if ctx.call.error is not None:
            ctx.call.input = {"a": 1, "b": 2}

    client = RawClient()
    worker = Worker(client, tools=[add])
    worker.add_before_tool_call_hook(fix_arguments)
    result = await worker.run("go")
    assert result.text == "done"
    assert seen[0] is not None and "add" in seen[0]
    answer = client.requests[1].messages[-1].tool_results[0]
    assert answer.content == "3"
    assert not answer.is_error


async def test_an_empty_block_completes_no_text() -> None:
    texts: list[str] = []
    client = ScriptedClient([ScriptedResponse([], stop_reason=StopReason.MAX_TOKENS)])
    worker = Worker(client)
    worker.on_text_complete(texts.append)
    await worker.run("go")
    assert texts == []


async def test_after_hooks_run_in_call_order_when_calls_finish_in_reverse() -> None:
    release_first = anyio.Event()

    @tool
    async def slow(n: int) -> str:
        """Finish in reverse order: the first call waits for the last to start."""
        if n == 0:
            await release_first.wait()
        else:
            release_first.set()
        return str(n)

    seen: list[str] = []

    async def record(ctx: ToolResultContext) -> None:
        seen.append(ctx.result.content)

    client = ScriptedClient(
        [ScriptedResponse([call("slow", n=0), call("slow", n=1)]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[slow])
    worker.add_after_tool_call_hook(record)
    with anyio.fail_after(5):
        await worker.run("go")
    assert seen == ["0", "1"]
