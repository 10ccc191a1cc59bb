"""Summaries of stored outputs, and the `inspect` tool that reads parts of them.

Three pieces, each used by the next:

- JSON without building it: `array_items` / `object_members` walk the top level of a JSON
  text one entry at a time with the standard library's C scanner, so validating, counting and
  slicing a million-entry array never holds more than one entry as Python objects;
  `json_shape` records what a summary needs (kind, size, first entries, key types).
- `summarize`: the three summary forms of SPEC §9 (plus one for a top-level JSON scalar),
  at most `summary_max_bytes` UTF-8 bytes, lines shortened visibly with `…`, cut on a
  character boundary.
- `InspectTool`: `inspect(blob_id, selector?)`, bounded to `inspect_max_chars` characters,
  with a note saying what was cut and which selector reads the next part. Text blobs are read
  as a stream of bytes when the store can (`TextStreamStore`): a line range is found by
  counting newlines, nothing is decoded outside it.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal, TypeAlias, cast

import anyio
import anyio.lowlevel
import anyio.to_thread
import orjson

from llm_worker.blobs import (
    BlobStore,
    Content,
    OutputPolicy,
    StructuredContent,
    TextContent,
    TextStreamStore,
    parse_blob_id,
)
from llm_worker.errors import BlobError, BlobNotFoundError, InvalidBlobIdError, ToolError

__all__ = (
    "InspectTool",
    "JsonShape",
    "KeySelector",
    "LinesSelector",
    "Selector",
    "SliceSelector",
    "WholeSelector",
    "array_items",
    "cut_summary",
    "dumps_json",
    "json_shape",
    "loads_json",
    "object_members",
    "parse_selector",
    "summarize",
)

# -- JSON --------------------------------------------------------------------------------------


class _NotJson(ValueError):
    """The text is not the JSON it should be."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# The C scanner of the json module parses one value at a given index and says where it ended
# (orjson can only parse whole documents). NaN and Infinity are Python's, not JSON's.
# typeshed leaves these two out; their signatures are the documented ones.
_decoder: Any = json.JSONDecoder(parse_constant=_reject_constant)
_scan_once: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once
_json_decoder_module: Any = json.decoder
_scan_string: Callable[[str, int, bool], tuple[str, int]] = _json_decoder_module.scanstring
_SPACE = re.compile(r"[ \t\n\r]*")
_AFTER_ENTRY = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_AFTER_MEMBER = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_SPACES = (" ", "\n", "\r", "\t")


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _value_at(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _scan_once(text, pos)
    except StopIteration:  # the scanner's way of saying "no value here"
        raise _NotJson(f"expected a value at {pos}") from None
    except (ValueError, RecursionError) as exc:
        raise _NotJson(str(exc)) from exc


def _expect_end(text: str, pos: int) -> None:
    if _skip(text, pos) != len(text):
        raise _NotJson(f"extra data at {pos}")


def json_kind(text: str) -> Literal["array", "object"] | None:
    """`"array"` or `"object"` by the first non-space character of `text`, else `None`."""
    pos = _skip(text, 0)
    first = text[pos : pos + 1]
    return "array" if first == "[" else "object" if first == "{" else None


def array_items(text: str) -> Iterator[Any]:
    """The entries of the JSON array `text`, parsed one at a time.

    Raises:
        _NotJson: `text` is not a JSON array (raised when the iteration reaches the fault).
    """
    pos = _skip(text, 0)
    if not text.startswith("[", pos):
        raise _NotJson("not an array")
    pos = _skip(text, pos + 1)
    if text.startswith("]", pos):
        _expect_end(text, pos + 1)
        return
    while True:
        value, pos = _value_at(text, pos)
        yield value
        if text.startswith(",", pos):  # compact JSON: no regex needed
            pos += 1
            if text[pos : pos + 1] in _SPACES:
                pos = _skip(text, pos)
            continue
        after = _AFTER_ENTRY.match(text, pos)
        if after is None:
            raise _NotJson(f"expected ',' or ']' at {pos}")
        pos = after.end()
        if after.group(1) == "]":
            _expect_end(text, pos)
            return


def object_members(text: str) -> Iterator[tuple[str, Any]]:
    """The members of the JSON object `text` in order, each value parsed as it comes.

    Raises:
        _NotJson: `text` is not a JSON object (raised when the iteration reaches the fault).
    """
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        raise _NotJson("not an object")
    pos = _skip(text, pos + 1)
    if text.startswith("}", pos):
        _expect_end(text, pos + 1)
        return
    while True:
        if not text.startswith('"', pos):
            raise _NotJson(f"expected a key at {pos}")
        try:
            key, pos = _scan_string(text, pos + 1, True)
        except ValueError as exc:
            raise _NotJson(str(exc)) from exc
        colon = _COLON.match(text, pos)
        if colon is None:
            raise _NotJson(f"expected ':' at {pos}")
        value, pos = _value_at(text, colon.end())
        yield key, value
        after = _AFTER_MEMBER.match(text, pos)
        if after is None:
            raise _NotJson(f"expected ',' or '}}' at {pos}")
        pos = after.end()
        if after.group(1) == "}":
            _expect_end(text, pos)
            return


def loads_json(text: str) -> Any:
    """Parse JSON text.

    orjson first; the standard library for what orjson refuses but JSON allows (integers
    beyond 64 bits, escaped lone surrogates, deep nesting).

    Raises:
        ValueError: Not JSON.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except RecursionError as exc:
            raise ValueError("JSON nested too deeply") from exc


def dumps_json(value: Any, *, pretty: bool = False) -> str:
    """Compact (or 2-space indented) JSON text of `value`.

    Raises:
        TypeError: `value` cannot be written as JSON.
        ValueError: `value` holds NaN or infinity, or is nested too deeply.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if pretty else 0).decode()
    except TypeError:  # orjson.JSONEncodeError; big ints, non-str keys, depth > 254
        try:
            return json.dumps(
                value,
                ensure_ascii=False,
                allow_nan=False,
                indent=2 if pretty else None,
                separators=None if pretty else (",", ":"),
            )
        except RecursionError as exc:
            raise ValueError("JSON nested too deeply") from exc


