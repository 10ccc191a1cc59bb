"""A tool's output and its content: `ToolOutput.Inline` / `ToolOutput.Stored`, `Content`.

A tool's result is a `ToolOutput`: `ToolOutput.Inline(text)`, which goes into the history as
it is, or `ToolOutput.Stored(summary=..., content=...)`, whose content is kept in a
`BlobStore` while the history carries only the summary. A plain string is promoted
automatically (`ToolOutput.from_string`): up to 800 UTF-8 bytes it stays inline; above that it
is stored, as `Content.Structured` when it parses as a JSON array or object, else as
`Content.Text`.

```
ToolOutput ──┬── Inline(text)                       text: what the model reads
             └── Stored(summary, content, blob_id)  text: the summary
Content    ──┬── Text(text)
             └── Structured(value)                  any JSON value
```

`Content.Text` / `ToolOutput.Inline` etc. are the classes `TextContent`, `InlineOutput`, …;
`isinstance` and `match` tell them apart (annotate with the class names: a class attribute is
not a type). Blob ids are UUID strings: the stores name a blob by a keyed hash of its content
(version 8, `_addressing`), and ids of blobs stored before that (version 7, `new_blob_id`) stay
valid; `parse_blob_id` is the one gate every id from outside passes, so no id ever names a file
outside a store.
"""

from __future__ import annotations

import re
import reprlib
import threading
from dataclasses import dataclass
from typing import Any, ClassVar, Final, NewType, TypeAlias

import uuid6

from llm_worker.blobs._json_scan import JsonShape, dumps_json, json_shape, loads_json
from llm_worker.errors import ConfigurationError, InvalidBlobIdError

__all__ = (
    "DEFAULT_POLICY",
    "BlobId",
    "Content",
    "InlineOutput",
    "JsonValue",
    "OutputPolicy",
    "StoredOutput",
    "StructuredContent",
    "TextContent",
    "ToolOutput",
    "new_blob_id",
    "parse_blob_id",
    "promote",
)

# -- ids ---------------------------------------------------------------------------------------

BlobId = NewType("BlobId", str)
"""A blob's id: a UUID in canonical lowercase form, as in `[blob:<id>]`.

Version 8 (a keyed hash of the content) from the shipped stores; version 7 for blobs stored
by earlier releases, and from `new_blob_id`."""

# ASCII only (no \d: it matches other scripts' digits), the whole string, no trailing newline.
_UUID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE | re.ASCII
)
_id_lock = threading.Lock()


def new_blob_id() -> BlobId:
    """A fresh UUID version 7: ids made later sort after ids made earlier.

    The shipped stores name blobs by their content instead; this is for a store of your own
    that wants unique, time-ordered ids.
    """
    # uuid6 keeps them increasing within a process through a module global: guard it so
    # stores running in several threads still get strictly increasing ids.
    with _id_lock:
        return BlobId(str(uuid6.uuid7()))


def parse_blob_id(text: object) -> BlobId:
    """Check that `text` is a blob id and return it in canonical (lowercase) form.

    Raises:
        InvalidBlobIdError: `text` is not a UUID (`../../etc/passwd`, `x.txt`, a path, …).
    """
    if isinstance(text, str) and _UUID.fullmatch(text):
        return BlobId(text.lower())
    shown = reprlib.repr(text)
    raise InvalidBlobIdError(
        f"{shown} is not a blob id: ids are UUIDs such as "
        "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a, as in a summary's [blob:<id>] header"
    )


# -- content -----------------------------------------------------------------------------------

JsonValue: TypeAlias = Any
"""A JSON value (dict, list, str, int, float, bool or None). `Any`: JSON is shaped at run time."""

_UNSET: Final[Any] = object()


def _short(text: str, limit: int = 60) -> str:
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} chars)"


class Content:
    """The full content of a stored output: `Content.Text(str)` or `Content.Structured(value)`."""

    __slots__ = ()
    Text: ClassVar[type[TextContent]]
    Structured: ClassVar[type[StructuredContent]]


@dataclass(frozen=True, slots=True, repr=False)
class TextContent(Content):
    """Text content, stored as `{id}.txt`.

    Attributes:
        text: The text.
    """

    text: str

    def __repr__(self) -> str:
        return f"Content.Text({_short(self.text)})"


class StructuredContent(Content):
    """A JSON value, stored as `{id}.json`.

    Made from a value (`Content.Structured([...])`), or by promotion and by the stores from
    JSON text, which is then kept as it is (stored byte for byte) and parsed only when
    `value` is first read: a million-entry array need not exist as Python objects to be
    stored, summarized or inspected. The value is not copied; do not change it afterwards.
    Stores write it with orjson, which writes NaN and infinities as `null` (JSON has no such
    numbers).
    """

    __slots__ = ("_json", "_shape", "_value")
    __match_args__ = ("value",)

    def __init__(self, value: JsonValue) -> None:
        self._value: JsonValue = value
        self._json: str | None = None
        self._shape: JsonShape | None = None

    @classmethod
    def _from_json(cls, text: str, shape: JsonShape | None = None) -> StructuredContent:
        # `text` is known to be JSON (validated by promotion, or written by a store).
        content = cls(_UNSET)
        content._json = text
        content._shape = shape
        return content

    @property
    def value(self) -> JsonValue:
        """The JSON value (parsed from the JSON text on first use)."""
        if self._value is _UNSET:
            self._value = loads_json(self.json_text)
        return self._value

    @property
    def json_text(self) -> str:
        """The JSON text: as received when it came as text, else compact JSON of the value.

        Raises:
            TypeError: The value cannot be written as JSON.
        """
        if self._json is None:
            self._json = dumps_json(self._value)
        return self._json

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StructuredContent):
            return NotImplemented
        if self._json is not None and self._json == other._json:
            return True
        return bool(self.value == other.value)

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._value is _UNSET:
            return f"Content.Structured(<JSON {_short(self.json_text)}>)"
        return f"Content.Structured({reprlib.repr(self._value)})"


