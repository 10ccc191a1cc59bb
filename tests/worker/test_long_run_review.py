"""Review probes of the incremental history check (issue 32, item 1).

The per-request check looks at new messages only; a message edited in place further back is
what it cannot see. Such an edit must not fail the run: the provider's refusal (HTTP 400) makes
the check start over and the request go again, repaired.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from llm_worker import (
    Message,
    PauseState,
    RunStatus,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.errors import ProviderError
from llm_worker.events import Event, UsageEvent
from llm_worker.hooks import MessageSendContext, Pause, ToolCallContext
from llm_worker.messages import Request
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=10, output_tokens=5)


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}"


def problems(messages: list[Message]) -> list[str]:
    """What a provider would refuse: a call without its result, a result without its call."""
    found: list[str] = []
    for i, message in enumerate(messages):
        calls = [c.id for c in message.tool_uses] if message.role == "assistant" else []
        after = messages[i + 1] if i + 1 < len(messages) else None
        if message.role == "user":
            before = messages[i - 1] if i else None
            asked = (
                {c.id for c in before.tool_uses} if before and before.role == "assistant" else set()
            )
            found += [
                f"orphan {r.tool_use_id}"
                for r in message.tool_results
                if r.tool_use_id not in asked
            ]
        if calls and after is not None:
            answered = [r.tool_use_id for r in after.tool_results]
            if answered != calls:
                found.append(f"unanswered {calls} at {i}")
    return found


class Strict(ScriptedClient):
    """A scripted model that refuses a malformed history as a provider does (HTTP 400)."""

    refused: int = 0

    def stream(self, request: Request) -> AsyncIterator[Event]:
        wrong = problems(request.messages)
        if wrong:
            self.refused += 1
            raise ProviderError(f"invalid history: {wrong}", status_code=400)
        return super().stream(request)


def looping(turns: int) -> Strict:
    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= turns - 1:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        return ScriptedResponse(
            [TextPart("reading"), ToolUsePart("", "read", {"n": request.index})], usage=USAGE
        )

    return Strict(step)


def thin_message_one(ctx: MessageSendContext) -> None:
    """Take the calls out of an old assistant message, in place (the history's too)."""
    if ctx.request_number == 5:
        old = ctx.messages[1]
        old.content[:] = [p for p in old.content if not isinstance(p, ToolUsePart)]


async def test_an_old_message_edited_in_place_by_a_hook_is_repaired_before_sending() -> None:
    # It was seen only once the provider refused the request (HTTP 400): one wasted round
    # trip, and no repair at all with a provider that takes a broken history silently.
    client = looping(8)
    worker = Worker(client, tools=[read], max_requests=8)
    worker.add_on_message_send_hook(thin_message_one)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED and result.text == "done"
    assert client.refused == 0  # the hook's edit was checked before the request went
    # (the requests before the edit share its message object: they read edited now)
    assert all(not problems(r.messages) for r in client.requests[4:])
    assert not problems(worker.history)
    assert worker.history[1] == Message("assistant", [TextPart("reading")])
    assert not worker.history[2].tool_results  # the results of the calls taken out, gone


@pytest.mark.parametrize("how", ["index", "iterate", "reversed", "slice", "request"])
async def test_a_call_taken_out_in_place_is_seen_however_the_hook_reached_it(how: str) -> None:
    def reach(ctx: MessageSendContext) -> Message:
        if how == "index":
            return ctx.messages[-6]
        if how == "iterate":
            return [m for m in ctx.messages if m.role == "assistant"][-3]
        if how == "reversed":
            return [m for m in reversed(ctx.messages) if m.role == "assistant"][2]
        if how == "slice":
            return ctx.messages[-7:-5][1]
        return ctx.request.messages[-6]

    def thin(ctx: MessageSendContext) -> None:
        if ctx.request_number == 6:
            old = reach(ctx)
            assert old.role == "assistant" and old.tool_uses
            old.content[:] = [p for p in old.content if not isinstance(p, ToolUsePart)]

    client = looping(8)
    worker = Worker(client, tools=[read], max_requests=8)
    worker.add_on_message_send_hook(thin)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED
    assert client.refused == 0
    assert all(not problems(r.messages) for r in client.requests[5:])
    assert not problems(worker.history)


async def test_a_hook_reading_every_message_without_editing_tells_no_miss() -> None:
    seen: list[int] = []

    def count(ctx: MessageSendContext) -> None:
        seen.append(sum(len(m.content) for m in ctx.messages))

    worker = Worker(looping(5), tools=[read])
    worker.add_on_message_send_hook(count)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED and len(seen) == 5
    assert result.cache_misses == []


async def test_a_part_edited_in_place_and_a_call_input_edited_are_misses() -> None:
    def edit(ctx: MessageSendContext) -> None:
        if ctx.request_number == 3:
            first = ctx.messages[0].content[0]
            assert isinstance(first, TextPart)
            first.text += " (now)"  # the part object kept, its text changed
        if ctx.request_number == 4:
            call = ctx.messages[1].content[1]
            assert isinstance(call, ToolUsePart)
            call.input["n"] = 99  # the arguments' dict, edited in place

    worker = Worker(looping(5), tools=[read])
    worker.add_on_message_send_hook(edit)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED
    text, call = result.cache_misses
    assert (text.request, text.index, text.part, text.offset) == (3, 0, 0, len("read"))
    assert text.after.startswith(" (now)")
    assert (call.request, call.index, call.part) == (4, 1, 1)
    assert call.before.startswith("0") and call.after.startswith("99")


async def test_an_old_message_edited_in_place_between_runs_is_repaired_when_refused() -> None:
    client = looping(4)
    worker = Worker(client, tools=[read], max_requests=10)
    await worker.run("read")
    worker.history[2].content.clear()  # the first results, gone in place
    worker.history[2].content.append(TextPart("results were here"))
    again = await worker.run("more?")
    assert again.status is RunStatus.FINISHED
    assert not problems(client.requests[-1].messages)
    assert not problems(worker.history)
    synthesized = worker.history[2].tool_results[0]
    assert isinstance(synthesized, ToolResultPart) and synthesized.is_error


async def test_a_refusal_the_history_does_not_explain_is_raised_at_once() -> None:
    attempts: list[Request] = []

    class Refusing(ScriptedClient):
        def stream(self, request: Request) -> AsyncIterator[Event]:
            attempts.append(request)
            raise ProviderError("bad model", status_code=400)

    worker = Worker(Refusing([ScriptedResponse([TextPart("never")])]), max_requests=3)
    with pytest.raises(ProviderError, match="bad model"):
        await worker.run("hi")
    assert len(attempts) == 1  # a full check found nothing to repair: not sent again


async def test_the_checks_hold_across_pause_json_resume_and_a_reassigned_history() -> None:
    def pause_third(ctx: ToolCallContext) -> Pause | None:
        return Pause("ok?") if ctx.call.input["n"] == 2 and not ctx.resumed else None

    client = looping(8)
    first = Worker(client, tools=[read], max_requests=10)
    first.add_before_tool_call_hook(pause_third)
    paused = await first.run("read")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    second = Worker(client, tools=[read], max_requests=10)
    second.add_before_tool_call_hook(pause_third)
    second.add_on_message_send_hook(thin_message_one)
    done = await second.resume(state)
    assert done.status is RunStatus.FINISHED
    assert not problems(second.history)
    # A history assigned between runs: a new list, checked from its changed point.
    second.history = [*second.history[:4], Message.user("short again")]
    last = await second.run("go on")
    assert last.status is RunStatus.FINISHED
    assert not problems(client.requests[-1].messages)


async def test_a_miss_never_shows_a_short_secret_in_its_log_repr_or_an_unkeyed_hash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import hashlib

    from llm_worker.state import CacheMiss

    pins = iter(["4921", "\U0001f511\ud800 7734"])  # the second: unicode and a lone surrogate

    def pin(ctx: MessageSendContext) -> None:
        ctx.request.system = f"The PIN is {next(pins)}."

    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("", "read", {"n": 1})], usage=USAGE),
            ScriptedResponse([TextPart("ok")], usage=USAGE),
        ]
    )
    worker = Worker(client, tools=[read], system="x")
    worker.add_on_message_send_hook(pin)
    with caplog.at_level("INFO", logger="llm_worker"):
        result = await worker.run("go")
    (miss,) = result.cache_misses
    assert isinstance(miss, CacheMiss)
    assert (miss.where, miss.index, miss.offset) == ("system", None, len("The PIN is "))
    assert miss.before.startswith("4921") and miss.after.startswith("\U0001f511\ud800")
    shown = caplog.text + repr(miss) + str(miss)
    assert "4921" not in shown and "7734" not in shown
    for text in ("The PIN is 4921.", "4921"):  # an attacker's candidates, hashed unkeyed
        unkeyed = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        assert unkeyed not in shown