def _object(value: object) -> dict[str, Any] | None:
    # cast: parsed JSON objects have str keys (a value a tool built may not: shown with str()).
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def _array(value: object) -> list[Any] | None:
    return cast("list[Any]", value) if isinstance(value, list) else None


_TYPE_NAMES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),  # before int: a bool is an int
    (str, "string"),
    (int, "integer"),
    (float, "number"),
    ((list, tuple), "array"),
    (dict, "object"),
)


def type_name(value: object) -> str:
    """The JSON type of `value`: string, integer, number, boolean, null, array, object."""
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def key_text(key: str) -> str:
    """A key as shown on one line.

    As it is, or as a JSON string if it holds a newline or another character that does not
    print.
    """
    return key if key.isprintable() else dumps_json(key)


def describe(value: object) -> str:
    """Type and size: `array (5000 entries)`, `object (3 keys)`, `string (42 chars)`, `integer`."""
    name = type_name(value)
    if isinstance(value, list | tuple):
        return f"{name} ({len(cast('Sized', value))} entries)"
    if isinstance(value, dict):
        return f"{name} ({len(cast('Sized', value))} keys)"
    if isinstance(value, str):
        return f"{name} ({len(value)} chars)"
    return name


@dataclass(slots=True)
class JsonShape:
    """What a summary needs to know about a JSON value.

    Attributes:
        kind: `json_array`, `json_object` or `json_scalar`.
        count: Entries of an array, distinct keys of an object.
        head: An array's first entries (as many as asked, at least one); a scalar's value.
        keys: An object's keys, in order, each with `describe(value)`.
    """

    kind: Literal["json_array", "json_object", "json_scalar"]
    count: int = 0
    head: list[Any] = field(default_factory=lambda: [])
    keys: dict[str, str] = field(default_factory=lambda: {})


def _scan_shape(text: str, head: int) -> JsonShape:
    kind = json_kind(text)
    if kind == "array":
        items = array_items(text)
        first = list(islice(items, max(head, 1)))
        return JsonShape("json_array", len(first) + sum(1 for _ in items), first)
    if kind == "object":
        keys = {key: describe(value) for key, value in object_members(text)}
        return JsonShape("json_object", len(keys), keys=keys)
    try:
        return JsonShape("json_scalar", 1, [loads_json(text)])
    except ValueError as exc:
        raise _NotJson(str(exc)) from exc


def json_shape(text: str, head: int) -> JsonShape | None:
    """The shape of `text` if it is a JSON array or object, else `None`.

    One pass, entry by entry: the value is never built whole.
    """
    if json_kind(text) is None:
        return None
    try:
        return _scan_shape(text, head)
    except _NotJson:
        return None


def _value_shape(value: Any, head: int) -> JsonShape | None:
    if (members := _object(value)) is not None:
        return JsonShape(
            "json_object", len(members), keys={str(k): describe(v) for k, v in members.items()}
        )
    if isinstance(value, list | tuple):
        entries = cast("Sequence[Any]", value)
        return JsonShape("json_array", len(entries), list(entries[: max(head, 1)]))
    if value is None or isinstance(value, str | int | float):
        return JsonShape("json_scalar", 1, [value])
    return None  # another type orjson can write (dataclass, datetime, …): read its JSON


def content_shape(content: StructuredContent, head: int) -> JsonShape:
    """The shape of structured content (cached on it; promotion fills the cache).

    Raises:
        BlobError: The content's JSON text is not valid JSON (a damaged blob).
    """
    cached = content._shape  # pyright: ignore[reportPrivateUsage]  # the cache blobs keeps
    if cached is not None and (
        cached.kind != "json_array" or len(cached.head) >= min(head, cached.count)
    ):
        return cached
    from_text = content._json is not None  # pyright: ignore[reportPrivateUsage]
    shape = None if from_text else _value_shape(content.value, head)
    if shape is None:
        try:
            shape = _scan_shape(content.json_text, head)
        except _NotJson as exc:
            raise BlobError(f"the content is not valid JSON: {exc}") from exc
    content._shape = shape  # pyright: ignore[reportPrivateUsage]
    return shape