Content.Text = TextContent
Content.Structured = StructuredContent


# -- tool outputs ------------------------------------------------------------------------------


class ToolOutput:
    """What a tool call produced: `ToolOutput.Inline(text)` or `ToolOutput.Stored(...)`.

    A tool may return one itself (a tool that knows its output is big, or that writes its own
    summary); a plain string is promoted by `from_string`.
    """

    __slots__ = ()
    Inline: ClassVar[type[InlineOutput]]
    Stored: ClassVar[type[StoredOutput]]

    @property
    def text(self) -> str:
        """What the model reads: the inline text, or the stored output's summary."""
        raise NotImplementedError

    @staticmethod
    def from_string(s: str, *, threshold: int = 800) -> InlineOutput | StoredOutput:
        """Promote a tool's string result by its size.

        Args:
            s: The result.
            threshold: The most UTF-8 bytes that stay inline.

        Returns:
            `Inline(s)` when `s` has at most `threshold` UTF-8 bytes; else `Stored` with an
            empty summary (the store's id and the summary come with `externalize`) and
            `Content.Structured` when `s` is a JSON array or object, else `Content.Text`.
            JSON the standard library would not read back the same way (NaN, nesting deeper
            than the parser's recursion limit) is stored as text, unchanged.
        """
        return promote(s, threshold, DEFAULT_POLICY.array_head)


class InlineOutput(ToolOutput):
    """A small result: its text goes into the history as it is.

    Attributes:
        text: The result.
    """

    __slots__ = ("_text",)
    __match_args__ = ("text",)

    def __init__(self, text: str) -> None:
        self._text = text

    @property
    def text(self) -> str:
        """The result."""
        return self._text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InlineOutput):
            return NotImplemented
        return self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"ToolOutput.Inline({_short(self._text)})"


@dataclass(frozen=True, slots=True)
class StoredOutput(ToolOutput):
    """A large result: the history carries `summary`, the store keeps `content`.

    Attributes:
        summary: What the model reads; `[blob:<id>] …` once stored (empty before).
        content: The full result.
        blob_id: The id in the store, `None` until stored.
    """

    summary: str
    content: Content
    blob_id: BlobId | None = None

    @property
    def text(self) -> str:
        """The summary."""
        return self.summary


ToolOutput.Inline = InlineOutput
ToolOutput.Stored = StoredOutput


def _fits(s: str, threshold: int) -> bool:
    # Encode only short strings: a char is 1 to 4 UTF-8 bytes (3 for a lone surrogate).
    if len(s) > threshold:
        return False
    return len(s) * 4 <= threshold or len(s.encode("utf-8", "surrogatepass")) <= threshold


def promote(s: str, threshold: int, array_head: int) -> InlineOutput | StoredOutput:
    """`s` inline when it fits `threshold` UTF-8 bytes, else stored (not yet in a store)."""
    if _fits(s, threshold):
        return InlineOutput(s)
    shape = json_shape(s, array_head)
    if shape is None:
        return StoredOutput("", TextContent(s))
    return StoredOutput("", StructuredContent._from_json(s, shape))  # pyright: ignore[reportPrivateUsage]


# -- policy ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputPolicy:
    """Thresholds and caps for large outputs.

    The defaults keep a result of up to 800 bytes inline and give a larger one a summary of
    at most 400 bytes (the first 5 and last 3 lines of a text, the first 2 entries of an
    array), and let one `inspect` call return up to 16,000 characters.

    Attributes:
        inline_threshold: The most UTF-8 bytes a string result keeps inline.
        summary_max_bytes: The most UTF-8 bytes of a summary (at least 100: the header with
            the id must fit).
        head_lines: Lines from the start of a text in its summary.
        tail_lines: Lines from the end of a text in its summary.
        array_head: Entries from the start of a JSON array in its summary.
        inspect_max_chars: The most characters one `inspect` call returns (at least 2,000:
            about 1,000 go to its header and notes).

    Raises:
        ConfigurationError: A value out of range.
    """

    inline_threshold: int = 800
    summary_max_bytes: int = 400
    head_lines: int = 5
    tail_lines: int = 3
    array_head: int = 2
    inspect_max_chars: int = 16_000

    def __post_init__(self) -> None:
        minimums = {
            "inline_threshold": 0,
            "summary_max_bytes": 100,
            "head_lines": 0,
            "tail_lines": 0,
            "array_head": 0,
            "inspect_max_chars": 2_000,
        }
        for name, least in minimums.items():
            value: object = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigurationError(f"OutputPolicy.{name} must be an int >= {least}")


DEFAULT_POLICY = OutputPolicy()
"""The policy when none is given."""
