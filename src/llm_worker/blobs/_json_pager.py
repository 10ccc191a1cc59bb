"""A JSON array's entries read from a stream of bytes and rendered for one page, in bounded memory.

`page_entries` reads the array (or a run of its entries from an index point) chunk by chunk.
An entry of up to `ENTRY_CHARS` characters is parsed and written as `dumps_json` writes it; a
longer one is walked piece by piece (its small members parsed, its long strings re-escaped a
piece at a time), so one 40 MB entry never becomes a 40 MB value, a 40 MB text or a copy of
either: only the characters of the page are kept (`PageText`).

A huge entry's text is `dumps_json`'s for the same value, but for two things the walk cannot
see ahead: a key written twice in one object is shown twice, and numbers keep orjson's form
where a whole-value dump would have fallen back to the standard library's.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring  # pyright: ignore[reportUnknownVariableType]
from typing import Any

from llm_worker.blobs._json_scan import NotJson, dumps_json, scan_once, scan_string, type_name

__all__ = ("ENTRY_CHARS", "PageText", "Paged", "page_entries")

# An entry up to this many characters is parsed whole (orjson's dump of it briefly takes up
# to six bytes a character).
ENTRY_CHARS = 1 << 18
_SPACE = re.compile(r"[ \t\n\r]*")
# A run of whole string units: plain characters, two-character escapes, full \uXXXX escapes
# (plain characters matched in runs: a group repeated per character costs memory per character).
_STRING_RUN = re.compile(r'[^"\\]*(?:(?:\\[^u]|\\u[0-9a-fA-F]{4})[^"\\]*)*')
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_CONTROL = re.compile(r"[\x00-\x1f]")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
_PLACEHOLDER: dict[str, Any] = {
    "string": "",
    "integer": 0,
    "number": 0.0,
    "boolean": True,
    "null": None,
    "array": [],
    "object": {},
}
_SCHEMA_KEYS = 400  # characters of keys kept for the schema of a huge first entry


class _Source:
    """Decoded text over byte chunks; `buf[pos:]` is what is not read yet."""

    def __init__(self, pull: Callable[[], bytes | str | None]) -> None:
        self._pull = pull
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Read one more chunk into the buffer; False at the end."""
        if self.eof:
            return False
        chunk = self._pull()
        try:
            text = (
                chunk
                if isinstance(chunk, str)
                else self._decoder.decode(chunk or b"", final=chunk is None)
            )
        except UnicodeDecodeError as exc:
            raise NotJson(f"not UTF-8 text: {exc}") from exc
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        self.eof = chunk is None
        return True

    def ahead(self) -> str:
        """The next character that is not a space ("" at the end); the position moves to it."""
        while True:
            match = _SPACE.match(self.buf, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos : self.pos + 1]

    def expect(self, chars: str) -> str:
        """Consume the next non-space character, one of `chars`."""
        char = self.ahead()
        if not char or char not in chars:
            raise NotJson(f"expected one of {chars!r}, found {char or 'the end'!r}")
        self.pos += 1
        return char


@dataclass(slots=True)
class PageText:
    """The selection's text (entries joined by newlines), kept only for characters lo..hi-1.

    Attributes:
        lo: The first character kept.
        hi: The first character not kept; once written that far the page is `full`.
        size: Characters of the selection written so far.
        lines: Newlines written before `lo`.
        last_newline: Where the last newline before `lo` is (-1: none).
        kept: The characters kept.
    """

    lo: int
    hi: int
    size: int = 0
    lines: int = 0
    last_newline: int = -1
    kept: list[str] = field(default_factory=lambda: [])

    @property
    def full(self) -> bool:
        """Whether every character of the page is written."""
        return self.size >= self.hi

    def write(self, text: str) -> None:
        """Append `text` to the selection, keeping what falls in the page."""
        start, end = self.size, self.size + len(text)
        if end > self.lo and start < self.hi:
            self.kept.append(text[max(self.lo - start, 0) : self.hi - start])
        self.size = end

    def newline(self) -> None:
        """Append the newline between two entries."""
        if self.size < self.lo:
            self.lines += 1
            self.last_newline = self.size
        self.write("\n")

    @property
    def text(self) -> str:
        """The characters kept."""
        return "".join(self.kept)