# -- summaries ---------------------------------------------------------------------------------

_ELLIPSIS = "…"
_MIN_LINE = 24  # bytes a listed key keeps at least before the list is shortened instead


def _clean(text: str) -> str:
    # A summary goes into a JSON request body: no lone surrogates.
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _cut_bytes(text: str, limit: int) -> str:
    """The longest prefix of `text` with at most `limit` UTF-8 bytes (never half a character)."""
    if limit <= 0:
        return ""
    return text[: limit + 1].encode("utf-8")[:limit].decode("utf-8", "ignore")


def _shorten(line: str, cap: int) -> str:
    if _size(line) <= cap:
        return line
    return _cut_bytes(line, cap - len(_ELLIPSIS.encode())) + _ELLIPSIS if cap >= 3 else ""


def _water_fill(sizes: list[int], budget: int) -> int:
    """The largest cap with sum(min(size, cap)) <= budget.

    Short lines stay whole; long lines share what is left equally.
    """
    remaining = max(budget, 0)
    ordered = sorted(sizes)
    for i, size in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if size > share:
            return share
        remaining -= size
    return ordered[-1] if ordered else 0


def cut_summary(summary: str, max_bytes: int) -> str:
    """`summary` cut to `max_bytes` UTF-8 bytes with a visible `…` (a tool's own summary)."""
    return _shorten(_clean(summary), max_bytes)


def _compose(header: str, sections: list[tuple[str, list[str]]], max_bytes: int) -> str:
    header = _clean(header)
    titled = [(f"── {title} ──", [_clean(line) for line in lines]) for title, lines in sections]
    lines = [line for _, section in titled for line in section]
    fixed = _size(header) + sum(_size(title) + 1 for title, _ in titled)
    cap = _water_fill([_size(line) for line in lines], max_bytes - fixed - len(lines))
    parts = [header]
    for title, section in titled:
        parts.append(title)
        parts.extend(_shorten(line, cap) for line in section)
    out = "\n".join(parts)
    return out if _size(out) <= max_bytes else _cut_bytes(out, max_bytes)