async def test_a_run_cancelled_mid_answer_leaves_the_checks_consistent() -> None:
    import anyio

    started = anyio.Event()

    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index == 3:  # the fourth answer streams slowly: cancelled in the middle
            started.set()
            return ScriptedResponse([TextPart("x" * 400)], chunk_size=1, delay=0.05)
        if request.index >= 4:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        return ScriptedResponse([ToolUsePart("", "read", {"n": request.index})], usage=USAGE)

    client = Strict(step)
    worker = Worker(client, tools=[read], max_requests=10)
    with anyio.move_on_after(10):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                await worker.run("read")

            group.start_soon(run)
            await started.wait()
            group.cancel_scope.cancel()
    assert not problems(worker.history)
    worker.history[1].content.clear()  # and an old message edited in place meanwhile
    worker.history[1].content.append(TextPart("thinking aloud"))
    with anyio.fail_after(10):
        again = await worker.run("go on")
    assert again.status is RunStatus.FINISHED and again.text == "done"
    assert not problems(client.requests[-1].messages) and not problems(worker.history)


async def test_a_timestamp_put_in_place_into_the_first_message_is_a_miss() -> None:
    stamps = iter(range(100))

    def stamp(ctx: MessageSendContext) -> None:
        ctx.messages[0].content[0] = TextPart(f"at {next(stamps)}: read")

    client = looping(4)
    worker = Worker(client, tools=[read])
    worker.add_on_message_send_hook(stamp)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED
    assert result.cache_misses and result.cache_misses[0].index == 0


