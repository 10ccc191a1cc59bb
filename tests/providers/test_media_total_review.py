"""Review of the request's media total counted as the parts go into the body (`MediaTotal`).

The total lives in a context variable while one body's messages are built: these probes
cross it with builds interleaved in two threads, a build made inside another build (a second
provider's body), and the Worker's send path over the four wires — an image in an old
message, one in the new input, and one a hook adds just before sending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import ModuleType
from typing import Any

import anyio
import pytest

from llm_worker import ImagePart, Message, PauseState, ToolResultPart, ToolUsePart, Worker
from llm_worker.errors import MediaError
from llm_worker.hooks import MessageSendContext
from llm_worker.messages import Part
from llm_worker.providers import (
    _anthropic_request,
    _gemini_request,
    _media,
    _openai_chat_request,
    _openai_responses_request,
)
from llm_worker.providers._anthropic_request import build_body as anthropic_body
from llm_worker.providers._base import Request
from llm_worker.providers._body import encoded
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.providers._openai_responses_request import build_body as responses_body
from llm_worker.testing import (
    WIRE_PROVIDERS,
    ScriptedModelServer,
    ScriptedResponse,
    decode_request,
)

BUILDERS: dict[str, Callable[[Request], Any]] = {
    "anthropic": lambda r: anthropic_body(r, model="claude-sonnet-4-5"),
    "openai_chat": lambda r: build_chat_body(r, "gpt-4o"),
    "openai_responses": lambda r: responses_body(r, model="gpt-4o"),
    "gemini": lambda r: gemini_body(r, "gemini-2.5-flash"),
}
MODULES: dict[str, tuple[ModuleType, str]] = {
    "anthropic": (_anthropic_request, "ANTHROPIC"),
    "openai_chat": (_openai_chat_request, "OPENAI_CHAT"),
    "openai_responses": (_openai_responses_request, "OPENAI_RESPONSES"),
    "gemini": (_gemini_request, "GEMINI"),
}
IMAGE = ImagePart(b"\x89PNG\r\n\x1a\n" + bytes(3000 - 8), "image/png")
SIZE = _media.inline_size([Message.user(IMAGE)])  # one image's base64 bytes


def _limit(monkeypatch: pytest.MonkeyPatch, provider: str, images: int) -> None:
    """The provider's per-request limit set to exactly `images` of `IMAGE`."""
    module, name = MODULES[provider]
    rules = getattr(module, name)
    monkeypatch.setattr(module, name, replace(rules, max_request_bytes=images * SIZE))


class _Paced(list[Part]):
    """A message's content that runs `between` before giving each part, and after the last."""

    def __init__(self, parts: list[Part], between: Callable[[], object]) -> None:
        super().__init__(parts)
        self.between = between

    def __iter__(self) -> Iterator[Part]:
        for part in super().__iter__():
            self.between()
            yield part
        self.between()


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_builds_interleaved_in_two_threads_keep_their_own_totals(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two bodies of two images each, built at the same time and made to go in step part by
    # part (both counting, then both leaving): with a limit of two images, a total shared
    # between them would refuse one.
    _limit(monkeypatch, provider, 2)
    meeting = threading.Barrier(2, timeout=10)
    outcomes: list[object] = []

    def build() -> None:
        content = _Paced([IMAGE, IMAGE], meeting.wait)
        try:
            BUILDERS[provider](Request([Message("user", content)]))
            outcomes.append("built")
        except Exception as exc:  # the probe reports what happened
            outcomes.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert outcomes == ["built", "built"]


@pytest.mark.parametrize("inner", sorted(BUILDERS))
@pytest.mark.parametrize("outer", sorted(BUILDERS))
def test_a_build_inside_a_build_keeps_its_own_total(
    outer: str, inner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A body built while another is being built (a fallback's second provider, a sub-agent's
    # request made from inside a part): each counts its own parts only. Limits of two images
    # each, two images in each body: either count leaking into the other refuses a body.
    _limit(monkeypatch, outer, 2)
    _limit(monkeypatch, inner, 2)
    built: list[object] = []

    def nested() -> None:
        built.append(BUILDERS[inner](Request([Message.user("look", IMAGE, IMAGE)])))

    BUILDERS[outer](Request([Message("user", _Paced([IMAGE, IMAGE], nested))]))
    assert built  # the inner body was built, between the outer's two images (Gemini's
    # builder reads a message's parts more than once: one inner build each time)
    # The inner's own limit is still held inside the outer build.
    built.clear()

    def over() -> None:
        with pytest.raises(MediaError, match="per request"):
            BUILDERS[inner](Request([Message.user("look", IMAGE, IMAGE, IMAGE)]))
        built.append(True)

    BUILDERS[outer](Request([Message("user", _Paced([IMAGE, IMAGE], over))]))
    assert built and all(built)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_a_hook_adding_an_image_past_the_limit_is_refused_before_sending(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An image in an old message and one in the new input fit a limit of two; a third added
    # by an on_message_send hook (after the Worker's own checks) passes it: the request is
    # refused with a typed error and never sent. The next run, without the hook's image, goes
    # (no count left over).
    _limit(monkeypatch, provider, 2)
    adding = [True]

    def add_image(ctx: MessageSendContext) -> None:
        if adding[0]:
            ctx.messages.append(Message.user("one more", IMAGE))

    history = [Message.user("first", IMAGE), Message.assistant("seen")]
    script = [ScriptedResponse.text("ok")]
    async with ScriptedModelServer(provider, script, model="m") as server:
        client = server.client()
        worker = Worker(client, history=history)
        worker.add_on_message_send_hook(add_image)
        with anyio.fail_after(10), pytest.raises(MediaError, match="per request"):
            await worker.run(Message.user("second", IMAGE))
        assert server.requests == []
        adding[0] = False
        fresh = Worker(client, history=history)
        with anyio.fail_after(10):
            result = await fresh.run(Message.user("second", IMAGE))
        await client.aclose()
    assert result.text == "ok"
    assert len(server.requests) == 1
    sent = decode_request(provider, server.requests[0].json(), model="m").messages
    assert _media.inline_size(sent) == 2 * SIZE  # the old message's image and the input's


def _long_history(turns: int) -> list[Message]:
    # A long run's history: one tool call a turn, an image in every 50th turn's result.
    history = [Message.user("read every page", IMAGE)]
    for n in range(turns):
        history.append(Message("assistant", [ToolUsePart(f"c{n}", "read", {"n": n})]))
        media = [IMAGE] if n % 50 == 0 else []
        result = ToolResultPart(f"c{n}", "r" * 40, name="read", media=list(media))
        history.append(Message("user", [result]))
    return history


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_a_history_through_pause_json_sends_the_same_body_and_total(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paused at turn 500 and resumed from JSON in a fresh Worker: the restored history's body
    # is the same bytes, and its media total the same (exactly at the limit it goes, one
    # image more in the new input refuses it, before and after the round trip).
    history = _long_history(500)
    restored = PauseState.from_json(PauseState(history=history).to_json()).history
    images = _media.inline_size(history) // SIZE
    assert images == 11
    _limit(monkeypatch, provider, images)
    build = BUILDERS[provider]
    assert encoded(build(Request(restored))) == encoded(build(Request(history)))
    for messages in (history, restored):
        with pytest.raises(MediaError, match="per request"):
            build(Request([*messages, Message.user("and this", IMAGE)]))
