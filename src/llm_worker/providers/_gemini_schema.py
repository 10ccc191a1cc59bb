"""JSON Schema → the schema dialect of Gemini function declarations.

Gemini's `functionDeclarations[].parameters` takes a subset of OpenAPI 3.0, not JSON Schema:
no `$ref` / `$defs`, no `additionalProperties`, no `const`, enums of strings only, a few
formats only, `nullable` instead of a `null` type. A schema that uses any of those is rejected
with HTTP 400 before the model sees anything, and pydantic emits most of them. The conversion:

- `$ref` to `#/$defs/…` (or `#/definitions/…`, or `#`) is resolved inline; a reference met
  again inside its own expansion (a recursive model) becomes a plain `OBJECT` whose
  description says so, so the schema stays finite;
- `anyOf` / `oneOf` / a `type` list with `null` becomes the other member plus
  `nullable: true`; several non-null members stay an `anyOf`; `allOf` members are merged;
- `const` becomes a one-value `enum`; string enums get `format: enum`; an enum of numbers or
  mixed values cannot be expressed and moves into the description ("allowed values: …");
- formats Gemini rejects (`uri`, `email`, `uuid`, …) and exclusive bounds move into the
  description; an integer's exclusive bound also becomes the equivalent inclusive one;
- `title`, `$schema`, `additionalProperties`, `examples`, `discriminator` and every keyword
  not in the dialect are dropped; `properties` / `required` stay on objects only, `items` on
  arrays only, and `required` names only properties that exist;
- type names become Gemini's upper-case ones (`STRING`, `OBJECT`, …).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from llm_worker._json import as_dict, as_list, as_str

__all__ = ("gemini_schema",)

_TYPES: Final = {
    "string": "STRING",
    "number": "NUMBER",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}

# The formats the Gemini API accepts per type; any other is rejected with a 400.
_FORMATS: Final = {
    "STRING": frozenset({"enum", "date-time"}),
    "NUMBER": frozenset({"float", "double"}),
    "INTEGER": frozenset({"int32", "int64"}),
}

# The bounds Gemini understands, per type.
_BOUNDS: Final = {
    "STRING": ("minLength", "maxLength", "pattern"),
    "NUMBER": ("minimum", "maximum"),
    "INTEGER": ("minimum", "maximum"),
    "ARRAY": ("minItems", "maxItems"),
    "OBJECT": ("minProperties", "maxProperties"),
}


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a JSON Schema (as pydantic emits it) to what Gemini's `parameters` accepts.

    Args:
        schema: A JSON Schema; `$defs` / `definitions` at its root are resolved inline.

    Returns:
        A new schema; the input is not modified.
    """
    root = dict(schema)
    return _Converter(root).node(root, ())