@pytest.mark.parametrize("wire", ["anthropic", "gemini"])
async def test_an_edit_in_place_holds_across_pause_json_resume_over_a_wire(wire: str) -> None:
    import anyio

    from llm_worker.testing import ScriptedModelServer

    stamps = iter(range(100))

    def stamp(ctx: MessageSendContext) -> None:
        first = ctx.messages[0].content[0]
        assert isinstance(first, TextPart)
        first.text = f"at {next(stamps)}: read"  # the part kept, its text edited in place

    def pause_second(ctx: ToolCallContext) -> Pause | None:
        return Pause("ok?") if ctx.call.input["n"] == 1 and not ctx.resumed else None

    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= 3:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        return ScriptedResponse([ToolUsePart("", "read", {"n": request.index})], usage=USAGE)

    async with ScriptedModelServer(wire, step) as server, server.client() as client:
        first = Worker(client, tools=[read])
        first.add_on_message_send_hook(stamp)
        first.add_before_tool_call_hook(pause_second)
        with anyio.fail_after(30):
            paused = await first.run("read")
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        assert [m.index for m in paused.cache_misses] == [0]  # request 2, the first message
        second = Worker(client, tools=[read])
        second.add_on_message_send_hook(stamp)
        second.add_before_tool_call_hook(pause_second)
        with anyio.fail_after(30):
            done = await second.resume(PauseState.from_json(paused.state.to_json()))
        assert done.status is RunStatus.FINISHED and done.text == "done"
        # Numbered on from the paused run: the resumed Worker's first request (3) has no
        # previous one of its own to compare with; its second (4) does.
        assert [(m.request, m.index, m.part) for m in done.cache_misses] == [(4, 0, 0)]
        bodies = [r.body.decode() for r in server.requests]
        assert all(f"at {i}: read" in body for i, body in enumerate(bodies))
