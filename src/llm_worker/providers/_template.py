r"""A stream's repeated chunk, kept as bytes: its text read without parsing the rest again.

A provider streams text as chunks that repeat the same JSON but for the text string (the
response's id, model and creation time, the choice's index, `"finish_reason":null`), and for
at most one more value: OpenAI's padding string (`obfuscation`, which nobody reads), Gemini's
running `usageMetadata` object (which the mapper reads). `ByteTemplate` holds such a chunk's
bytes around those values: a chunk that begins with the same head, holds the same middle and
ends with the same tail, where what lies between them are a JSON string and a value of the
second hole's kind, is that chunk with other values in their places — JSON's grammar takes
a string (an object) token anywhere another one stood — so its text (and second value) are
the holes parsed alone, and nothing else of it needs reading.

What makes that sound, checked once when the template is made (`ByteTemplate.of`): the
head and the middle end outside any string (their unescaped quotes are even), and the
chunk parsed with a mark in each hole is the chunk itself with those two fields set to the
marks (so the holes are exactly those fields' places, in whatever key order or spacing the
server writes). The marks hold U+0000, which JSON writes only as `\u0000`: a chunk without
those bytes holds no mark, so no field but a hole's can pass for one. When matching, every
hole must parse on its own as its kind (`orjson.loads`: exactly what orjson accepts in a
whole chunk, UTF-8 and escapes included); anything else is no match, and the caller parses
the chunk in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from orjson import JSONDecodeError
from orjson import loads as _loads

__all__ = ["ByteTemplate"]

# The largest chunk a template is made of: text chunks are tens of bytes to a few KiB, and
# a larger one's content costs more to parse than the rest of it, while finding its end
# costs a step per escaped quote (a hostile 16 MiB chunk: seconds).
_MOST: Final = 16 * 1024
# What the proof puts in the holes: strings no chunk's other fields hold — U+0000, which
# JSON can only write as `\u0000` (a raw one is invalid), in a chunk without those bytes.
_NUL: Final = b"\\u0000"
_TEXT_MARK: Final = b'"\\u0000text hole"'
# The second hole's mark: a string where the chunk's is ignored (OpenAI's padding), an object
# where it is read (Gemini's running usage).
_SECOND_MARKS: Final = {str: b'"\\u0000second hole"', dict: b'{"\\u0000second hole":0}'}


class ByteTemplate:
    """A chunk's bytes but for its text string (and, optionally, one more value).

    The second hole holds a string (`kind=str`: a value nobody reads, `text` matches) or an
    object (`kind=dict`: a value the caller reads, `text_and_value` gives it).
    """

    __slots__ = ("_head", "_kind", "_middle", "_n", "_span", "_tail", "_tail_n")

    def __init__(self, head: bytes, middle: bytes | None, tail: bytes, kind: type) -> None:
        self._head = head
        self._n = len(head)
        self._middle = middle
        self._span = len(middle) if middle is not None else 0
        self._tail = tail
        self._tail_n = len(tail)
        self._kind = kind

    @classmethod
    def of(
        cls,
        data: bytes,
        text_key: bytes,
        second_key: bytes | None,
        place: Callable[[Any, str, Any], Any],
        kind: type = str,
    ) -> ByteTemplate | None:
        r"""The template of `data`, its holes at `text_key`'s string (and `second_key`'s value).

        `place(chunk, text, second)` gives a parsed chunk with its text field set to `text`
        and, unless `second` is None, its second field to `second` (a `kind`: `str` or
        `dict`). The template is made only when `data` with marks in its holes parses to
        `place` of `data` parsed whole with the same marks: proof that the holes are those
        fields. None when no template can be proven for these bytes, when they are over
        16 KiB, or when they hold `\u0000` (a field already holding a mark would pass for a
        hole: the text read from another field).
        """
        text = _string_after(data, text_key) if len(data) <= _MOST and _NUL not in data else None
        if text is None:
            return None
        head, rest = data[: text[0]], data[text[1] :]
        middle: bytes | None = None
        if second_key is not None:
            second = _value_after(rest, second_key, kind)
            if second is not None:
                middle, rest = rest[: second[0]], rest[second[1] :]
        if not _outside_strings(head) or (middle is not None and not _outside_strings(middle)):
            return None
        mark = _SECOND_MARKS[kind]
        marked = head + _TEXT_MARK + (middle + mark if middle is not None else b"") + rest
        try:
            expected = place(
                _loads(data), _loads(_TEXT_MARK), None if middle is None else _loads(mark)
            )
            return cls(head, middle, rest, kind) if expected == _loads(marked) else None
        except (
            ValueError,
            LookupError,
            TypeError,
            AttributeError,
            RecursionError,  # comparing parses nested near orjson's 1024 levels
        ):  # JSONDecodeError: a ValueError
            return None

    def text(self, data: bytes) -> str | None:
        """The text of a chunk of this template (a string second hole), or None.

        `text_and_value`'s reading without its pair: a call and a tuple less per chunk
        (this is every Chat text chunk's whole reading).
        """
        n = self._n
        if data[:n] != self._head:
            return None
        end = len(data) - self._tail_n
        if end < n or data[end:] != self._tail:
            return None
        middle = self._middle
        try:
            if middle is None:
                text = _loads(data[n:end])
            else:
                cut = data.find(middle, n, end)
                if cut < 0 or _loads(data[cut + self._span : end]).__class__ is not str:
                    return None
                text = _loads(data[n:cut])
        except JSONDecodeError:
            return None
        return text if text.__class__ is str else None

    def text_and_value(self, data: bytes) -> tuple[str, Any] | None:
        """The text and second value (None without a second hole) of a chunk of this template.

        None when `data` is not one: the holes must hold a string, then a `kind`.
        """
        n = self._n
        if data[:n] != self._head:
            return None
        end = len(data) - self._tail_n
        if end < n or data[end:] != self._tail:
            return None
        middle = self._middle
        second: Any = None
        try:
            if middle is None:
                piece = data[n:end]
            else:
                cut = data.find(middle, n, end)
                if cut < 0:
                    return None
                piece = data[n:cut]
                second = _loads(data[cut + self._span : end])
                if second.__class__ is not self._kind:
                    return None
            text = _loads(piece)
        except JSONDecodeError:
            return None
        return (text, second) if text.__class__ is str else None

    def __repr__(self) -> str:
        # The bytes are the answer's (an id, a model's name): never shown.
        return f"ByteTemplate(head={self._n} bytes, holes={1 if self._middle is None else 2})"


def _string_after(data: bytes, key: bytes) -> tuple[int, int] | None:
    """The span of the JSON string token right after the first `key` (`"name":`).

    A guess: `ByteTemplate.of` proves it (a key's bytes inside a string, or a value that is
    no string, fails the proof there).
    """
    begin = _value_start(data, key)
    if begin < 0 or data[begin : begin + 1] != b'"':
        return None
    end = begin + 1
    while True:
        end = data.find(b'"', end)
        if end < 0:
            return None
        # The backslashes right before it, counted back from it (each run once: linear in
        # the string, however many escaped quotes it holds).
        before = end - 1
        while data[before] == 0x5C:
            before -= 1
        if (end - 1 - before) % 2 == 0:
            return begin, end + 1
        end += 1


def _value_after(data: bytes, key: bytes, kind: type) -> tuple[int, int] | None:
    """The span of the `kind` value (a string, or an object) right after the first `key`."""
    if kind is str:
        return _string_after(data, key)
    begin = _value_start(data, key)
    if begin < 0 or data[begin : begin + 1] != b"{":
        return None
    # The object ends at the first `}` where what began parses: a JSON value is not the
    # prefix of another. (Learning only: a chunk of at most 16 KiB.)
    end = data.find(b"}", begin)
    for _ in range(16):  # a usage object closes a few times; a hostile one: no template
        if end < 0:
            break
        try:
            if _loads(data[begin : end + 1]).__class__ is dict:
                return begin, end + 1
        except JSONDecodeError:
            pass
        end = data.find(b"}", end + 1)
    return None


def _value_start(data: bytes, key: bytes) -> int:
    # Where the first `key`'s value begins (past JSON's whitespace), or -1.
    at = data.find(key)
    if at < 0:
        return -1
    begin = at + len(key)
    while data[begin : begin + 1] in _SPACE:
        begin += 1
    return begin


_SPACE: Final = (b" ", b"\t", b"\n", b"\r")


def _outside_strings(piece: bytes) -> bool:
    """Whether a piece of valid JSON from a token's start ends outside any string.

    Its quotes but the escaped ones are even. Backslashes are read in pairs from the left,
    as JSON's lexer reads them (each escapes the next byte): the escaped backslashes go
    first, then the escaped quotes.
    """
    return piece.replace(b"\\\\", b"").replace(b'\\"', b"").count(b'"') % 2 == 0