def count_lines(text: str) -> int:
    """Lines of `text`: a newline ends a line; a last line without one counts too."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _line(text: str, start: int, end: int, limit: int) -> str:
    line = text[start : min(end, start + limit)]
    return line[:-1] if line.endswith("\r") and end - start <= limit else line


def _head_lines(text: str, count: int, limit: int) -> list[str]:
    lines: list[str] = []
    start = 0
    for _ in range(count):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        lines.append(_line(text, start, end, limit))
        start = end + 1
    return lines


def _tail_lines(text: str, count: int, limit: int) -> list[str]:
    lines: list[str] = []
    end = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(count):
        start = text.rfind("\n", 0, end) + 1
        lines.append(_line(text, start, end, limit))
        end = start - 1
    return lines[::-1]


def _text_summary(tag: str, text: str, policy: OutputPolicy) -> str:
    total = count_lines(text)
    head = min(policy.head_lines, total)
    tail = min(policy.tail_lines, total - head)  # never a line twice
    limit = policy.summary_max_bytes + 1  # characters: enough to know a line must be cut
    sections: list[tuple[str, list[str]]] = []
    if head:
        sections.append(("head", _head_lines(text, head, limit)))
    if tail:
        sections.append(("tail", _tail_lines(text, tail, limit)))
    return _compose(f"{tag} text | {total} lines", sections, policy.summary_max_bytes)


def _schema(first: Any, limit: int) -> str:
    members = _object(first)
    if members is None:
        return type_name(first)
    parts: list[str] = []
    size = 0
    for key, value in members.items():
        parts.append(f"{key_text(key)}: {type_name(value)}")
        size += len(parts[-1]) + 2
        if size > limit:
            break
    return ", ".join(parts) if parts else "(no keys)"


def _array_summary(tag: str, shape: JsonShape, policy: OutputPolicy) -> str:
    header = f"{tag} json_array | {shape.count} entries"
    if not shape.count:
        return _compose(header, [], policy.summary_max_bytes)
    limit = policy.summary_max_bytes + 1
    sections = [("schema", [_schema(shape.head[0], limit)])]
    head = [dumps_json(entry)[:limit] for entry in shape.head[: policy.array_head]]
    if head:
        sections.append(("head", head))
    return _compose(header, sections, policy.summary_max_bytes)


def _listed(lines: list[str], total: int, budget: int, unit: str) -> list[str]:
    """As many of `lines` as fit `budget` bytes at `_MIN_LINE` bytes each, then `… +N more`."""
    if total == len(lines) and sum(_size(line) + 1 for line in lines) <= budget:
        return lines
    reserve = len(f"{_ELLIPSIS} +{total} more {unit}".encode()) + 1
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = min(_size(line), _MIN_LINE) + 1
        if used + cost + reserve > budget:
            break
        kept.append(line)
        used += cost
    return [*kept, f"{_ELLIPSIS} +{total - len(kept)} more {unit}"]


def _object_summary(tag: str, shape: JsonShape, policy: OutputPolicy) -> str:
    header = f"{tag} json_object | {shape.count} keys"
    if not shape.count:
        return _compose(header, [], policy.summary_max_bytes)
    budget = policy.summary_max_bytes - _size(header) - _size("\n── keys ──")
    shown = islice(shape.keys.items(), max(budget // 4, 1))  # no more could ever fit
    lines = [f"{key_text(key)}: {kind}" for key, kind in shown]
    return _compose(
        header, [("keys", _listed(lines, shape.count, budget, "keys"))], policy.summary_max_bytes
    )


def _scalar_header(tag: str, value: Any) -> str:
    size = f" | {len(value)} chars" if isinstance(value, str) else ""
    return f"{tag} json_{type_name(value)}{size}"


def _scalar_summary(tag: str, shape: JsonShape, policy: OutputPolicy) -> str:
    value = shape.head[0]
    text = dumps_json(value)[: policy.summary_max_bytes + 1]
    return _compose(_scalar_header(tag, value), [("value", [text])], policy.summary_max_bytes)


def summarize(blob_id: str, content: Content, policy: OutputPolicy | None = None) -> str:
    """The summary the history carries for a stored output.

    ```
    [blob:<id>] text | {N} lines            [blob:<id>] json_array | {N} entries
    ── head ──                              ── schema ──
    {first 5 lines}                         {keys of the first entry: type}
    ── tail ──                              ── head ──
    {last 3 lines}                          {first 2 entries, compact JSON}

    [blob:<id>] json_object | {N} keys      [blob:<id>] json_string | {N} chars
    ── keys ──                              ── value ──
    {key: type (size)}, one a line          {the value, compact JSON}
    ```

    Lines end at a newline (a carriage return before it is dropped). A text of at most
    head + tail lines shows each line once (the tail holds the lines after the head); an
    empty text, array or object has the header only. An array's schema is its first
    entry's keys with their types (or the entry's type when it is not an object). A
    top-level JSON scalar has the fourth form (`json_integer`, `json_number`,
    `json_boolean`, `json_null` have no `| N chars`). The whole is at most
    `policy.summary_max_bytes` UTF-8 bytes: long lines share the room left equally and are
    shortened with `…` on a character boundary; keys that do not fit end with
    `… +N more keys`.

    Args:
        blob_id: The id shown in the header.
        content: The stored content.
        policy: The caps (the defaults when `None`).

    Raises:
        BlobError: Structured content whose JSON text is not valid.
    """
    policy = policy or OutputPolicy()
    tag = f"[blob:{blob_id}]"
    if isinstance(content, TextContent):
        return _text_summary(tag, content.text, policy)
    if not isinstance(content, StructuredContent):
        raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")
    shape = content_shape(content, policy.array_head)
    if shape.kind == "json_array":
        return _array_summary(tag, shape, policy)
    if shape.kind == "json_object":
        return _object_summary(tag, shape, policy)
    return _scalar_summary(tag, shape, policy)


# -- selectors ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WholeSelector:
    """No selector: the metadata and the beginning. `offset` skips characters of the body."""

    offset: int = 0


@dataclass(frozen=True, slots=True)
class LinesSelector:
    """`lines:FIRST-LAST` (1-based, inclusive; `lines:7` one line, `lines:7-` to the end)."""

    first: int
    last: int | None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class SliceSelector:
    """`slice:START..STOP` of a JSON array (Python's half-open slice; negatives from the end)."""

    start: int | None
    stop: int | None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class KeySelector:
    """`key:PATH` of a JSON object; dots go deeper (`key:results.0.name`)."""

    path: str
    offset: int = 0


Selector: TypeAlias = WholeSelector | LinesSelector | SliceSelector | KeySelector

_N = r"[0-9]{1,18}"  # ASCII digits only; 18 keeps int() cheap
_OFFSET = re.compile(rf"(.*?)\s*@({_N})", re.DOTALL)
_LINES = re.compile(rf"({_N})(?:-({_N})?)?")
_SLICE = re.compile(rf"(-?{_N})?\.\.(-?{_N})?|(-?{_N})")
_MAX_PATH = 200
_USAGE = (
    "use lines:A-B for text (e.g. lines:20-50), slice:A..B for a JSON array (e.g. slice:0..10), "
    "key:NAME for a JSON object (e.g. key:results), or no selector for an overview"
)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + _ELLIPSIS)


def parse_selector(text: str | None) -> Selector:
    """Read a selector; `None` or `""` is the overview.

    A trailing `@N` skips N characters of the selection's output (how a cut output's next
    part is asked for).

    Raises:
        ToolError: A malformed selector, with the forms that are accepted.
    """
    if text is None:
        return WholeSelector()
    body, offset = text.strip(), 0
    paged = _OFFSET.fullmatch(body)
    if paged:
        body, offset = paged.group(1), int(paged.group(2))
    if not body:
        return WholeSelector(offset)
    kind, colon, arg = body.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind in ("lines", "slice"):
        arg = "".join(arg.split())
    if colon and kind == "lines":
        return _lines_selector(text, arg, offset)
    if colon and kind == "slice":
        return _slice_selector(text, arg, offset)
    if colon and kind == "key":
        if not arg or len(arg) > _MAX_PATH:
            raise ToolError(
                f"selector {_shown(text)}: key: needs a key of at most {_MAX_PATH} "
                "characters, e.g. key:results"
            )
        return KeySelector(arg, offset)
    raise ToolError(f"unknown selector {_shown(text)}: {_USAGE}")


