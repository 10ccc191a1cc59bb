"""Typed access to parsed JSON, for the edges where provider data enters.

Parsed JSON is `Any`; these helpers narrow it to what the code expects without silencing the
type checker everywhere. Each returns a neutral value (`{}`, `[]`, `None`) when the shape
differs, so a chunk of unexpected shape is passed over rather than crashing the stream.
Beside them, what every layer says of JSON values alike: a value's type in an error message
(`json_type`), the place of text no UTF-8 can carry (`not_unicode`), such text made valid
(`sendable_text`, `sendable_json`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

__all__ = (
    "as_dict",
    "as_int",
    "as_list",
    "as_str",
    "is_unicode",
    "json_type",
    "lone_surrogate",
    "not_unicode",
    "sendable_json",
    "sendable_text",
)


def as_dict(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else `{}`."""
    # cast: JSON object keys are always str; the values stay Any for the caller to narrow.
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    """`value` if it is a JSON array, else `[]`."""
    return cast("list[Any]", value) if isinstance(value, list) else []


def as_str(value: object) -> str | None:
    """`value` if it is a string, else `None`."""
    return value if isinstance(value, str) else None


def as_int(value: object) -> int | None:
    """`value` if it is an integer (not a bool), else `None`."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_type(value: object) -> str:
    """The JSON type of parsed `value` as an error message names it: "a string", "null", …."""
    # One wording for every layer's messages (a provider's mapper, the tool-call parser).
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


_SURROGATE = re.compile("[\ud800-\udfff]")


def sendable_text(text: str) -> str:
    """`text` as valid Unicode: each lone surrogate U+FFFD, a surrogate pair its character."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    # UTF-16 spells a pair as the character it stands for; a lone one cannot decode.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def sendable_json(value: Any) -> Any:
    """Parsed JSON `value` with each lone surrogate in its strings (keys too) made U+FFFD."""
    if isinstance(value, str):
        return sendable_text(value)
    if isinstance(value, list):
        return [sendable_json(item) for item in cast("list[Any]", value)]
    if isinstance(value, dict):
        items = cast("dict[str, Any]", value).items()
        return {sendable_text(key): sendable_json(item) for key, item in items}
    return value


def not_unicode(value: object, path: str) -> str | None:
    """The path in `value` of the first string (or key) UTF-8 cannot carry (a lone surrogate).

    For the error of a JSON encoder that refused `value`: walked only once it has failed,
    it names the place, never the text. `path` is `value`'s own (`""` for the top); a key is
    named by the path of its object (`messages[2].input: a key`).
    """
    found = lone_surrogate(value)
    if found is None:
        return None
    steps, key = found
    for step in steps:
        if isinstance(step, int):
            path += f"[{step}]"
        else:
            path = f"{path}.{step}" if path else step
    return f"{path or 'the body'}: a key" if key else path


def lone_surrogate(value: object) -> tuple[tuple[str | int, ...], bool] | None:
    """The steps to the first string in `value` UTF-8 cannot carry, and whether it is a key.

    A key is reached by the steps to its object. Walked without recursion (`json.loads`
    nests a thousand levels), each container once (a caller's value may hold itself).
    """
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    seen: set[int] = set()
    while stack:
        item, steps = stack.pop()
        if isinstance(item, str):
            if not is_unicode(item):
                return steps, False
            continue
        ident = id(item)
        if ident in seen or not isinstance(item, Mapping | list | tuple):
            continue
        seen.add(ident)
        if isinstance(item, Mapping):
            entries = list(cast("Mapping[object, object]", item).items())
            if any(isinstance(k, str) and not is_unicode(k) for k, _ in entries):
                return steps, True
            children = [(v, (*steps, str(k))) for k, v in entries]
        else:
            children = [(v, (*steps, i)) for i, v in enumerate(cast("list[object]", item))]
        stack.extend(reversed(children))
    return None


def is_unicode(text: str) -> bool:
    """Whether UTF-8 can carry `text` (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
