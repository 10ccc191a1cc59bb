"""A sans-IO Server-Sent Events decoder (WHATWG HTML, "event stream interpretation").

Bytes go in with `feed()`, whole events come out. Lines end at CR, LF or CRLF only (never at
U+2028 or other Unicode line breaks, which `str.splitlines()` would wrongly honour), wherever the
chunk boundaries fall — inside a CRLF pair or inside a UTF-8 sequence included: the decoder
splits raw bytes, and CR / LF bytes never occur inside a multi-byte UTF-8 sequence.

One deliberate difference from the standard: at end of stream, `flush()` dispatches a final
event that lacks its terminating blank line instead of discarding it, because the provider did
send that data and losing it would silently truncate an answer.

Memory is bounded: an unfinished line (its `data: ` aside), or the data of an unfinished
event, longer than `max_event_bytes` fails the stream with `MalformedStreamError` as soon as
the limit is passed (not when the stream ends), so a server that never sends a line break
cannot exhaust memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any, Final, NoReturn

import orjson

from llm_worker._json import sendable_json
from llm_worker.errors import MalformedStreamError

__all__ = (
    "BLANK",
    "BOM",
    "DEFAULT_MAX_EVENT_BYTES",
    "SSEDecoder",
    "ServerSentEvent",
    "event_too_large",
    "json_of",
    "text_of",
)

DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
"""16 MiB: far above any real event (a large base64 image), far below a memory problem."""

_NAMES: Final = 32  # event types remembered per stream (a protocol has a dozen or two)
_FIELD: Final = len(b"data: ")  # what a line holds beside an event's data
_RUN_BYTES: Final = 1 << 18  # the largest run read at once (`SSEDecoder._run`)
_NONE: Final[list[bytes]] = []  # no run (never changed)
# A run's blank line and its cut between two events, as LF and as CRLF frame them.
_LF: Final = (b"\n\n", b"\n\ndata: ")
_CRLF: Final = (b"\r\n\r\n", b"\r\n\r\ndata: ")
BOM: Final = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark, which may open a stream."""
BLANK: Final = b" \t\r\n" + BOM
"""What may precede the first byte that says what a body is (whitespace, a BOM)."""


@dataclass(slots=True)
class ServerSentEvent:
    """One dispatched event.

    Attributes:
        event: The event type (`"message"` when no `event:` field was given).
        data: The data lines joined with LF.
        id: The last event id seen so far on the stream, if any.
        retry: The reconnection time in milliseconds, if this event set one.
    """

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


def event_too_large(limit: int, what: str, provider: str | None = None) -> MalformedStreamError:
    """The error for an event that grew past `limit` bytes before it ended."""
    return MalformedStreamError(
        f"{what} grew past max_event_bytes={limit:,} bytes before it ended; the stream was "
        "stopped there to keep memory bounded (raise max_event_bytes on the client if the "
        "provider really sends events this large)",
        provider=provider,
        streamed=True,
    )


def json_of(data: bytes) -> Any:
    """An event's data parsed as JSON (`Any`: read it with the typed helpers of `_json`).

    Raises:
        orjson.JSONDecodeError: The data is not JSON.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # orjson refuses bytes that are not UTF-8; the event-stream standard decodes them
        # with replacement characters, and so do we (the rare path: a second parse).
        text = data.decode("utf-8", "replace")
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            if _ESCAPED_SURROGATE.search(text) is None:
                raise
            return _with_lone_surrogates(text)


# A surrogate spelled as a JSON escape: orjson refuses a lone one, which a server cutting a
# text between the halves of an emoji's pair sends (each half in its own event).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _with_lone_surrogates(text: str) -> Any:
    # The standard parser decodes a lone surrogate; each is made U+FFFD, as invalid UTF-8 is,
    # rather than failing the whole answer (NaN and Infinity stay refused, as orjson does).
    try:
        return sendable_json(json.loads(text, parse_constant=_not_json))
    except json.JSONDecodeError as exc:  # raised as json_of says: orjson's
        raise orjson.JSONDecodeError(exc.msg, exc.doc, exc.pos) from None


def _not_json(constant: str) -> NoReturn:
    raise orjson.JSONDecodeError(f"{constant} is not valid JSON", constant, 0)


def text_of(data: bytes) -> str:
    """An event's data as text (invalid UTF-8 replaced, as the standard decodes it)."""
    return data.decode("utf-8", "replace")