def _lines_selector(text: str, arg: str, offset: int) -> LinesSelector:
    match = _LINES.fullmatch(arg)
    if match is None:
        raise ToolError(
            f"malformed selector {_shown(text)}: expected lines:FIRST-LAST with 1-based line "
            "numbers, e.g. lines:20-50 (lines:20 one line, lines:20- to the end)"
        )
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else None
    if match.group(2) is None and not arg.endswith("-"):
        last = first
    if last is not None and last < first:
        raise ToolError(f"selector {_shown(text)}: the last line comes before the first")
    return LinesSelector(first, last, offset)


def _slice_selector(text: str, arg: str, offset: int) -> SliceSelector:
    match = _SLICE.fullmatch(arg)
    if match is None:
        raise ToolError(
            f"malformed selector {_shown(text)}: expected slice:START..STOP (entries START to "
            "STOP-1, as a Python slice; either may be left out or negative), e.g. slice:3..8"
        )
    if match.group(3) is not None:
        index = int(match.group(3))
        return SliceSelector(index, index + 1 if index != -1 else None, offset)
    start, stop = match.group(1), match.group(2)
    return SliceSelector(int(start) if start else None, int(stop) if stop else None, offset)


# -- paging ------------------------------------------------------------------------------------

# Room kept for the header, the section title and the notes; the body gets the rest.
_RESERVE = 1_000


@dataclass(slots=True)
class _Body:
    """A rendered selection: items (lines, entries) joined by newlines.

    `text` holds the whole selection when `complete`, else at least its first offset +
    budget + 1 characters. `first` numbers its first item (None: items are not addressable).
    `resume(k)` is the selector for items k.. of the selection; `page(n)` the selector for the
    selection from its character n.
    """

    title: str
    text: str
    complete: bool
    first: int | None
    unit: str
    page: Callable[[int], str]
    resume: Callable[[int], str] | None = None
    notes: list[str] = field(default_factory=lambda: [])


def _page(body: _Body, offset: int, budget: int) -> tuple[str, str | None]:
    """The part of `body` to show from `offset`, and the note on what was cut, if anything."""
    text = body.text
    if offset and offset >= len(text) and body.complete:
        raise ToolError(f"@{offset} is past the end of this selection ({len(text)} characters)")
    rest = text[offset : offset + budget + 1]
    if len(rest) <= budget and body.complete:
        return rest, None
    head = rest[:budget]
    cut = head.rfind("\n")
    shown = head[:cut] if cut > 0 else head  # end at an item boundary when one is in reach
    end = offset + len(shown)
    item = None if body.first is None else body.first + text.count("\n", 0, end)
    if cut > 0:
        where = f", up to the end of {body.unit} {item}" if item is not None else ""
        resume = body.resume(item + 1) if body.resume and item is not None else None
        following = resume or body.page(end + 1)
    else:
        at = end - (text.rfind("\n", 0, end) + 1)
        where = f", inside {body.unit} {item} after its character {at}" if item is not None else ""
        following = body.page(end)
    return shown, (
        f"Output limit reached: shown characters {offset + 1}-{end} of this selection{where}. "
        f'Next part: selector "{following}".'
    )


def _render(header: str, body: _Body, offset: int, budget: int, cap: int) -> str:
    shown, cut = _page(body, offset, budget)
    notes = [*body.notes, *([cut] if cut else [])]
    parts = [header, f"── {body.title} ──"]
    if shown:
        parts.append(shown)
    if notes:
        parts += ["── note ──", *notes]
    out = "\n".join(parts)
    return out[:cap]  # the bound holds whatever the notes say


# -- text blobs --------------------------------------------------------------------------------


@dataclass(slots=True)
class _LineScan:
    total: int = 0  # lines in the whole text
    window: bytearray = field(default_factory=bytearray)  # from line `first` on
    complete: bool = False  # the window reaches the end of line `last` (or of the text)


def _after_newline(data: bytes, nth: int, start: int = 0) -> int:
    """The index just after the `nth` (1-based) newline of `data` at or after `start`."""
    pos = start
    for _ in range(nth):
        pos = data.index(b"\n", pos) + 1
    return pos


