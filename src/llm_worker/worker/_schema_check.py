"""A JSON value checked against a JSON Schema dict: the core keywords.

For output types given as a schema: `type`, `properties`, `required`,
`additionalProperties: false`, `items`, `enum`, `const`, `anyOf` / `oneOf` and local `$ref`s
(`#/$defs/...`). Other keywords (formats, bounds, patterns) are left to the provider's strict
mode, which enforces the schema as it generates.
"""

from __future__ import annotations

from typing import Any

from llm_worker._json import as_dict, as_list, as_str

__all__ = ("schema_problems",)

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}


def schema_problems(value: Any, schema: dict[str, Any]) -> list[str]:
    """What is wrong with `value` under `schema`, one `path: problem` line each (none: valid)."""
    problems: list[str] = []
    _check(value, schema, as_dict(schema.get("$defs")), "", problems)
    return problems


def _check(
    value: Any, schema: dict[str, Any], defs: dict[str, Any], path: str, out: list[str]
) -> None:
    ref = as_str(schema.get("$ref"))
    if ref is not None and ref.startswith("#/$defs/"):
        schema = as_dict(defs.get(ref.removeprefix("#/$defs/")))
    where = path or "(the value)"
    options = as_list(schema.get("anyOf")) or as_list(schema.get("oneOf"))
    if options:
        if not any(not _problems(value, as_dict(o), defs) for o in options):
            out.append(f"{where}: matches none of the allowed shapes")
        return
    if not _type_ok(value, schema.get("type")):
        out.append(f"{where}: expected {schema.get('type')}, got {type(value).__name__}")
        return
    if "enum" in schema and value not in as_list(schema["enum"]):
        out.append(f"{where}: must be one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{where}: must be {schema['const']!r}")
    fields = as_dict(value)
    if fields or schema.get("type") == "object":
        _check_object(fields, schema, defs, path, out)
    items = as_dict(schema.get("items"))
    if items:
        for i, item in enumerate(as_list(value)):
            _check(item, items, defs, f"{path}[{i}]", out)


def _check_object(
    value: dict[str, Any], schema: dict[str, Any], defs: dict[str, Any], path: str, out: list[str]
) -> None:
    properties = as_dict(schema.get("properties"))
    for name in as_list(schema.get("required")):
        if name not in value:
            out.append(f"{path + '.' if path else ''}{name}: required, but missing")
    for name, item in value.items():
        where = f"{path + '.' if path else ''}{name}"
        if name in properties:
            _check(item, as_dict(properties[name]), defs, where, out)
        elif schema.get("additionalProperties") is False:
            out.append(f"{where}: not allowed (no such field)")


def _problems(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    out: list[str] = []
    _check(value, schema, defs, "", out)
    return out


def _type_ok(value: Any, kind: Any) -> bool:
    kinds = [kind] if isinstance(kind, str) else [k for k in as_list(kind) if isinstance(k, str)]
    if not kinds:
        return True
    if isinstance(value, bool):  # a bool is an int to Python, never to JSON Schema
        return "boolean" in kinds
    return any(isinstance(value, _TYPES.get(k, ())) for k in kinds)
