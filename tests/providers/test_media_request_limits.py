"""The providers' per-request limits on inline media: each part under its own, all over."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llm_worker import ImagePart, Message, ToolResultPart, ToolUsePart
from llm_worker.errors import MediaError
from llm_worker.messages import Part
from llm_worker.providers._anthropic_request import build_body as anthropic_body
from llm_worker.providers._base import Request
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.providers._openai_responses_request import build_body as responses_body

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
