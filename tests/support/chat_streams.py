"""Chat Completions streams for the hot-path tests: the recorded ones, and a body's events.

`mapped_events` reads a body through `drive` with one mapper (the Chat mapper, or a variant of
it such as the general path alone) in reads of a given size, and gives each event's repr and,
last, the typed error it raised: two mappers agree when their lists are equal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from llm_worker.errors import ProviderError
from llm_worker.providers._blocks import StreamMapper, drive
from support import recorded

__all__ = ["mapped_events", "recorded_chat_streams"]


async def mapped_events(mapper: StreamMapper, body: bytes, size: int) -> list[str]:
    """The events of `body` read in `size`-byte reads, then the error raised, if any."""

    async def chunks() -> AsyncIterator[bytes]:
        for at in range(0, len(body), size):
            yield body[at : at + size]

    seen: list[str] = []
    try:
        async for event in drive(chunks(), mapper, provider="p", max_answer_chars=10**9):
            seen.append(repr(event))
    except ProviderError as exc:
        seen.append(f"{type(exc).__name__}: {exc}")
    return seen


def recorded_chat_streams() -> list[tuple[str, bytes]]:
    """Every recorded Chat Completions event stream (status 200), by name: its body's bytes."""
    streams: list[tuple[str, bytes]] = []
    for name in recorded.fixture_names("openai_chat"):
        response = recorded.load("openai_chat", name)["response"]
        if response["status"] == 200 and "event-stream" in response["content_type"]:
            streams.append((name, response["body"].encode()))
    return streams
