"""Gemini's `CONTINUATION` finish: the answer goes on in a follow-up request.

A response that reached the per-request token limit before the answer was done ends with
`finishReason: "CONTINUATION"` and `candidate.continuationToken`. As google-genai does by
default (`automatic_continuation`), the client then sends the same request again with the
token as the body's top-level `continuationToken`, and the next response's chunks continue
the same answer: one stream of events, one message, the usage of the requests summed. The
Worker never sees a cut answer.

Each follow-up needs a token it has not used yet (a server repeating one would loop), and at
most `MAX_HOPS` requests make one answer: past that, or when the finish comes without a token,
the answer ends with `StopReason.MAX_TOKENS` (the raw `CONTINUATION` kept), as cut by a limit.
A failure of a follow-up request is that answer's failure, marked as streamed (part of the
answer was already delivered, so the request must not be retried whole). The mid-stream
checkpoint tokens google-genai uses to resume a dropped connection are not read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, Protocol

import orjson

from llm_worker._json import as_dict
from llm_worker.errors import ProviderError
from llm_worker.providers._gemini_framing import Framing

__all__ = ("CONTINUATION", "MAX_HOPS", "Hops", "Resumable")

CONTINUATION: Final = "CONTINUATION"
MAX_HOPS: Final = 32
"""Requests one answer may take (the first and its follow-ups)."""


class Resumable(Protocol):
    """The mapper's side: the token to go on with, once a response has been read whole."""

    def resume_token(self) -> str | None:
        """The unused `continuationToken` of a `CONTINUATION` finish, taken (else `None`)."""
        ...


_END_OF_BODY: Final = b"\n\n"

Opener = Callable[[Mapping[str, Any] | bytes], AsyncIterator[bytes]]


class Hops:
    """The bytes of one answer's requests in turn: the first, then each follow-up.

    It also reads each body's framing (`Framing`: SSE, or a JSON array turned into SSE). A
    class rather than an async generator, and one layer rather than one per concern: once a
    body is known to be SSE, a read costs one `await` on the transport's generator and
    nothing else (a paced stream pays each layer on every event).
    """

    __slots__ = (
        "_body",
        "_chunks",
        "_count",
        "_ended",
        "_framing",
        "_limit",
        "_mapper",
        "_open",
        "_sse",
    )

    def __init__(self, body: bytes, open_: Opener, mapper: Resumable, limit: int) -> None:
        self._body = body
        self._open = open_
        self._mapper = mapper
        self._limit = limit
        self._count = 1
        self._ended = False  # the current response's end was handed on
        self._chunks = open_(body)
        self._framing = Framing(limit)
        self._sse = False  # the current body is SSE: its reads go on as they are

    def __aiter__(self) -> Hops:
        return self

    async def aclose(self) -> None:
        """Close the current response now (`drive` does)."""
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __anext__(self) -> bytes:
        if self._ended:
            await self._follow_up()  # StopAsyncIteration when the answer is done
        try:
            if self._sse:
                return await self._chunks.__anext__()  # the hot path
            return await self._framed()
        except StopAsyncIteration:
            # Each response is a body of its own: a last event without its blank line
            # (a proxy trimming it) ends with the body, as at the end of the stream, and
            # is read before the next response's bytes, never glued to them.
            self._ended = True
            return _END_OF_BODY
        except ProviderError as exc:
            if self._count > 1:
                exc.streamed = True  # the answer's first part was already delivered
            raise

    async def _framed(self) -> bytes:
        # Until the framing is known, and for every read of a JSON array: the SSE bytes of
        # the reads (an array's read that completes no object gives none: read on).
        framing = self._framing
        while True:
            out = framing.feed(await self._chunks.__anext__())
            self._sse = framing.sse
            if out:
                return out

    async def _follow_up(self) -> None:
        # Every byte of this response was read and mapped: go on if it said so.
        self._ended = False
        token = self._mapper.resume_token()
        if token is None:
            raise StopAsyncIteration
        await self.aclose()
        self._count += 1
        # The first request's own JSON, read back: no body kept alive for a rare hop.
        body = {**as_dict(orjson.loads(self._body)), "continuationToken": token}
        self._chunks = self._open(body)
        self._framing = Framing(self._limit)
        self._sse = False

    @property
    def count(self) -> int:
        """Requests made so far."""
        return self._count
