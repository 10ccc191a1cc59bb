"""The providers' per-request limits on inline media: each part under its own, all over."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any

import pytest

from llm_worker import DocumentPart, ImagePart, Message, TextPart, ToolResultPart, ToolUsePart
from llm_worker.errors import MediaError
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
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._media import _COUNTING, inline_size  # pyright: ignore[reportPrivateUsage]
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.providers._openai_responses_request import build_body as responses_body
from support.media import PDF

MB = 1024 * 1024
BUILDERS: dict[str, Callable[[Request], Any]] = {
    "anthropic": lambda r: anthropic_body(r, model="claude-x"),
    "openai_chat": lambda r: build_chat_body(r, "gpt-x"),
    "openai_responses": lambda r: responses_body(r, model="gpt-x"),
    "gemini": lambda r: gemini_body(r, "gemini-2.5-flash"),
}
# Raw bytes per image (each under the provider's per-image limit) and how many pass the
# request's limit: Anthropic 5 MB / 32 MB, OpenAI 50 MB / 50 MB, Gemini 20 MB / 20 MB.
SPLIT = {
    "anthropic": (3 * MB, 9),
    "openai_chat": (20 * MB, 3),
    "openai_responses": (20 * MB, 3),
    "gemini": (9 * MB, 2),
}
REQUEST_MODULES: dict[str, ModuleType] = {
    "anthropic": _anthropic_request,
    "openai_chat": _openai_chat_request,
    "openai_responses": _openai_responses_request,
    "gemini": _gemini_request,
}
RULES = {
    "anthropic": "ANTHROPIC",
    "openai_chat": "OPENAI_CHAT",
    "openai_responses": "OPENAI_RESPONSES",
    "gemini": "GEMINI",
}


def _png(size: int) -> ImagePart:
    return ImagePart(b"\x89PNG\r\n\x1a\n" + bytes(size - 8), "image/png")


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_images_each_under_the_limit_but_over_it_together_are_refused(provider: str) -> None:
    size, count = SPLIT[provider]
    image = _png(size)
    BUILDERS[provider](Request([Message.user("look", image)]))  # one alone is fine
    with pytest.raises(MediaError, match="per request"):
        BUILDERS[provider](Request([Message.user("look", *[image] * count)]))


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_tool_result_images_count_toward_the_request_limit(provider: str) -> None:
    size, count = SPLIT[provider]
    image = _png(size)
    calls = [ToolUsePart(f"c{i}", "shot", {}) for i in range(count)]
    results: list[Part] = [
        ToolResultPart(c.id, "screen", name="shot", media=[image]) for c in calls
    ]
    history = [Message.user("look"), Message("assistant", list(calls)), Message("user", results)]
    with pytest.raises(MediaError, match="per request"):
        BUILDERS[provider](Request(history))


def _mixed_history() -> list[Message]:
    # Inline media in every place a request carries it (a user's image and documents, a tool
    # result's image and document), beside media given by URL, which weighs nothing.
    image, other = _png(1000), _png(2001)
    paper = DocumentPart.from_bytes(PDF, name="paper.pdf")
    notes = DocumentPart.from_text("line one\nline two", name="notes.txt")
    remote = ImagePart.from_url("https://example.com/cat.png", media_type="image/png")
    calls = [ToolUsePart("c1", "shot", {}), ToolUsePart("c2", "read", {})]
    results: list[Part] = [
        ToolResultPart("c1", "screen", name="shot", media=[other, remote]),
        ToolResultPart("c2", "paper", name="read", media=[paper]),
    ]
    return [
        Message.user("look", image, notes, remote),
        Message("assistant", list(calls)),
        Message("user", results),
        Message("assistant", [TextPart("seen")]),
        Message.user("again", image),  # the same part twice counts twice, as sent twice
    ]


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_the_total_is_every_inline_part_sent_exactly(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The total is counted as each part goes into the body (not by a walk over the whole
    # history): a limit of exactly the history's base64 bytes passes, one byte less refuses.
    history = _mixed_history()
    total = inline_size(history)
    module = REQUEST_MODULES[provider]
    rules = getattr(module, RULES[provider])
    monkeypatch.setattr(module, RULES[provider], replace(rules, max_request_bytes=total))
    BUILDERS[provider](Request(history))
    monkeypatch.setattr(module, RULES[provider], replace(rules, max_request_bytes=total - 1))
    with pytest.raises(MediaError, match="per request"):
        BUILDERS[provider](Request(history))


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_a_failed_build_leaves_no_total_counting(provider: str) -> None:
    # A build that fails part-way (an image whose bytes are not its type, after one counted)
    # ends its count: the next body, and a part checked outside any build, are not added to
    # it — repeated past the limit, a leaked count would refuse the last build.
    size, count = SPLIT[provider]
    liar = ImagePart(_png(64).data, "image/jpeg")  # built directly: nothing checked it yet
    broken = Request([Message.user("look", _png(size), liar)])
    for _ in range(count):
        with pytest.raises(MediaError, match="image/jpeg"):
            BUILDERS[provider](broken)
    assert _COUNTING.get() is None
    BUILDERS[provider](Request([Message.user("look", _png(size))]))


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_the_total_needs_no_walk_over_the_history(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long run builds a body per turn: the total is counted as the parts go in, and the
    # history's whole walk (`inline_size`, kept for the Worker's check of a tool batch with
    # media) is not run.
    def walked(messages: object) -> int:
        raise AssertionError("the body's build walked the history for the media total")

    monkeypatch.setattr(_media, "inline_size", walked)
    size, count = SPLIT[provider]
    BUILDERS[provider](Request(_mixed_history()))
    with pytest.raises(MediaError, match="per request"):
        BUILDERS[provider](Request([Message.user("look", *[_png(size)] * count)]))
