"""JSON scanned and measured without building what is not needed.

`array_items` / `object_members` walk the top level of a JSON text one entry at a time with
the standard library's C scanner, so validating, counting and slicing a million-entry array
never holds more than one entry as Python objects; `json_shape` / `content_shape` record what
a summary needs (kind, size, first entries, key types). `loads_json` / `dumps_json` are orjson
with the standard library behind it for what orjson refuses but JSON allows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, cast

import orjson

from llm_worker.errors import BlobError

if TYPE_CHECKING:
    from llm_worker.blobs._output import StructuredContent

__all__ = (
    "POINT_EVERY",
    "POINT_SPAN",
    "JsonShape",
    "NotJson",
    "array_items",
    "array_points",
    "content_shape",
    "describe",
    "dict_or_none",
    "dumps_json",
    "json_kind",
    "json_shape",
    "key_text",
    "list_or_none",
    "loads_json",
    "object_members",
    "scan_once",
    "scan_string",
    "type_name",
)


class NotJson(ValueError):
    """The text is not the JSON it should be."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# The C scanner of the json module parses one value at a given index and says where it ended
# (orjson can only parse whole documents). NaN and Infinity are Python's, not JSON's.
# typeshed leaves these two out; their signatures are the documented ones.
_decoder: Any = json.JSONDecoder(parse_constant=_reject_constant)
scan_once: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once
_json_decoder_module: Any = json.decoder
scan_string: Callable[[str, int, bool], tuple[str, int]] = _json_decoder_module.scanstring
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
        return scan_once(text, pos)
    except StopIteration:  # the scanner's way of saying "no value here"
        raise NotJson(f"expected a value at {pos}") from None
    except (ValueError, RecursionError) as exc:
        raise NotJson(str(exc)) from exc


def _expect_end(text: str, pos: int) -> None:
    if _skip(text, pos) != len(text):
        raise NotJson(f"extra data at {pos}")


def json_kind(text: str) -> Literal["array", "object"] | None:
    """`"array"` or `"object"` by the first non-space character of `text`, else `None`."""
    pos = _skip(text, 0)
    first = text[pos : pos + 1]
    return "array" if first == "[" else "object" if first == "{" else None


def _walk(text: str, kind: Literal["array", "object"]) -> Iterator[tuple[int, Any]]:
    """The top-level entries (or members) of the JSON array (or object) `text`, in order.

    Each comes as `(start, item)`: an array's entry, or an object's `(key, value)`.

    Raises:
        NotJson: `text` is not a JSON `kind` (raised when the iteration reaches the fault).
    """
    opener, closer, after_item = ("[", "]", _AFTER_ENTRY) if kind == "array" else _OBJECT
    pos = _skip(text, 0)
    if not text.startswith(opener, pos):
        raise NotJson(f"not an {kind}")
    pos = _skip(text, pos + 1)
    if text.startswith(closer, pos):
        _expect_end(text, pos + 1)
        return
    item_at = _value_at if kind == "array" else _member_at
    while True:
        start = pos
        item, pos = item_at(text, pos)
        yield start, item
        if text.startswith(",", pos):  # compact JSON: no regex needed
            pos += 1
            if text[pos : pos + 1] in _SPACES:
                pos = _skip(text, pos)
            continue
        after = after_item.match(text, pos)
        if after is None:
            raise NotJson(f"expected ',' or '{closer}' at {pos}")
        pos = after.end()
        if after.group(1) == closer:
            _expect_end(text, pos)
            return


_OBJECT = ("{", "}", _AFTER_MEMBER)


def _member_at(text: str, pos: int) -> tuple[tuple[str, Any], int]:
    if not text.startswith('"', pos):
        raise NotJson(f"expected a key at {pos}")
    try:
        key, pos = scan_string(text, pos + 1, True)
    except ValueError as exc:
        raise NotJson(str(exc)) from exc
    colon = _COLON.match(text, pos)
    if colon is None:
        raise NotJson(f"expected ':' at {pos}")
    value, pos = _value_at(text, colon.end())
    return (key, value), pos


def array_items(text: str) -> Iterator[Any]:
    """The entries of the JSON array `text`, parsed one at a time.

    Raises:
        NotJson: `text` is not a JSON array (raised when the iteration reaches the fault).
    """
    for _, value in _walk(text, "array"):
        yield value


def array_points(text: str, every: int, span: int) -> tuple[int, list[tuple[int, int]]]:
    """The JSON array `text`'s length, and where some of its entries start.

    A point `(entry, index)` is kept every `every` entries, and sooner once `span`
    characters have passed since the last one.

    Raises:
        NotJson: `text` is not a JSON array.
    """
    points: list[tuple[int, int]] = []
    count, last_count, last_pos = 0, -every, -span
    for pos, _ in _walk(text, "array"):
        if count - last_count >= every or pos - last_pos >= span:
            points.append((count, pos))
            last_count, last_pos = count, pos
        count += 1
    return count, points


def object_members(text: str) -> Iterator[tuple[str, Any]]:
    """The members of the JSON object `text` in order, each value parsed as it comes.

    Raises:
        NotJson: `text` is not a JSON object (raised when the iteration reaches the fault).
    """
    for _, member in _walk(text, "object"):
        yield member


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


def dict_or_none(value: object) -> dict[str, Any] | None:
    """`value` if it is a dict, else `None` (unlike `_json.as_dict`, absence stays visible)."""
    # cast: parsed JSON objects have str keys (a value a tool built may not: shown with str()).
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def list_or_none(value: object) -> list[Any] | None:
    """`value` if it is a list, else `None`."""
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
        points: For an array scanned from its text: where some entries start, as
            `array_points(text, POINT_EVERY, POINT_SPAN)` finds them (a blob index reuses
            them instead of scanning again); else `None`.
    """

    kind: Literal["json_array", "json_object", "json_scalar"]
    count: int = 0
    head: list[Any] = field(default_factory=lambda: [])
    keys: dict[str, str] = field(default_factory=lambda: {})
    points: list[tuple[int, int]] | None = None


POINT_EVERY = 1000  # entries between two points of an array's scan (and of a blob index)
POINT_SPAN = 1 << 18  # characters after which a point comes sooner


def _scan_shape(text: str, head: int) -> JsonShape:
    kind = json_kind(text)
    if kind == "array":
        # Counting by points is the one full pass: no faster without them, and an index of
        # the blob then needs no second pass.
        count, points = array_points(text, POINT_EVERY, POINT_SPAN)
        first = list(islice(array_items(text), max(head, 1)))
        return JsonShape("json_array", count, first, points=points)
    if kind == "object":
        keys = {key: describe(value) for key, value in object_members(text)}
        return JsonShape("json_object", len(keys), keys=keys)
    try:
        return JsonShape("json_scalar", 1, [loads_json(text)])
    except ValueError as exc:
        raise NotJson(str(exc)) from exc


def json_shape(text: str, head: int) -> JsonShape | None:
    """The shape of `text` if it is a JSON array or object, else `None`.

    One pass, entry by entry: the value is never built whole.
    """
    if json_kind(text) is None:
        return None
    try:
        return _scan_shape(text, head)
    except NotJson:
        return None


def _value_shape(value: Any, head: int) -> JsonShape | None:
    if (members := dict_or_none(value)) is not None:
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
        except NotJson as exc:
            raise BlobError(f"the content is not valid JSON: {exc}") from exc
    content._shape = shape  # pyright: ignore[reportPrivateUsage]
    return shape
