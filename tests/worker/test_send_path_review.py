"""Review probes of the request send path (issue 32): edits in place by on_message_send hooks.

A hook may edit any old message in place — its text, a part's other fields, a tool result's
media, a provider block's data, a part added, taken out, replaced or moved — or change the
list itself. Each such request must still be valid, and each edit of what the previous request
sent must be a `CacheMiss` naming the message and part.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from llm_worker import Message, RunStatus, TextPart, ToolResultPart, ToolUsePart, Worker, tool
from llm_worker.errors import ProviderError
from llm_worker.events import Event, UsageEvent
from llm_worker.hooks import MessageSendContext
from llm_worker.messages import ImagePart, ProviderPart, Request, ThinkingPart
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=10, output_tokens=5)
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


def problems(messages: list[Message]) -> list[str]:
    """What a provider would refuse: a call without its result, a result without its call."""
    found: list[str] = []
    for i, message in enumerate(messages):
        calls = [c.id for c in message.tool_uses] if message.role == "assistant" else []
        before = messages[i - 1] if i else None
        asked = {c.id for c in before.tool_uses} if before and before.role == "assistant" else set()
        found += [
            f"orphan {r.tool_use_id}" for r in message.tool_results if r.tool_use_id not in asked
        ]
        after = messages[i + 1] if i + 1 < len(messages) else None
        if calls and after is not None and [r.tool_use_id for r in after.tool_results] != calls:
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


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}"


def looping(turns: int) -> Strict:
    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= turns - 1:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        return ScriptedResponse(
            [
                ThinkingPart("hm", signature="sig"),
                TextPart("reading"),
                ToolUsePart("", "read", {"n": request.index, "deep": {"k": [1]}}),
            ],
            usage=USAGE,
        )

    return Strict(step)


def _assistant(ctx: MessageSendContext) -> Message:
    return ctx.messages[1]  # the first answer: thinking, text, a call


def _results(ctx: MessageSendContext) -> Message:
    return ctx.messages[2]  # the first call's result


def _call(ctx: MessageSendContext) -> ToolUsePart:
    part = _assistant(ctx).content[2]
    assert isinstance(part, ToolUsePart)
    return part


def _result(ctx: MessageSendContext) -> ToolResultPart:
    part = _results(ctx).content[0]
    assert isinstance(part, ToolResultPart)
    return part


def _image(ctx: MessageSendContext) -> None:
    _result(ctx).media[0] = ImagePart(PNG + b"x", "image/png")


def _image_url(ctx: MessageSendContext) -> None:
    image = _result(ctx).media[0]
    assert isinstance(image, ImagePart)
    image.data = PNG + b"y"


def _provider(ctx: MessageSendContext) -> None:
    part = ctx.messages[0].content[1]
    assert isinstance(part, ProviderPart)
    part.data["kind"] = "edited"


def _redacted(ctx: MessageSendContext) -> None:
    part = _assistant(ctx).content[0]
    assert isinstance(part, ThinkingPart)
    part.redacted = "opaque"


def _signature(ctx: MessageSendContext) -> None:
    _call(ctx).signature = "thought"


# (what the hook does at request 5, the message and part the miss names)
EDITS: dict[str, tuple[Callable[[MessageSendContext], object], int, int | None]] = {
    "text": (lambda c: setattr(_assistant(c).content[1], "text", "edited"), 1, 1),
    "part appended": (lambda c: _assistant(c).content.append(TextPart("note")), 1, 3),
    "part deleted": (lambda c: _assistant(c).content.pop(1), 1, 1),
    "parts reordered": (lambda c: _assistant(c).content.reverse(), 1, 0),
    "part replaced": (lambda c: _assistant(c).content.__setitem__(1, TextPart("x")), 1, 1),
    "nested argument": (lambda c: _call(c).input["deep"]["k"].append(2), 1, 2),
    "call renamed": (lambda c: setattr(_call(c), "name", "other"), 1, 2),
    "call id forged": (lambda c: setattr(_call(c), "id", "forged"), 1, 2),
    "result id forged": (lambda c: setattr(_result(c), "tool_use_id", "forged"), 2, 0),
    "result text": (lambda c: setattr(_result(c), "content", "edited"), 2, 0),
    "result media replaced": (_image, 2, 0),
    "result image edited": (_image_url, 2, 0),
    "provider block data": (_provider, 0, 1),
    "thinking redacted": (_redacted, 1, 0),
    "call signature": (_signature, 1, 2),
    "message deleted": (lambda c: c.messages.pop(2), 2, 0),
    "messages reordered": (lambda c: c.messages.insert(1, c.messages.pop(3)), 1, 2),
    "message replaced": (lambda c: c.messages.__setitem__(3, Message.user("hi")), 3, None),
}


@pytest.mark.parametrize("edit", list(EDITS))
async def test_an_old_message_edited_any_way_is_sent_valid_and_told_as_a_miss(edit: str) -> None:
    do, index, part = EDITS[edit]

    def hook(ctx: MessageSendContext) -> None:
        if ctx.request_number == 5:
            do(ctx)

    def with_media(ctx: MessageSendContext) -> None:
        if ctx.request_number == 2:  # the first result carries an image from the start
            _result(ctx).media.append(ImagePart(PNG, "image/png"))

    client = looping(8)
    worker = Worker(client, tools=[read], max_requests=8)
    worker.add_on_message_send_hook(with_media)
    worker.add_on_message_send_hook(hook)
    first = Message("user", [TextPart("read"), ProviderPart({"kind": "x"})])
    result = await worker.run([first])
    assert result.status is RunStatus.FINISHED, result
    assert client.refused == 0
    assert all(not problems(r.messages) for r in client.requests[4:])
    misses = [(m.request, m.index, m.part) for m in result.cache_misses]
    assert misses[-1:] == [(5, index, part)] or (5, index, part) in misses, misses


def _answer_every(request: ScriptedRequest) -> ScriptedResponse:
    if request.index >= 99:
        return ScriptedResponse([TextPart("done")], usage=USAGE)
    return ScriptedResponse([ToolUsePart("", "read", {"n": request.index})], usage=USAGE)


@pytest.mark.parametrize(
    "reads",
    [
        "tenth",
        pytest.param(
            "all",
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a hook that only iterates ctx.messages makes the Worker print every "
                    "message twice per request (worker/_lent.py: before and after the hooks), "
                    "so its per-turn CPU grows with the history: 0.28 ms per turn at turn "
                    "1,000 without such a hook, 7.5 ms with it (the hook's own loop: 0.015 "
                    "ms; a wire's body serialization at turn 1,000: 4.6-11.5 ms)"
                ),
            ),
        ),
    ],
)
async def test_the_prints_per_request_do_not_grow_with_the_history(
    reads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hook that edits an old message in place every tenth request (read by index), or one
    # that reads every message (a logger, a token counter) and edits none.
    from llm_worker.worker import _lent

    prints: list[int] = []
    real = _lent.sent_print

    def counted(message: Message) -> object:
        prints[-1] += 1
        return real(message)

    monkeypatch.setattr(_lent, "sent_print", counted)

    def hook(ctx: MessageSendContext) -> None:
        prints.append(0)
        if reads == "all":
            assert sum(len(m.content) for m in ctx.messages) > 0
        elif ctx.request_number % 10 == 0:
            part = ctx.messages[0].content[0]
            assert isinstance(part, TextPart)
            part.text = f"at {ctx.request_number}: read"

    worker = Worker(Strict(_answer_every), tools=[read], max_requests=100)
    worker.add_on_message_send_hook(hook)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED and len(prints) == 100
    assert not problems(worker.history)
    if reads == "tenth":
        assert [m.request for m in result.cache_misses] == list(range(10, 101, 10))
    assert max(prints[-20:]) <= 4, prints[-20:]  # a few at the end as at the start


@pytest.mark.parametrize("at", [5, 7])
async def test_a_hook_that_edits_in_place_and_leaves_a_message_out_keeps_the_history_valid(
    at: int,
) -> None:
    # The request fits (the results left out with their calls), the history does not: its
    # message 2 answered calls no longer there. It stayed so for good (a resumed Worker, a
    # session, `worker.history` all carried the orphan result).
    def hook(ctx: MessageSendContext) -> None:
        if ctx.request_number == at:
            old = ctx.messages[1]
            old.content[:] = [p for p in old.content if not isinstance(p, ToolUsePart)]
            del ctx.messages[2]

    client = looping(8)
    worker = Worker(client, tools=[read], max_requests=20)
    worker.add_on_message_send_hook(hook)
    result = await worker.run("read")
    assert result.status is RunStatus.FINISHED and client.refused == 0
    again = await worker.run("and now?")  # the history checked again before this request
    assert again.status is RunStatus.FINISHED and client.refused == 0
    assert not problems(worker.history)
    # (the requests before the edit share its message object: they read edited now)
    assert all(not problems(r.messages) for r in client.requests[at - 1 :])


async def test_a_state_edited_in_its_json_and_resumed_in_the_same_worker_is_checked_again() -> None:
    # The same Worker keeps its checks' prefix from before the pause: the resumed history
    # (new objects, one answer without its calls now) must not be trusted by it.
    import json

    from llm_worker import PauseState
    from llm_worker.hooks import Pause, ToolCallContext

    def pause_fifth(ctx: ToolCallContext) -> Pause | None:
        return Pause("ok?") if ctx.call.input["n"] == 4 and not ctx.resumed else None

    client = looping(8)
    worker = Worker(client, tools=[read], max_requests=20)
    worker.add_before_tool_call_hook(pause_fifth)
    paused = await worker.run("read")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    doc = json.loads(paused.state.to_json())
    answer = doc["history"][1]
    answer["content"] = [p for p in answer["content"] if p.get("type") != "tool_use"]
    done = await worker.resume(PauseState.from_json(json.dumps(doc)))
    assert done.status is RunStatus.FINISHED and client.refused == 0
    assert not problems(worker.history)
    assert all(not problems(r.messages) for r in client.requests[5:])
    assert [(m.index, m.part) for m in done.cache_misses][:1] == [(1, 2)]
