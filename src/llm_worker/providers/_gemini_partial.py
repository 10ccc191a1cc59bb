"""Gemini function calls whose arguments stream in pieces (`streamFunctionCallArguments`).

A request that opts in (through `Request.options`,
`toolConfig.functionCallingConfig.streamFunctionCallArguments: true`; a Vertex AI feature)
gets each call as several `functionCall` parts:

- the first names the function and says `willContinue: true` (an `id`, and the part's
  `thoughtSignature`, may come with it);
- the next ones carry no name, only `partialArgs`: a list of
  `{"jsonPath": "$.a.b[0]", "stringValue" | "numberValue" | "boolValue" | "nullValue": …,
  "willContinue": …}`. The pieces of one string arrive as several `stringValue`s of the same
  path, appended in order; any other value replaces what the path held;
- the call ends at the first part whose `willContinue` is absent or false.

[`PartialCall`][] rebuilds the arguments object from those pieces; the mapper sends it as the
tool-use block's one `InputJsonDelta` when the call ends, so the call reads exactly like a
call that arrived whole.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any, Final

import orjson

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import MalformedStreamError
from llm_worker.providers._blocks import wrong_type

__all__ = ("PartialCall", "starts_partial_call")

_WHERE: Final = "a streamed functionCall part"
# `.name`, `[0]`, `['name']` or `["name"]` (RFC 9535 normalized paths and the shorthand).
_SEGMENT: Final = re.compile(
    r"""\.([^.\[\]'"]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]"""
)
_ESCAPE: Final = re.compile(r"\\(.)")
_MAX_INDEX: Final = 10_000  # array elements of one call: more is no real argument list
_MAX_DEPTH: Final = 64


def starts_partial_call(call: dict[str, Any]) -> bool:
    """Whether a named `functionCall` part opens a call whose arguments stream in pieces."""
    return bool(call.get("willContinue")) or "partialArgs" in call


class PartialCall:
    """The arguments of one streamed call, rebuilt piece by piece.

    Bounded: a path nests at most 64 levels, and the arrays of one call hold at most 10,000
    elements in all, so a short piece (`$.a[9999]`) cannot make a large tree; the pieces of a
    string are kept as a list and joined once, so a long string in many pieces costs linear
    time.
    """

    __slots__ = ("_args", "_room", "size")

    def __init__(self, call: dict[str, Any]) -> None:
        args = call.get("args")
        if args is not None and args.__class__ is not dict:
            raise wrong_type(_WHERE, "functionCall.args", args, "an object")
        self._args: dict[str, Any] = dict(args or {})
        self._room = _MAX_INDEX  # array elements this call may still add
        # Characters of the pieces taken (paths and strings): what the call holds, counted
        # against the answer's bound as it grows (the JSON at the end, where longer, too).
        self.size = 0

    def feed(self, call: dict[str, Any]) -> bool:
        """Apply one part's `partialArgs`; return whether the call is complete."""
        pieces = call.get("partialArgs")
        if pieces is not None and pieces.__class__ is not list:
            raise wrong_type(_WHERE, "functionCall.partialArgs", pieces, "an array")
        for piece in pieces or ():
            if piece.__class__ is not dict:
                raise wrong_type(_WHERE, "functionCall.partialArgs[]", piece, "an object")
            self._apply(piece)
        return not call.get("willContinue")

    def arguments(self) -> str:
        """The rebuilt arguments, as JSON text."""
        return orjson.dumps(self._args, default=_joined).decode()

    def _apply(self, piece: dict[str, Any]) -> None:
        path = as_str(piece.get("jsonPath"))
        if path is None:
            raise wrong_type(_WHERE, "partialArgs[].jsonPath", piece.get("jsonPath"))
        keys = _keys(path)
        self.size += len(path)
        if "stringValue" in piece:
            value = piece["stringValue"]
            if value.__class__ is not str:
                raise wrong_type(_WHERE, "partialArgs[].stringValue", value)
            self.size += len(value)
            self._set(keys, value, path, append=True)
        elif "numberValue" in piece:
            value = piece["numberValue"]
            if value.__class__ not in (int, float):
                raise wrong_type(_WHERE, "partialArgs[].numberValue", value, "a number")
            self._set(keys, value, path, append=False)
        elif "boolValue" in piece:
            value = piece["boolValue"]
            if value.__class__ is not bool:
                raise wrong_type(_WHERE, "partialArgs[].boolValue", value, "a boolean")
            self._set(keys, value, path, append=False)
        elif "nullValue" in piece:
            self._set(keys, None, path, append=False)
        # A piece with no value only announces its path: nothing to set yet.

    def _set(self, keys: list[str | int], value: Any, path: str, *, append: bool) -> None:
        node: Any = self._args
        for key, below in pairwise(keys):
            node = self._child(node, key, {} if isinstance(below, str) else [], path)
        last = keys[-1]
        current = self._slot(node, last, path)
        if append:
            if current.__class__ is _Pieces:
                current.parts.append(value)
                return
            value = _Pieces([current, value] if isinstance(current, str) else [value])
        node[last] = value

    def _child(
        self, node: Any, key: str | int, empty: dict[str, Any] | list[Any], path: str
    ) -> Any:
        current = self._slot(node, key, path)
        if current is None:
            node[key] = current = empty
        elif type(current) is not type(empty):
            raise _bad_path(path, "it crosses a value of another kind")
        return current

    def _slot(self, node: Any, key: str | int, path: str) -> Any:
        """The value at `key` of `node` (None if absent), an array grown to hold `key`."""
        if isinstance(key, str):
            if node.__class__ is not dict:
                raise _bad_path(path, "a name applied to an array")
            return as_dict(node).get(key)
        if node.__class__ is not list:
            raise _bad_path(path, "an index applied to an object")
        items = as_list(node)
        grow = key + 1 - len(items)
        if grow > self._room:
            raise _bad_path(
                path,
                f"an index above what the call's arrays may hold ({_MAX_INDEX:,} elements in all)",
            )
        if grow > 0:
            self._room -= grow
            items.extend([None] * grow)
        return items[key]


class _Pieces:
    """The pieces of one string argument, joined once when the arguments are read."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts


def _joined(value: object) -> str:
    # orjson's `default`: the one kind of value the tree holds that is not JSON.
    if isinstance(value, _Pieces):
        return "".join(value.parts)
    raise TypeError(type(value).__name__)


def _keys(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise _bad_path(path)
    keys: list[str | int] = []
    pos = 1
    while pos < len(path):
        if len(keys) == _MAX_DEPTH:
            raise _bad_path(path, f"it nests deeper than {_MAX_DEPTH} levels")
        match = _SEGMENT.match(path, pos)
        if match is None:
            raise _bad_path(path)
        name, index, single, double = match.groups()
        if index is not None:
            keys.append(int(index))
        else:
            quoted = single if single is not None else double
            keys.append(name if quoted is None else _ESCAPE.sub(r"\1", quoted))
        pos = match.end()
    if not keys:
        raise _bad_path(path)
    return keys


def _bad_path(path: str, why: str = "not a JSON path this client reads") -> MalformedStreamError:
    return MalformedStreamError(
        f"{_WHERE}: partialArgs jsonPath {path[:100]!r}: {why}", streamed=True
    )
