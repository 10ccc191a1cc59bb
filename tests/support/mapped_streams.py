"""A mapper's events for the hot-path tests, and the recorded Chat streams.

`mapped_events` reads a body through `drive` with one mapper (a provider's, or a variant of
it such as its general path alone, or one that never learns a template) in reads of given
sizes, and gives each event's repr and, last, the typed error it raised: two mappers agree
when their lists are equal.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable

import anyio

from llm_worker.errors import ProviderError
from llm_worker.providers._blocks import StreamMapper, drive
from support import recorded

__all__ = ["mapped_events", "recorded_chat_streams"]


async def mapped_events(
    mapper: StreamMapper,
    body: bytes,
    sizes: int | Iterable[int],
    *,
    provider: str = "p",
    limit: int = 10**9,
    clean: Callable[[str], str] = lambda shown: shown,
) -> list[str]:
    """The events of `body` read in reads of `sizes` (cycled), then the error raised, if any.

    Each line goes through `clean` (e.g. a made-up id made one); `limit` is the answer's
    `max_answer_chars`; the whole read is bounded (30 s).
    """

    async def chunks() -> AsyncIterator[bytes]:
        at = 0
        for size in itertools.cycle([sizes] if isinstance(sizes, int) else sizes):
            if at >= len(body):
                return
            yield body[at : at + size]
            at += size

    seen: list[str] = []
    with anyio.fail_after(30):
        try:
            async for event in drive(chunks(), mapper, provider=provider, max_answer_chars=limit):
                seen.append(clean(repr(event)))
        except ProviderError as exc:
            seen.append(clean(f"{type(exc).__name__}: {exc}"))
    return seen


def recorded_chat_streams() -> list[tuple[str, bytes]]:
    """Every recorded Chat Completions event stream (status 200), by name: its body's bytes."""
    streams: list[tuple[str, bytes]] = []
    for name in recorded.fixture_names("openai_chat"):
        response = recorded.load("openai_chat", name)["response"]
        if response["status"] == 200 and "event-stream" in response["content_type"]:
            streams.append((name, response["body"].encode()))
    return streams