class _Sink:
    """Where a walked value's text goes: the page, or nowhere once it is full."""

    def __init__(self, page: PageText | None) -> None:
        self.page = page

    def write(self, text: str) -> None:
        if self.page is not None:
            self.page.write(text)
            if self.page.full:
                self.page = None  # the rest is read to find the entry's end, not kept


def _small(src: _Source) -> tuple[bool, Any]:
    """The value at the position if it ends within `ENTRY_CHARS` characters: (True, value)."""
    while True:
        error: Exception | None = None
        try:
            value, end = scan_once(src.buf, src.pos)
        except StopIteration:
            error = NotJson(f"expected a value at {src.pos}")
        except (ValueError, RecursionError) as exc:
            error = exc
        else:
            if src.eof or not _may_go_on(src.buf, end):
                src.pos = end
                return True, value
        if error is not None and len(src.buf) - src.pos >= ENTRY_CHARS:
            return False, None
        if not src.more() and error is not None:
            raise NotJson(str(error)) from error


def _value(src: _Source, out: _Sink, keys: dict[str, Any] | None = None) -> Any:
    """Write the value at the position; return it if small, else a placeholder of its type.

    `keys`, for a huge object: filled with its first keys and a placeholder of each value's
    type (what a schema needs).
    """
    src.ahead()
    small, value = _small(src)
    if small:
        out.write(dumps_json(value))
        return value
    char = src.ahead()
    if char == '"':
        _string(src, out)
        return ""
    if char not in ("[", "{"):
        raise NotJson(f"a value of over {ENTRY_CHARS} characters that is not JSON")
    _container(src, out, char, keys)
    return [] if char == "[" else {}


def _container(src: _Source, out: _Sink, opener: str, keys: dict[str, Any] | None) -> None:
    closer = "]" if opener == "[" else "}"
    src.pos += 1
    out.write(opener)
    if src.ahead() == closer:
        src.pos += 1
        out.write(closer)
        return
    size = 0
    while True:
        key = None
        if opener == "{":
            if src.ahead() != '"':
                raise NotJson(f"expected a key at {src.pos}")
            key = _value(src, out)
            src.expect(":")
            out.write(":")
        value = _value(src, out)
        if keys is not None and isinstance(key, str) and size < _SCHEMA_KEYS:
            keys[key] = _PLACEHOLDER.get(type_name(value))
            size += len(key) + 10
        separator = src.expect("," + closer)
        out.write(separator)
        if separator == closer:
            return


def _string(src: _Source, out: _Sink) -> None:
    """A string too long to hold: unescaped and escaped again one buffer at a time."""
    src.pos += 1
    out.write('"')
    while True:
        run = _STRING_RUN.match(src.buf, src.pos)
        end = run.end() if run else src.pos
        closed = src.buf.startswith('"', end)
        if not closed and end < len(src.buf) and not src.buf.startswith("\\", end):
            raise NotJson(f"a control character in a string at {end}")
        if not closed:
            end = _before_high_surrogate(src.buf, src.pos, end)
        out.write(_escaped(src.buf[src.pos : end]))
        src.pos = end
        if closed:
            src.pos += 1
            out.write('"')
            return
        if not src.more():
            raise NotJson("a string runs to the end of the blob")


def _escaped(piece: str) -> str:
    """A run of a string's JSON text, escaped as `dumps_json` escapes it.

    orjson and the standard library escape strings alike; orjson reserves six bytes a
    character for it, the standard library does not.
    """
    if "\\" not in piece:  # nothing to unescape: only a control character needs escaping
        if _CONTROL.search(piece):
            raise NotJson("a control character in a string")
        return piece
    try:
        decoded = scan_string(piece + '"', 0, True)[0]
    except ValueError as exc:
        raise NotJson(str(exc)) from exc
    return encode_basestring(decoded)[1:-1]


def _before_high_surrogate(buf: str, start: int, end: int) -> int:
    # A pair of \u escapes must decode together: one at the buffer's end waits for the next.
    if end - start >= 6 and _HIGH_SURROGATE.fullmatch(buf, end - 6, end):
        slashes = 0
        while end - 7 - slashes >= start and buf[end - 7 - slashes] == "\\":
            slashes += 1
        if slashes % 2 == 0:  # the backslash starts an escape, not the end of a "\\"
            return end - 6
    return end