class SSEDecoder:
    """Incremental SSE decoder: `feed(bytes)` → events; `flush()` at end of stream.

    `feed` and `flush` give `ServerSentEvent`s; `raw` and `raw_flush`, which `drive` reads,
    give each event as `(type, data)` with the data still UTF-8 bytes: the JSON parser reads
    bytes directly, and decoding each event's data to a string first, only for the parser to
    encode it again, cost a fifth of the per-event work of a bulk stream.

    Raises:
        MalformedStreamError: An unfinished line or event passed `max_event_bytes`.
    """

    __slots__ = (
        "_counted",
        "_data",
        "_event",
        "_given_retry",
        "_last_id",
        "_limit",
        "_named",
        "_names",
        "_pending_cr",
        "_retry",
        "_size",
        "_started",
        "_tail",
        "_tail_size",
        "_unusual",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._limit = max_event_bytes
        # The unfinished last line, as the pieces it arrived in: joined once when its line
        # ends, so a long line (a base64 image) split over many chunks costs linear time.
        self._tail: list[bytes] = []
        self._tail_size = 0
        self._pending_cr = False
        self._started = False
        # The data lines of the event being read. Its size (with the LFs joining its lines) is
        # counted when it ends, and at the end of each chunk for an event still open (`_size`
        # of its first `_counted` entries, each chunk's lines joined in one), so that an event
        # growing over many chunks fails as soon as it passes the limit.
        self._data: list[bytes] = []
        self._size = 0
        self._counted = 0
        self._event = ""
        # Whole `event:` lines and the types they name, the first few kinds a stream uses.
        self._names: dict[bytes, str] = {}
        # The last of them read, and its type (no line holds a LF: none equals it at first).
        self._named: tuple[bytes, str] = (b"\n", "")
        self._last_id: str | None = None
        self._retry: int | None = None
        # The event being read set `retry`, or outlasted a chunk: `_dispatch` ends it.
        self._unusual = False
        # The `retry:` of the event `_dispatch` gave last, until `feed` reads it.
        self._given_retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode a chunk of the stream; return the events it completes, in order."""
        return [self._event_of(kind, data) for kind, data in self.raw(chunk)]

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: return the final event even if its blank line never came."""
        return [self._event_of(kind, data) for kind, data in self.raw_flush()]

    def _event_of(self, kind: str, data: bytes) -> ServerSentEvent:
        retry, self._given_retry = self._given_retry, None
        return ServerSentEvent(kind, text_of(data), self._last_id, retry)

    def raw(self, chunk: bytes) -> Iterator[tuple[str, bytes]]:
        """Decode a chunk; the events it completes as `(type, UTF-8 data)`, in order.

        An iterator (the read's run of one-line events is cut when it is called, the rest
        of the read as the iterator reaches it) of one event at a time: a reader that hands
        each event on before the next is decoded keeps few objects alive (a network read of
        a bulk stream completes a thousand events, and holding them all, with what they map
        to, made the garbage collector's passes cost more than the parsing). Consume it
        whole before the next chunk.
        """
        payloads, chunk, small = self._begin(chunk)
        if not payloads:
            return self._events(chunk, small)
        # The run's events through `zip` with `repeat("message")` (its pair tuple is reused
        # when the reader lets go of it), not through a generator of ours: a resumption of
        # its frame per event cost more than the rest of the run's hand-off.
        run = zip(repeat("message"), payloads)
        return chain(run, self._events(chunk, small)) if chunk else run

    def _events(self, chunk: bytes, small: bool) -> Iterator[tuple[str, bytes]]:
        # The line path: the events the read's lines complete (after its run, if any).
        limit = self._limit
        lines = self._lines(chunk)
        if not lines:
            return
        data, names, plain = self._data, self._names, not self._unusual
        named, named_kind = self._named
        one: bytes | None = None  # the one `data: ` line of a plain event, while it is one
        for line in lines:
            # The hot path, inline: the blank line that ends an event of one data line (tested
            # first: the test is cheaper than the slice), and `data: ` (with its space, as
            # every provider sends it). An event of one data line is held in `one`, not in
            # `data`, which holds the rest: several lines, a field read by `_field` (`data:`
            # without its space, `retry`), an event begun in an earlier read.
            if not line:
                if one is not None:
                    if not small and len(one) > limit:
                        self._too_large("one event of the stream")
                    kind = self._event or "message"
                    self._event = ""
                    yield kind, one
                    one = None
                else:
                    yield from self._ended()
                    plain = not self._unusual
            elif line == named:
                # The `event:` line read last, again (Anthropic and Responses name every
                # event, a run of deltas by one type): a compare costs less than a hash.
                self._event = named_kind
            elif line[:6] == b"data: ":
                if one is None and plain and not data:
                    one = line[6:]
                else:
                    self._held(one).append(line[6:])
                    one = None
            else:
                # An `event:` line seen before: its type without slicing or decoding the
                # line again.
                kind = names.get(line)
                if kind is None:
                    self._held(one)  # `_field` may add data after it
                    one = None
                    self._field(line)
                    plain = not self._unusual
                else:
                    self._event = kind
                    named, named_kind = self._named = line, kind
        if self._held(one):
            self._count()

    def _begin(self, chunk: bytes) -> tuple[list[bytes], bytes, bool]:
        # `(the data of the run of events the read begins with, the rest, small)`. Small: no
        # line of this read can pass the limit, as the held line and the chunk together (and
        # a held piece of a BOM, 3 bytes at most) do not; then no event of one line is
        # measured. `_hold` bounds the line the chunk leaves unfinished. A BOM, or the LF of
        # a CRLF split across reads, first; then, with nothing held but an unfinished line,
        # on a stream that names no event (Chat), the read's run of whole events of one
        # `data: ` line each, at once (`_run`).
        small = self._tail_size + len(chunk) + len(BOM) <= self._limit
        if not self._started or self._pending_cr:
            chunk = self._prepare(chunk)
        if (
            small
            and self._started
            and not (self._pending_cr or self._data or self._unusual or self._event or self._names)
        ):
            # CRLF framing (Gemini's every read): its own blank line, and no CR in a piece.
            payloads, rest = self._run(chunk, _LF if 0x0D not in chunk else _CRLF)
            return payloads, rest, True
        return _NONE, chunk, small  # no run tried

    def _run(self, chunk: bytes, ends: tuple[bytes, bytes]) -> tuple[list[bytes], bytes]:
        r"""The data of the whole events the read begins with, if each is one `data: ` line.

        With what follows them (the rest of the read, for the line path). The test is made
        in C over the whole run, not per line: the run is `data: ` … `\n\n` with no CR, cut
        at every `\n\ndata: `, and no piece holds a LF: every event is one `data: ` line and
        its blank line. Framed by CRLF (`ends` is `_CRLF`, Gemini's), the same with `\r\n\r\n`
        and no CR in a piece either. Anything else (an `event:` or `id:` line, a comment,
        `data:` without its space, a second data line, a lone CR or LF, mixed framing) fails
        the test, and the line path reads the whole read. Per event, this spares the line
        loop's two tests and two slices (the `data: ` test alone ~750 instructions) and the
        split on LF (~1,300: `bytes.split` and `count` of one byte go byte by byte; `in` and
        `join` use `memchr` and `memcpy`).
        Its copies (the run, its pieces, their join) hold about four times its size for a
        moment: a run is read so up to `_RUN_BYTES`, a larger read (rarely a network read) by
        the line path.
        """
        # `ends`: LF framing (no CR in `chunk`: `_begin` tested it, and a held line holds
        # none, a CR ending it), or CRLF framing (a CR in a piece then fails the test).
        blank, cut = ends
        end = chunk.rfind(blank) + len(blank)  # (the held line holds no LF: the end is here)
        if end < len(blank) or end + self._tail_size > _RUN_BYTES:
            return [], chunk  # no event ends here: the line path holds the read, unjoined
        tail = self._tail
        if tail:  # the unfinished line the last read left: the run's start (as `_lines`)
            tail.append(chunk)
            chunk = b"".join(tail)
            tail.clear()
            end += self._tail_size
            self._tail_size = 0
        if not chunk.startswith(b"data: "):
            return [], chunk
        payloads = chunk[_FIELD : end - len(blank)].split(cut)
        joined = b"".join(payloads)
        if 0x0A in joined or (ends is _CRLF and 0x0D in joined):
            return [], chunk  # an event of more than one line in the run (a lone CR or LF)
        return payloads, chunk[end:]

    def _ended(self) -> Iterator[tuple[str, bytes]]:
        # A blank line ending anything but an event of one `data: ` line.
        if self._data:
            yield self._dispatch()
        else:
            self._event = ""

    def _held(self, one: bytes | None) -> list[bytes]:
        # The event's data lines, its one `data: ` line (if `raw` holds one) added.
        if one is not None:
            self._data.append(one)
        return self._data

    def raw_flush(self) -> list[tuple[str, bytes]]:
        """End of stream, as `raw`: the final event even if its blank line never came."""
        self._started = True
        if self._tail:
            line = b"".join(self._tail)
            self._tail.clear()
            self._tail_size = 0
            self._field(line)
        self._pending_cr = False
        if self._data:
            return [self._dispatch()]
        self._event = ""
        return []

    def _lines(self, chunk: bytes) -> list[bytes]:
        """The lines a chunk completes (the unfinished last one is held)."""
        if not self._started or self._pending_cr:
            chunk = self._prepare(chunk)
        # CR and LF by their byte values: `bytes in bytes` first tries its operand as an
        # integer, building and dropping a TypeError (CPython 3.11: ~0.25 µs, paid per read,
        # so per event paced), where an integer goes straight to `memchr`.
        has_cr = 0x0D in chunk
        if not has_cr and 0x0A not in chunk:
            if chunk:
                self._hold(chunk, self._tail_size + len(chunk))
            return []
        if self._tail:
            self._tail.append(chunk)
            chunk = b"".join(self._tail)
            self._tail.clear()
            self._tail_size = 0
        lines = self._split_cr(chunk) if has_cr else chunk.split(b"\n")
        rest = lines.pop()
        if rest:
            self._hold(rest, len(rest))
        return lines

    def _split_cr(self, chunk: bytes) -> list[bytes]:
        # A chunk with a CR (Gemini frames every line with CRLF): `bytes.splitlines` breaks
        # at exactly the event stream's line ends (CRLF, lone CR, LF) in one pass, where
        # splitting on CRLF and counting that no other CR or LF was left cost three (~2.5x).
        if chunk[-4:] == b"\r\n\r\n":
            # One whole event of one line, as a paced Gemini read is: two `memchr`s cost a
            # third of `splitlines`, which tests every byte.
            line = chunk[:-4]
            if 0x0D not in line and 0x0A not in line:
                self._pending_cr = False
                return [line, b"", b""]
        lines = chunk.splitlines()
        last = chunk[-1]
        if last in b"\r\n":
            lines.append(b"")  # the last line ended: no unfinished rest
            # A trailing CR may be the first half of a CRLF split across chunks.
            self._pending_cr = last == 0x0D
        return lines

    def _prepare(self, chunk: bytes) -> bytes:
        # Only at the start of the stream and after a chunk that ended in CR.
        if not self._started:
            chunk = self._strip_bom(chunk)
            if not self._started:
                return b""
        if self._pending_cr and chunk:
            self._pending_cr = False
            if chunk.startswith(b"\n"):
                return chunk[1:]
        return chunk

    def _strip_bom(self, chunk: bytes) -> bytes:
        # The BOM may itself arrive split across chunks: hold back a partial one.
        held = b"".join(self._tail) + chunk if self._tail else chunk
        self._tail.clear()
        if len(held) < len(BOM) and BOM.startswith(held):
            if held:
                self._tail.append(held)
            return b""
        self._started = True
        return held[len(BOM) :] if held.startswith(BOM) else held

    def _hold(self, piece: bytes, size: int) -> None:
        # Keep a piece of the unfinished line; `size` is the line's length with it.
        self._tail.append(piece)
        self._tail_size = size
        # The line of an event of `limit` bytes is `data: ` and those bytes: bounded at the
        # limit alone, the event failed or passed by where the network split its line.
        if size > self._limit + _FIELD:
            self._too_large("one line of the event stream")

    def _too_large(self, what: str) -> NoReturn:
        # Drop what is held first: the error must not keep the oversized buffer alive.
        self._tail.clear()
        self._data.clear()
        self._tail_size = self._size = self._counted = 0
        raise event_too_large(self._limit, what)

    def _count(self) -> None:
        # An event still open at the end of a chunk: count the data lines it gained, each
        # with the LF that joins it (`data:` lines without data grew an event's memory with
        # no limit), and hold them joined: an object per short line cost tens of times its
        # bytes. `_size` is the data as it will be dispatched, plus one.
        data, counted = self._data, self._counted
        self._size += sum(len(value) for value in data[counted:]) + len(data) - counted
        if self._size - 1 > self._limit:
            self._too_large("one event of the stream")
        if len(data) - counted > 1:
            data[counted:] = [b"\n".join(data[counted:])]
        self._counted = len(data)
        self._unusual = True

    def _field(self, line: bytes) -> None:
        # Every field but `data: ` (with its space) and `event: `, which `raw` reads inline.
        if line.startswith(b":"):
            return
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
            if len(self._names) < _NAMES:
                self._names[line] = self._event
        elif name == b"id":
            if 0x00 not in value:  # (a byte's value: `bytes in bytes` builds a TypeError first)
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
            self._unusual = True

    def _dispatch(self) -> tuple[str, bytes]:
        data = self._data
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        if len(payload) > self._limit:
            self._too_large("one event of the stream")
        data.clear()
        self._size = self._counted = 0
        self._unusual = False
        kind = self._event or "message"
        self._event = ""
        self._given_retry = self._retry
        if self._retry is not None:
            self._retry = None
        return kind, payload
