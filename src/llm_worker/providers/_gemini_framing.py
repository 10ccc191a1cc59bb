"""Gemini's two stream framings: SSE as it is, and a JSON array turned into SSE events.

`streamGenerateContent` without `alt=sse` writes one JSON array incrementally (a proxy that
drops the query string answers with it; a non-streaming answer is one object). `Framing`
recognizes it by the body's first meaningful byte, so that `drive` gets SSE bytes
either way; `JsonArraySplitter` cuts the array's top-level objects out as they complete.
"""

from __future__ import annotations

import re
from typing import Final

from llm_worker.providers._sse import BOM, event_too_large

__all__ = ("Framing", "JsonArraySplitter")

_PROVIDER: Final = "gemini"

_WHITESPACE: Final = b" \t\r\n"
_IN_STRING: Final = re.compile(rb'["\\]')
_OUTSIDE: Final = re.compile(rb'["{}\[\]]')


class Framing:
    """Which framing one response body has, and its reads as SSE bytes.

    The framing is known from the body's first meaningful byte: a JSON array (or one bare
    object) is cut into SSE events by `JsonArraySplitter`; anything else is SSE and passes
    through. Synchronous, so that the one reader of the body (`Hops`) pays no coroutine for it:
    once `sse` is true, the reader hands its reads on without calling it at all.
    """

    __slots__ = ("_json", "_mode")

    def __init__(self, limit: int) -> None:
        self._mode: str | None = None  # None until the first meaningful byte: "sse" / "json"
        self._json = JsonArraySplitter(limit)

    @property
    def sse(self) -> bool:
        """The body is SSE: its reads go on as they are."""
        return self._mode == "sse"

    def feed(self, chunk: bytes) -> bytes:
        """One read of the body; the SSE bytes it gives (maybe none yet).

        At the end, a cut-off object of a JSON array is left out: the answer is then
        incomplete.
        """
        if self._mode is None:
            head = chunk.lstrip(_WHITESPACE).removeprefix(BOM).lstrip(_WHITESPACE)
            if not head:
                return b""  # nothing meaningful yet; SSE ignores leading blank lines too
            self._mode = "json" if head[:1] in (b"[", b"{") else "sse"
            if self._mode == "sse":
                # A BOM opening the body: the SSE decoder drops one only at the start of the
                # whole stream, so a CONTINUATION follow-up's would make its first line
                # `\ufeffdata: …`, a field of no name we read, and its event silently lost.
                return chunk.removeprefix(BOM)
        if self._mode == "sse":
            return chunk
        return self._json.feed(chunk)


class JsonArraySplitter:
    """Cuts the top-level objects out of an incrementally written JSON array.

    Each complete object comes out as one SSE `data:` event (raw line breaks, which JSON
    allows only as whitespace between tokens, become spaces). Only string delimiters,
    escapes and brackets are looked at; orjson judges the objects themselves. An object
    still unfinished after `limit` bytes fails the stream (`MalformedStreamError`).
    """

    __slots__ = ("_buffer", "_depth", "_in_string", "_level", "_limit", "_scanned", "_start")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        # Grown in place and cut at its front (both amortized O(1) a byte in CPython): an
        # object over many reads would be copied whole at each one as `bytes`.
        self._buffer = bytearray()
        self._scanned = 0
        self._depth = 0
        self._level = 1  # the depth at which chunk objects open
        self._in_string = False
        self._start = -1  # where the object being read begins in the buffer

    def feed(self, chunk: bytes) -> bytes:
        """Take bytes; return the SSE bytes of the objects they complete."""
        buffer = self._buffer
        buffer += chunk
        events: list[bytes] = []
        pos = self._scanned
        while pos < len(buffer):
            if self._in_string:
                match = _IN_STRING.search(buffer, pos)
                if match is None:
                    pos = len(buffer)
                elif buffer[match.start()] == 0x5C:  # a backslash escapes the next byte
                    if match.start() + 1 == len(buffer):
                        pos = match.start()  # read it again with the byte it escapes
                        break
                    pos = match.start() + 2
                else:
                    self._in_string = False
                    pos = match.start() + 1
                continue
            match = _OUTSIDE.search(buffer, pos)
            if match is None:
                pos = len(buffer)
                continue
            pos = match.start() + 1
            self._structure(match.start(), events)
        self._keep(pos)
        return b"".join(events)

    def _structure(self, at: int, events: list[bytes]) -> None:
        char = self._buffer[at]
        if char == 0x22:  # "
            self._in_string = True
        elif char in b"{[":
            if self._depth == 0:
                # The chunks are the objects of the top-level array, or one bare object.
                self._level = 1 if char == 0x5B else 0
            if char == 0x7B and self._depth == self._level:
                self._start = at
            self._depth += 1
        else:
            self._depth -= 1
            if char == 0x7D and self._depth == self._level and self._start >= 0:
                item = self._buffer[self._start : at + 1]
                events.append(b"data: " + item.replace(b"\r", b" ").replace(b"\n", b" ") + b"\n\n")
                self._start = -1

    def _keep(self, pos: int) -> None:
        # Drop what is fully read; keep the object in progress and the unscanned tail.
        cut = pos if self._start < 0 else self._start
        del self._buffer[:cut]
        self._scanned = pos - cut
        self._start = min(0, self._start)
        if len(self._buffer) > self._limit:
            self._buffer = bytearray()
            raise event_too_large(self._limit, "one object of the JSON-array stream", _PROVIDER)
