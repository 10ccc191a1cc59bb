"""`check_arguments`: whether arguments fit a tool, checked before anything runs.

For an `@tool` function, its own validator decides (the one a call goes through). For a
hand-written tool, the arguments are checked against the common core of its JSON Schema —
`type`, `enum`, `const`, `required`, `properties`, `additionalProperties: false`, `items` —
and keywords beyond that core are not enforced: the tool still validates its own input when
it runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from llm_worker._json import as_dict, as_list
from llm_worker.errors import ToolError
from llm_worker.tools._messages import MAX_ERRORS, MAX_VALUE, excerpt
from llm_worker.tools._tool import FunctionTool, Tool, tool_meta

__all__ = ("check_arguments",)

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """Why `arguments` do not fit `tool`'s parameters, or `None` when they do.

    Args:
        tool: The tool the arguments are for.
        arguments: The arguments, as a JSON object.
    """
    if isinstance(tool, FunctionTool):
        try:
            tool.validate_input(arguments)
        except ToolError as exc:
            return str(exc)
        return None
    problems = list(_problems(tool_meta(tool).input_schema, arguments, "arguments"))
    if not problems:
        return None
    shown = "; ".join(problems[:MAX_ERRORS])
    more = len(problems) - MAX_ERRORS
    return f"{shown}; and {more} more" if more > 0 else shown


def _problems(schema: dict[str, Any], value: Any, where: str) -> Iterator[str]:
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else [str(k) for k in as_list(kinds)]
    if names and not any(_is(value, name) for name in names):
        got = excerpt(repr(value), MAX_VALUE)
        yield f"{where}: expected {' or '.join(names)} (got {got})"
        return
    if "enum" in schema and value not in as_list(schema["enum"]):
        yield f"{where}: must be one of {as_list(schema['enum'])!r}"
    if "const" in schema and value != schema["const"]:
        yield f"{where}: must be {schema['const']!r}"
    # cast: narrowed by isinstance, a JSON value's container type has unknown items.
    if isinstance(value, dict):
        yield from _object_problems(schema, as_dict(cast("object", value)), where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = as_dict(schema["items"])
        for i, item in enumerate(as_list(cast("object", value))):
            yield from _problems(items, item, f"{where}[{i}]")


def _object_problems(schema: dict[str, Any], value: dict[str, Any], where: str) -> Iterator[str]:
    properties = as_dict(schema.get("properties"))
    for name in as_list(schema.get("required")):
        if name not in value:
            yield f"{where}.{name}: required, but missing"
    for name, item in value.items():
        if name in properties:
            yield from _problems(as_dict(properties[name]), item, f"{where}.{name}")
        elif schema.get("additionalProperties") is False:
            yield f"{where}.{name}: not a parameter of this tool"


def _is(value: object, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False  # JSON keeps booleans apart from numbers
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))