class _LineScanner:
    """Feeds chunks of UTF-8 bytes, keeps the bytes of lines `first`..`last` (at most `limit`)."""

    def __init__(self, first: int, last: int | None, limit: int) -> None:
        self.first, self.limit = first, limit
        self.want = None if last is None else last - first + 1  # newlines that end the range
        self.taken = 0  # newlines inside the window
        self.seen = 0  # newlines before the current chunk
        self.state: Literal["seek", "take", "done"] = "seek" if first > 1 else "take"
        self.scan = _LineScan()
        self.ends_with_newline = True

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        count = chunk.count(b"\n")
        start = 0
        if self.state == "seek" and self.seen + count >= self.first - 1:
            start = _after_newline(chunk, self.first - 1 - self.seen)
            self.state = "take"
        if self.state == "take":
            self._take(chunk, start)
        self.seen += count
        self.ends_with_newline = chunk.endswith(b"\n")

    def _take(self, chunk: bytes, start: int) -> None:
        window = self.scan.window
        end = len(chunk)
        if self.want is not None:
            count = chunk.count(b"\n", start)
            if self.taken + count >= self.want:
                end = _after_newline(chunk, self.want - self.taken, start) - 1
                self.state, self.scan.complete = "done", True
            else:
                self.taken += count
        window += chunk[start:end]
        if len(window) > self.limit:
            del window[self.limit :]
            self.state, self.scan.complete = "done", False

    def finish(self) -> _LineScan:
        if self.state == "take":  # the range runs to the end of the text
            self.scan.complete = True
            if self.scan.window.endswith(b"\n"):  # it ends the last line; it is not a line
                del self.scan.window[-1:]
        self.scan.total = self.seen + (0 if self.ends_with_newline else 1)
        return self.scan


async def _str_chunks(text: str) -> AsyncIterator[bytes]:
    step = 1 << 20
    for start in range(0, len(text), step):
        yield text[start : start + step].encode("utf-8", "surrogatepass")
        await anyio.lowlevel.checkpoint()


def _decode(window: bytearray, final: bool) -> str:
    return codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(window), final)


def _line_notes(selector: LinesSelector, total: int) -> tuple[int, int, list[str]]:
    first = max(selector.first, 1)
    last = total if selector.last is None else min(selector.last, total)
    notes: list[str] = []
    if selector.first < 1:
        notes.append("Line numbers start at 1: shown from line 1.")
    if total == 0:
        notes.append("The text is empty (0 lines).")
    elif first > total:
        notes.append(f"Line {first} is past the end: the text has {total} lines (lines:1-{total}).")
    elif selector.last is not None and selector.last > total:
        notes.append(f"The text has {total} lines: the range is clamped to lines {first}-{total}.")
    return first, last, notes


async def _inspect_text(
    tag: str, chunks: AsyncIterator[bytes], selector: Selector, cap: int
) -> str:
    if isinstance(selector, SliceSelector | KeySelector):
        kind = "slice:" if isinstance(selector, SliceSelector) else "key:"
        raise ToolError(f"{tag} is text: {kind} selects in JSON; select lines, e.g. lines:1-50")
    lines = (
        selector if isinstance(selector, LinesSelector) else LinesSelector(1, None, selector.offset)
    )
    budget = cap - _RESERVE
    scanner = _LineScanner(max(lines.first, 1), lines.last, 4 * (lines.offset + budget + 1) + 4)
    async for chunk in chunks:
        scanner.feed(chunk)
    scan = scanner.finish()
    first, last, notes = _line_notes(lines, scan.total)
    text = _decode(scan.window, scan.complete) if first <= last else ""
    whole = isinstance(selector, WholeSelector)
    end = f"{last}" if lines.last is not None or whole else ""
    body = _Body(
        f"lines {first}-{last}" if first <= last else "lines",
        text,
        scan.complete or first > last,
        first,
        "line",
        page=(lambda n: f"@{n}") if whole else (lambda n: f"lines:{first}-{end}@{n}"),
        resume=lambda k: f"lines:{k}-{end}",
        notes=notes,
    )
    return _render(f"{tag} text | {scan.total} lines", body, lines.offset, budget, cap)


# -- JSON blobs --------------------------------------------------------------------------------


def _entries(text: str, start: int, stop: int, need: int) -> tuple[int, list[str], bool, Any]:
    """Count the array's entries; render entries start..stop-1 until `need` characters are.

    Also returns the first entry (None if none).
    """
    parts: list[str] = []
    size = count = 0
    first: Any = None
    for count, value in enumerate(array_items(text), 1):
        if count == 1:
            first = value
        if start < count <= stop and size < need:
            parts.append(dumps_json(value))
            size += len(parts[-1]) + 1
    return count, parts, len(parts) >= min(stop, count) - start, first


def _slice_bounds(text: str, selector: SliceSelector) -> tuple[int, int]:
    start, stop = selector.start, selector.stop
    if (start or 0) < 0 or (stop or 0) < 0:  # Python's negative indexes need the length first
        start, stop, _ = slice(start, stop).indices(sum(1 for _ in array_items(text)))
    return start or 0, _ALL if stop is None else stop


_ALL = 1 << 62