def _may_go_on(buf: str, end: int) -> bool:
    # A number cut by the chunk's end ("1." of "1.5") scans as a shorter one ("1"): it may go
    # on while only a number's characters follow it to the buffer's end.
    tail = _NUMBER_TAIL.match(buf, end)
    return tail is None or tail.end() >= len(buf)


_SLOW = object()  # `_quick` could not take the entry
_SPACES = frozenset(" \t\n\r")


def _next_char(src: _Source) -> str:
    # The common case, an entry right after a comma, without a regex.
    buf, pos = src.buf, src.pos
    if pos < len(buf) and buf[pos] not in _SPACES:
        return buf[pos]
    return src.ahead()


def _quick(src: _Source) -> Any:
    """The entry at the position, if it ends inside the buffer; else `_SLOW`."""
    try:
        value, end = scan_once(src.buf, src.pos)
    except (StopIteration, ValueError, RecursionError):
        return _SLOW  # cut by the buffer's end, huge, or not JSON: `_value` tells which
    if _may_go_on(src.buf, end):
        return _SLOW
    src.pos = end
    return value


def _separator(src: _Source, at: int) -> bool:
    """Consume the comma after entry `at - 1`, if there is one (True)."""
    buf, pos = src.buf, src.pos
    if pos < len(buf) and buf[pos] == ",":
        src.pos = pos + 1
        return True
    char = src.ahead()
    if char == ",":
        src.pos += 1
    elif char not in ("]", ""):
        raise NotJson(f"expected ',' or ']' after entry {at - 1}")
    return char == ","


@dataclass(slots=True)
class Paged:
    """What `page_entries` read.

    Attributes:
        count: The entry number after the last entry read (the array's length when read to
            its end).
        page: The selection's text for the page.
        rendered: How many entries of the selection are in it, whole.
        first: Entry 0 when read (a huge one: its first keys with placeholder values).
    """

    count: int
    page: PageText
    rendered: int
    first: Any = None


def page_entries(
    pull: Callable[[], bytes | str | None],
    *,
    number: int | None,
    bounds: tuple[int, int],
    window: tuple[int, int],
    to_the_end: bool,
) -> Paged:
    """Read entries from a stream and render those in `bounds` for the page `window`.

    Args:
        pull: The next chunk of the blob's bytes (or of its text), `None` at the end.
        number: The number of the entry the bytes start at (an index point), or `None` when
            they are the whole array (from its `[`).
        bounds: Entries `low` to `high - 1` make the selection.
        window: The characters of the selection to keep, `lo` to `hi - 1`.
        to_the_end: Read to the array's end (to count it) even once the page is full.

    Raises:
        NotJson: The bytes are not a JSON array, or not entries of one.
    """
    try:
        return _page_entries(_Source(pull), number, bounds, window, to_the_end)
    except RecursionError as exc:  # nested too deeply for the walk (and for the C scanner)
        raise NotJson("JSON nested too deeply") from exc


def _page_entries(
    src: _Source,
    number: int | None,
    bounds: tuple[int, int],
    window: tuple[int, int],
    to_the_end: bool,
) -> Paged:
    if number is None:
        src.expect("[")
    at, (low, high) = number or 0, bounds
    page = PageText(*window)
    first: Any = None
    rendered, comma = 0, False
    while (char := _next_char(src)) not in ("]", ""):
        if not to_the_end and (at >= high or page.full):
            break
        wanted = low <= at < high and not page.full
        if wanted and rendered:
            page.newline()
        value = _quick(src)
        if value is _SLOW:
            keys: dict[str, Any] | None = {} if at == 0 else None
            value = _value(src, _Sink(page if wanted else None), keys)
            value = keys if keys and char == "{" else value
        elif wanted:
            page.write(dumps_json(value))
        first = value if at == 0 else first
        rendered += wanted and not page.full
        at += 1
        comma = _separator(src, at)
    if comma and char in ("]", ""):
        raise NotJson(f"expected an entry after entry {at - 1}")
    if number is None and to_the_end:
        src.expect("]")
        if src.ahead():
            raise NotJson("extra data after the array")
    return Paged(at, page, rendered, first)
