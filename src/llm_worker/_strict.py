"""Strict-mode schemas (strict tools, structured outputs), and reading values sent against them.

Strict mode (`ToolMeta.strict`) accepts only closed objects whose properties are all required.
`strict_schema` rewrites a tool's schema to that form: every object gets
`"additionalProperties": false` and lists all its properties as required; a property that was
optional becomes nullable and loses its `default`, so the model sends `null` to mean "leave it
out". `drop_optional_nulls` undoes that on the way in: a `null` for an optional property that
does not itself accept `null` is removed, and the parameter or field then takes its default.

Objects with free-form keys (`dict[str, int]`, an `Any` parameter) cannot be expressed in
strict mode; they are refused when the tool is made, rather than as a 400 from the provider.
"""

from __future__ import annotations

import copy
from typing import Any

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import ConfigurationError

__all__ = ("drop_optional_nulls", "strict_schema")

_NULL = {"type": "null"}


def strict_schema(schema: dict[str, Any], tool_name: str, *, kind: str = "tool") -> dict[str, Any]:
    """A strict-mode form of `schema` (a new object; `schema` is left as it is).

    Args:
        schema: A JSON Schema (a tool's arguments, or a structured output).
        tool_name: The name errors give it.
        kind: What errors call it (`"tool"`, `"output"`).

    Raises:
        ConfigurationError: Part of the schema has free-form keys or no type at all.
    """
    result = copy.deepcopy(schema)
    label = f"{kind} {tool_name!r}"
    _close(result, label, "arguments" if kind == "tool" else "the value")
    for name, definition in as_dict(result.get("$defs")).items():
        _close(as_dict(definition), label, name)
    return result


_TYPED = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const")


def _close(node: dict[str, Any], label: str, where: str) -> None:
    if not any(key in node for key in _TYPED):
        raise ConfigurationError(
            f"{label}: {where} may hold any value, which strict mode cannot express"
        )
    properties = as_dict(node.get("properties"))
    if node.get("type") == "object" or properties:
        extra = node.get("additionalProperties", False)
        if extra is not False and not properties:
            raise ConfigurationError(
                f"{label}: {where} is an object with free-form keys, which strict "
                "mode cannot express; declare its fields (a model or a dataclass)"
            )
        required = set(as_list(node.get("required")))
        for name, value in properties.items():
            prop = as_dict(value)
            if name not in required:
                properties[name] = _nullable(prop)
            _close(prop, label, f"{where}.{name}")
        node["additionalProperties"] = False
        node["required"] = list(properties)
    for key in ("items", "additionalItems"):
        if isinstance(node.get(key), dict):
            _close(as_dict(node[key]), label, f"{where}[]")
    for option in as_list(node.get("anyOf")):
        _close(as_dict(option), label, where)


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    prop.pop("default", None)
    if _accepts_null(prop):
        return prop
    options = as_list(prop.get("anyOf"))
    if options:
        prop["anyOf"] = [*options, dict(_NULL)]
        return prop
    # Keep the description beside the union, where a model reads it.
    description = prop.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [prop, dict(_NULL)]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


def _accepts_null(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(as_dict(option) == _NULL for option in as_list(prop.get("anyOf")))


def drop_optional_nulls(value: Any, schema: dict[str, Any]) -> None:
    """Remove, in place, each `null` sent for an optional property that rejects `null`.

    Args:
        value: The parsed arguments.
        schema: The tool's original (not strict) schema, which says what was optional.
    """
    _drop(value, schema, as_dict(schema.get("$defs")))


def _drop(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> None:
    schema = _shape_of(value, _resolve(schema, defs), defs)
    arguments = as_dict(value)
    if arguments:
        properties = as_dict(schema.get("properties"))
        required = set(as_list(schema.get("required")))
        for name in list(arguments):
            prop = properties.get(name)
            if prop is None:
                continue
            prop = _resolve(as_dict(prop), defs)
            if arguments[name] is None and name not in required and not _accepts_null(prop):
                del arguments[name]
            else:
                _drop(arguments[name], prop, defs)
    else:
        items = as_dict(schema.get("items"))
        for item in as_list(value) if items else ():
            _drop(item, items, defs)


def _shape_of(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    # `X | None` is an anyOf: the option that describes an object or an array like `value`.
    want = "properties" if as_dict(value) else "items"
    for option in as_list(schema.get("anyOf")):
        resolved = _resolve(as_dict(option), defs)
        if want in resolved:
            return resolved
    return schema


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = as_str(schema.get("$ref"))
    if ref is not None and ref.startswith("#/$defs/"):
        return as_dict(defs.get(ref.removeprefix("#/$defs/")))
    return schema