def _inspect_array(tag: str, text: str, selector: Selector, cap: int) -> str:
    if isinstance(selector, LinesSelector | KeySelector):
        kind = "lines:" if isinstance(selector, LinesSelector) else "key:"
        raise ToolError(
            f"{tag} is a json_array: {kind} does not apply; select entries, e.g. slice:0..10"
        )
    budget = cap - _RESERVE
    whole = isinstance(selector, WholeSelector)
    start, stop = (0, _ALL) if whole else _slice_bounds(text, selector)
    count, parts, complete, first = _entries(text, start, stop, selector.offset + budget + 1)
    low, high = min(start, count), max(min(stop, count), min(start, count))
    header = f"{tag} json_array | {count} entries"
    notes: list[str] = []
    if whole and count:
        header += f"\n── schema ──\n{_schema(first, 300)[:300]}"
    elif not whole and stop > count and (stop != _ALL or start > count):
        notes.append(f"The array has {count} entries: the slice is clamped to {low}..{high}.")
    if not whole and low == high:
        notes.append(f"No entries in this range; the array has {count} (slice:0..{count}).")
    body = _Body(
        f"entries {low}..{high}, one JSON value a line",
        "\n".join(parts),
        complete,
        low,
        "entry",
        page=(lambda n: f"@{n}") if whole else (lambda n: f"slice:{low}..{high}@{n}"),
        resume=lambda k: f"slice:{k}..{high}",
        notes=notes,
    )
    return _render(header, body, selector.offset, budget, cap)


def _resolve(value: Any, path: str, where: str) -> Any:
    if not path:
        return value
    if (members := _object(value)) is not None:
        return _resolve_key(members, path, where)
    if (entries := _array(value)) is not None:
        head, _, rest = path.partition(".")
        if re.fullmatch(r"-?[0-9]{1,18}", head) and -len(entries) <= int(head) < len(entries):
            return _resolve(entries[int(head)], rest, _child(where, head))
        raise ToolError(
            f"{where!r} is an array of {len(entries)} entries: "
            f"follow it with an index, e.g. {where}.0"
        )
    name = type_name(value)
    article = "an" if name[0] in "aeiou" else "a"
    raise ToolError(f"{where!r} is {article} {name}: it has no key {_shown(path)}")


def _child(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _resolve_key(members: dict[str, Any], path: str, where: str) -> Any:
    # Keys may hold dots: try the whole path as a key, then ever shorter prefixes.
    splits = [len(path), *(i for i in range(len(path) - 1, 0, -1) if path[i] == ".")]
    error: ToolError | None = None
    for split in splits:
        if path[:split] in members:
            try:
                key = path[:split]
                return _resolve(members[key], path[split + 1 :], _child(where, key))
            except ToolError as exc:
                error = error or exc
    if error is not None:
        raise error
    keys = _key_list(list(islice(members, 21)))
    raise ToolError(f"no key {_shown(path)} in {where!r}; its keys: {keys}")


def _key_list(keys: list[str]) -> str:
    names = [key if len(key) <= 40 else key[:40] + _ELLIPSIS for key in keys[:20]]
    return ", ".join(names) + (", …" if len(keys) > 20 else "") if names else "(none)"


def _find_key(tag: str, text: str, path: str) -> tuple[int, Any]:
    # Only the top-level members on the path are kept: the others are parsed and dropped.
    matches: dict[str, Any] = {}
    keys: dict[str, None] = {}
    for key, value in object_members(text):
        keys[key] = None
        if path == key or path.startswith(key + "."):
            matches[key] = value
    if not matches:
        names = _key_list(list(islice(keys, 21)))
        raise ToolError(f"{tag} has no key {_shown(path)}; its keys: {names}")
    return len(keys), _resolve_key(matches, path, "")


def _value_body(value: Any) -> str:
    if (entries := _array(value)) is not None:
        return "\n".join(dumps_json(entry) for entry in entries)
    return dumps_json(value, pretty=isinstance(value, dict))


def _inspect_object(tag: str, text: str, selector: Selector, cap: int) -> str:
    if isinstance(selector, LinesSelector | SliceSelector):
        kind = "lines:" if isinstance(selector, LinesSelector) else "slice:"
        raise ToolError(
            f"{tag} is a json_object: {kind} does not apply; select a key, e.g. key:NAME"
        )
    budget = cap - _RESERVE
    if isinstance(selector, KeySelector):
        count, value = _find_key(tag, text, selector.path)
        path = selector.path
        body = _Body(
            f"key {path}: {describe(value)}",
            _value_body(value),
            True,
            None,
            "",
            page=lambda n: f"key:{path}@{n}",
        )
        return _render(f"{tag} json_object | {count} keys", body, selector.offset, budget, cap)
    keys = {key: describe(value) for key, value in object_members(text)}
    listing = "\n".join(f"{key_text(key)}: {kind}" for key, kind in keys.items())
    body = _Body(
        "keys",
        listing,
        True,
        1,
        "key",
        page=lambda n: f"@{n}",
        notes=["Read a value with key:NAME (dots go deeper: key:results.0.name)."],
    )
    return _render(f"{tag} json_object | {len(keys)} keys", body, selector.offset, budget, cap)


def _inspect_scalar(tag: str, text: str, selector: Selector, cap: int) -> str:
    value = loads_json(text)
    if not isinstance(selector, WholeSelector):
        raise ToolError(f"{tag} is a single JSON {type_name(value)}: inspect it without a selector")
    body = _Body("value", dumps_json(value), True, None, "", page=lambda n: f"@{n}")
    return _render(_scalar_header(tag, value), body, selector.offset, cap - _RESERVE, cap)


def _inspect_json(tag: str, text: str, selector: Selector, cap: int) -> str:
    kind = json_kind(text)
    inspect = (
        _inspect_array
        if kind == "array"
        else _inspect_object
        if kind == "object"
        else _inspect_scalar
    )
    try:
        return inspect(tag, text, selector, cap)
    except ValueError as exc:  # _NotJson, or a damaged scalar blob
        raise ToolError(f"{tag} does not hold valid JSON ({exc})") from exc


# -- the tool ----------------------------------------------------------------------------------

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "blob_id": {
            "type": "string",
            "description": "The id from the stored output's summary: [blob:<id>].",
        },
        "selector": {
            "type": "string",
            "description": (
                "What to read; leave out for an overview and the beginning. lines:20-50 "
                "(text, 1-based, inclusive), slice:3..8 (JSON array entries 3 to 7), "
                "key:results (JSON object; key:results.0.name goes deeper). A trailing @N "
                "skips N characters of the selection (given when an output is cut)."
            ),
        },
    },
    "required": ["blob_id"],
    "additionalProperties": False,
}