class _Converter:
    __slots__ = ("_root",)

    def __init__(self, root: dict[str, Any]) -> None:
        self._root = root

    def node(self, raw: object, stack: tuple[str, ...]) -> dict[str, Any]:
        schema = as_dict(raw)
        ref = as_str(schema.get("$ref"))
        if ref is not None:
            return self._ref(schema, ref, stack)
        if "allOf" in schema:
            return self.node(self._merge_all_of(schema, stack), stack)
        union = schema.get("anyOf", schema.get("oneOf"))
        if union is not None:
            return self._union(schema, as_list(union), stack)
        kind: Any = schema.get("type")
        kinds = as_list(kind)
        if kinds:
            rest = {k: v for k, v in schema.items() if k != "type"}
            return self._union(schema, [{**rest, "type": t} for t in kinds], stack)
        return self._typed(schema, as_str(kind), stack)

    def _ref(self, schema: dict[str, Any], ref: str, stack: tuple[str, ...]) -> dict[str, Any]:
        name = ref.rsplit("/", 1)[-1] or "the root object"
        if ref in stack:
            out: dict[str, Any] = {
                "type": "OBJECT",
                "description": f"A {name} (recursive: the same fields as the enclosing {name}).",
            }
        else:
            out = self.node(self._resolve(ref), (*stack, ref))
        _overlay(out, schema)
        return out

    def _resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#"):
            return {}  # a remote reference cannot be fetched; an unconstrained value is sent
        target: Any = self._root
        for token in ref[1:].split("/"):
            if token:
                target = as_dict(target).get(token.replace("~1", "/").replace("~0", "~"))
        return as_dict(target)

    def _merge_all_of(self, schema: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for member in as_list(schema["allOf"]):
            part = as_dict(member)
            ref = as_str(part.get("$ref"))
            if ref is not None and ref not in stack:
                part = {**self._resolve(ref), **{k: v for k, v in part.items() if k != "$ref"}}
            for key, value in part.items():
                if key == "properties":
                    merged["properties"] = {**as_dict(merged.get("properties")), **as_dict(value)}
                elif key == "required":
                    merged["required"] = [*as_list(merged.get("required")), *as_list(value)]
                else:
                    merged.setdefault(key, value)
        return merged

    def _union(
        self, schema: dict[str, Any], members: list[Any], stack: tuple[str, ...]
    ) -> dict[str, Any]:
        real = [m for m in members if as_dict(m).get("type") != "null"]
        if len(real) == 1:
            out = self.node(real[0], stack)
        elif real:
            out: dict[str, Any] = {"anyOf": [self.node(m, stack) for m in real]}
        else:
            out = {}
        if len(real) < len(members):
            out["nullable"] = True
        _overlay(out, schema)
        return out

    def _typed(
        self, schema: dict[str, Any], kind: str | None, stack: tuple[str, ...]
    ) -> dict[str, Any]:
        gtype = _TYPES.get(kind) if kind is not None else _infer(schema)
        out: dict[str, Any] = {"type": gtype} if gtype else {}
        notes: list[str] = []
        _enum(out, schema, notes)
        _format(out, schema, gtype, notes)
        _bounds(out, schema, gtype, notes)
        if gtype == "OBJECT":
            self._object(out, schema, stack, notes)
        elif gtype == "ARRAY":
            self._array(out, schema, stack)
        if kind == "null":
            out["nullable"] = True
        _describe(out, as_str(schema.get("description")), notes)
        if "default" in schema:
            out["default"] = schema["default"]
        return out

    def _object(
        self, out: dict[str, Any], schema: dict[str, Any], stack: tuple[str, ...], notes: list[str]
    ) -> None:
        properties = {
            str(name): self.node(value, stack)
            for name, value in as_dict(schema.get("properties")).items()
        }
        if not properties:
            # `properties: {}` is rejected by some Gemini versions ("should be non-empty"); a
            # map (`dict[str, int]`) cannot be expressed, so the description carries it.
            values = as_dict(schema.get("additionalProperties"))
            value_type = as_str(values.get("type"))
            if value_type is not None:
                notes.append(f"an object with any keys, each value of type {value_type}")
            return
        out["properties"] = properties
        required = [r for r in as_list(schema.get("required")) if r in properties]
        if required:
            out["required"] = required

    def _array(self, out: dict[str, Any], schema: dict[str, Any], stack: tuple[str, ...]) -> None:
        prefix = as_list(schema.get("prefixItems"))
        if isinstance(schema.get("items"), dict):
            out["items"] = self.node(as_dict(schema["items"]), stack)
        elif prefix:
            # A tuple: Gemini has no positional items; each entry may be any of their types.
            converted = [self.node(p, stack) for p in prefix]
            out["items"] = converted[0] if len(converted) == 1 else {"anyOf": converted}


def _infer(schema: dict[str, Any]) -> str | None:
    if "properties" in schema:
        return "OBJECT"
    if "items" in schema or "prefixItems" in schema:
        return "ARRAY"
    values = as_list(schema.get("enum")) or ([schema["const"]] if "const" in schema else [])
    if values and all(isinstance(v, str) for v in values):
        return "STRING"
    return None


def _enum(out: dict[str, Any], schema: dict[str, Any], notes: list[str]) -> None:
    if "enum" in schema:
        values = as_list(schema["enum"])
    elif "const" in schema:
        values = [schema["const"]]
    else:
        return
    if None in values:
        out["nullable"] = True
        values = [v for v in values if v is not None]
    if values and all(isinstance(v, str) for v in values) and out.get("type") == "STRING":
        out["enum"] = values
        out["format"] = "enum"
    elif values:
        # Gemini enums are strings only: a number enum cannot be enforced, only described.
        notes.append("allowed values: " + ", ".join(_show(v) for v in values))


def _format(
    out: dict[str, Any], schema: dict[str, Any], gtype: str | None, notes: list[str]
) -> None:
    fmt = as_str(schema.get("format"))
    if fmt is None or "format" in out:
        return
    if gtype is not None and fmt in _FORMATS.get(gtype, ()):
        out["format"] = fmt
    else:
        notes.append(f"format: {fmt}")


def _bounds(
    out: dict[str, Any], schema: dict[str, Any], gtype: str | None, notes: list[str]
) -> None:
    for key in _BOUNDS.get(gtype or "", ()):
        if key in schema:
            out[key] = schema[key]
    for key, word, step in (("exclusiveMinimum", ">", 1), ("exclusiveMaximum", "<", -1)):
        bound = schema.get(key)
        if isinstance(bound, int | float) and not isinstance(bound, bool):
            notes.append(f"must be {word} {_show(bound)}")
            if gtype == "INTEGER" and isinstance(bound, int):
                out["minimum" if step > 0 else "maximum"] = bound + step


def _describe(out: dict[str, Any], description: str | None, notes: list[str]) -> None:
    if notes:
        extra = "; ".join(notes)
        description = f"{description} ({extra})" if description else extra[0].upper() + extra[1:]
    if description:
        out["description"] = description


def _overlay(out: dict[str, Any], schema: dict[str, Any]) -> None:
    # Keywords next to a `$ref` or a union (pydantic puts the field's description and default
    # there) describe the field itself and win over the referenced definition's.
    description = as_str(schema.get("description"))
    if description:
        out["description"] = description
    if "default" in schema:
        out["default"] = schema["default"]


def _show(value: object) -> str:
    return orjson.dumps(value).decode()