def _read_input(input_json: str) -> tuple[str, str | None]:
    try:
        data: Any = orjson.loads(input_json)
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"the arguments are not JSON: {exc}") from exc
    args = _object(data)
    if args is None:
        raise ToolError('the arguments must be an object: {"blob_id": "…", "selector": "…"}')
    blob_id, selector = args.get("blob_id"), args.get("selector")
    if not isinstance(blob_id, str):
        raise ToolError("blob_id is required: the id in the summary's [blob:<id>] header")
    if selector is not None and not isinstance(selector, str):
        raise ToolError("selector must be a string such as lines:20-50, slice:3..8 or key:results")
    return blob_id, selector


class InspectTool:
    """The built-in `inspect(blob_id, selector?)` tool: reads part of a stored output.

    The Worker registers it when it has a blob store. What it returns is at most
    `policy.inspect_max_chars` characters and is never stored as a blob; every bad input (bad
    JSON, a malformed selector, a selector of the wrong kind, an unknown or malformed id)
    raises `ToolError`, which the model receives as an error result. Ids pass
    `parse_blob_id` before the store sees them, so no input names a file outside the store.

    Args:
        store: The blob store to read.
        policy: The caps (the defaults when `None`).
    """

    effect: Literal["read_only"] = "read_only"

    def __init__(self, store: BlobStore, policy: OutputPolicy | None = None) -> None:
        self._store = store
        self._policy = policy or OutputPolicy()

    def __repr__(self) -> str:
        return f"InspectTool({self._store!r})"

    @property
    def name(self) -> str:
        """`inspect`."""
        return "inspect"

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            "Read part of a large tool output that was stored as a blob; the history holds "
            "only its summary, which starts with [blob:<id>]. Without a selector: the overview "
            "and the beginning. Selectors: lines:20-50 (text), slice:3..8 (JSON array), "
            "key:results (JSON object). At most "
            f"{self._policy.inspect_max_chars} characters come back; when an output is cut, a "
            "note gives the selector for the next part."
        )

    @property
    def input_schema(self) -> dict[str, Any]:
        """`{blob_id: string, selector?: string}`."""
        return dict(_SCHEMA)

    async def execute(self, input_json: str) -> str:
        """Read what the arguments select.

        Raises:
            ToolError: Any bad input, an unknown blob, or a blob that cannot be read.
        """
        blob_text, selector_text = _read_input(input_json)
        selector = parse_selector(selector_text)
        try:
            blob_id = parse_blob_id(blob_text)
        except InvalidBlobIdError as exc:
            raise ToolError(str(exc)) from None
        try:
            out = await self._inspect(blob_id, selector)
        except BlobNotFoundError:
            raise ToolError(
                f"no blob {blob_id}: use the id of a summary's [blob:<id>] header"
            ) from None
        except BlobError as exc:
            raise ToolError(f"could not read blob {blob_id}: {exc}") from exc
        return _clean(out)

    async def _inspect(self, blob_id: str, selector: Selector) -> str:
        tag = f"[blob:{blob_id}]"
        cap = self._policy.inspect_max_chars
        if isinstance(self._store, TextStreamStore):
            stream = await self._store.stream_text(blob_id)
            if stream is not None:
                try:
                    return await _inspect_text(tag, stream, selector, cap)
                finally:
                    await stream.aclose()
        content = await self._store.load(blob_id)
        if isinstance(content, TextContent):
            return await _inspect_text(tag, _str_chunks(content.text), selector, cap)
        if isinstance(content, StructuredContent):
            return await anyio.to_thread.run_sync(
                _inspect_json, tag, content.json_text, selector, cap
            )
        raise ToolError(f"{tag} holds content of an unknown kind")
