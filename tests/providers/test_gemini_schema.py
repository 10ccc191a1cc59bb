"""JSON Schema → Gemini's function-declaration schema, on schemas pydantic really generates."""

from __future__ import annotations

from datetime import date, datetime
from enum import Enum, IntEnum
from typing import Annotated, Any, Literal
from uuid import UUID

import orjson
import pytest
from pydantic import BaseModel, Field

from llm_worker.providers._gemini_schema import gemini_schema

# Every keyword of Gemini's Schema object; anything else is rejected with HTTP 400.
ALLOWED = {
    "type", "format", "description", "nullable", "enum", "items", "properties", "required",
    "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern",
    "minProperties", "maxProperties", "anyOf", "propertyOrdering", "default", "title",
}  # fmt: skip
TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}
FORMATS = {
    "STRING": {"enum", "date-time"},
    "NUMBER": {"float", "double"},
    "INTEGER": {"int32", "int64"},
}


def assert_gemini_dialect(schema: dict[str, Any], where: str = "$") -> None:
    """The whole tree uses only what Gemini accepts."""
    assert set(schema) <= ALLOWED, (where, set(schema) - ALLOWED)
    kind = schema.get("type")
    assert kind is None or kind in TYPES, (where, kind)
    if "format" in schema:
        assert schema["format"] in FORMATS.get(kind or "", set()), (where, schema["format"])
    if "enum" in schema:
        assert kind == "STRING" and all(isinstance(v, str) for v in schema["enum"]), where
    if "properties" in schema or "required" in schema:
        assert kind == "OBJECT" and schema["properties"], where
        assert set(schema.get("required", [])) <= set(schema["properties"]), where
    if "items" in schema:
        assert kind == "ARRAY", where
        assert_gemini_dialect(schema["items"], where + ".items")
    for name, value in schema.get("properties", {}).items():
        assert_gemini_dialect(value, f"{where}.{name}")
    for i, member in enumerate(schema.get("anyOf", [])):
        assert_gemini_dialect(member, f"{where}.anyOf[{i}]")


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Priority(IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="Street and number")
    postcode: str | None = None


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Order(BaseModel):
    """An order to place."""

    name: Annotated[str, Field(min_length=1, max_length=50, pattern="^[a-z]+$")]
    quantity: int = Field(gt=0, le=99, description="How many")
    price: float = Field(ge=0, lt=1000.5)
    color: Color
    priority: Priority = Priority.LOW
    home: Address
    billing: Address | None = Field(None, description="Where the bill goes")
    tags: list[str] = Field(default_factory=list, max_length=5)
    mode: Literal["fast", "slow"]
    version: Literal[2] = 2
    fixed: Literal["v1"] = "v1"
    when: datetime
    day: date
    ref: UUID
    counts: dict[str, int]
    pair: tuple[int, str]
    either: int | str
    maybe_list: list[Address] | None = None
    pet: Cat | Dog = Field(discriminator="kind")
    tree: Tree


@pytest.fixture(scope="module")
def order() -> dict[str, Any]:
    converted = gemini_schema(Order.model_json_schema())
    assert_gemini_dialect(converted)
    return converted


def test_root_object_with_description_and_required(order: dict[str, Any]) -> None:
    assert order["type"] == "OBJECT"
    assert order["description"] == "An order to place."
    assert set(order["required"]) == {
        "name", "quantity", "price", "color", "home", "mode", "when", "day", "ref", "counts",
        "pair", "either", "pet", "tree",
    }  # fmt: skip


def test_bounds_and_exclusive_bounds(order: dict[str, Any]) -> None:
    props = order["properties"]
    assert props["name"] == {
        "type": "STRING",
        "minLength": 1,
        "maxLength": 50,
        "pattern": "^[a-z]+$",
    }
    # gt=0 on an integer is minimum 1; the description keeps the exact rule.
    assert props["quantity"] == {
        "type": "INTEGER",
        "minimum": 1,
        "maximum": 99,
        "description": "How many (must be > 0)",
    }
    assert props["price"] == {"type": "NUMBER", "minimum": 0, "description": "Must be < 1000.5"}
    assert props["tags"] == {"type": "ARRAY", "items": {"type": "STRING"}, "maxItems": 5}


def test_enums(order: dict[str, Any]) -> None:
    props = order["properties"]
    assert props["color"] == {"type": "STRING", "format": "enum", "enum": ["red", "green"]}
    assert props["mode"] == {"type": "STRING", "format": "enum", "enum": ["fast", "slow"]}
    assert props["fixed"] == {"type": "STRING", "format": "enum", "enum": ["v1"], "default": "v1"}
    # Gemini enums are strings: number enums are described, not enforced.
    assert props["priority"] == {
        "type": "INTEGER",
        "description": "Allowed values: 1, 2",
        "default": 1,
    }
    assert props["version"] == {"type": "INTEGER", "description": "Allowed values: 2", "default": 2}


def test_refs_are_inlined_and_optional_is_nullable(order: dict[str, Any]) -> None:
    props = order["properties"]
    address = {
        "type": "OBJECT",
        "description": "A postal address.",
        "properties": {
            "street": {"type": "STRING", "description": "Street and number"},
            "postcode": {"type": "STRING", "nullable": True, "default": None},
        },
        "required": ["street"],
    }
    assert props["home"] == address
    assert props["billing"] == {
        **address,
        "nullable": True,
        "description": "Where the bill goes",
        "default": None,
    }
    assert props["maybe_list"] == {
        "type": "ARRAY",
        "items": address,
        "nullable": True,
        "default": None,
    }


def test_formats_gemini_rejects_move_to_the_description(order: dict[str, Any]) -> None:
    props = order["properties"]
    assert props["when"] == {"type": "STRING", "format": "date-time"}
    assert props["day"] == {"type": "STRING", "description": "Format: date"}
    assert props["ref"] == {"type": "STRING", "description": "Format: uuid"}


def test_maps_tuples_and_unions(order: dict[str, Any]) -> None:
    props = order["properties"]
    assert props["counts"] == {
        "type": "OBJECT",
        "description": "An object with any keys, each value of type integer",
    }
    assert props["pair"] == {
        "type": "ARRAY",
        "minItems": 2,
        "maxItems": 2,
        "items": {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]},
    }
    assert props["either"] == {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]}
    pet = props["pet"]["anyOf"]
    assert [p["properties"]["kind"]["enum"] for p in pet] == [["cat"], ["dog"]]


def test_recursive_models_are_cut_to_a_finite_schema(order: dict[str, Any]) -> None:
    tree = order["properties"]["tree"]
    child = tree["properties"]["children"]["items"]
    assert child["type"] == "OBJECT"
    assert "recursive" in child["description"]
    assert "properties" not in child
    # A recursive root ("#" references) terminates as well.
    root = gemini_schema(Tree.model_json_schema())
    assert root["properties"]["value"] == {"type": "INTEGER"}
    assert len(orjson.dumps(root)) < 1000


def test_mutual_recursion_and_refs_to_the_root() -> None:
    schema = {
        "type": "object",
        "properties": {"self": {"$ref": "#"}, "a": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        },
    }
    converted = gemini_schema(schema)
    assert_gemini_dialect(converted)
    assert converted["properties"]["a"]["properties"]["b"]["properties"]["a"]["type"] == "OBJECT"


def test_json_schema_keywords_outside_the_dialect_are_dropped_or_rewritten() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "title": "Thing",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "a": {"type": ["string", "null"], "examples": ["x"], "readOnly": True},
            "b": {"const": "only"},
            "c": {"allOf": [{"$ref": "#/definitions/C"}], "description": "See C"},
            "d": {"type": "number", "multipleOf": 0.5, "format": "double"},
            "e": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
            "f/g": {"$ref": "#/definitions/with~1slash"},
        },
        "required": ["a", "missing"],
        "definitions": {
            "C": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "with/slash": {"type": "boolean"},
        },
    }
    converted = gemini_schema(schema)
    assert_gemini_dialect(converted)
    props = converted["properties"]
    assert props["a"] == {"type": "STRING", "nullable": True}
    assert props["b"] == {"type": "STRING", "format": "enum", "enum": ["only"]}
    assert props["c"] == {
        "type": "OBJECT",
        "properties": {"x": {"type": "INTEGER"}},
        "description": "See C",
    }
    assert props["d"] == {"type": "NUMBER", "format": "double"}
    assert props["e"] == {"anyOf": [{"type": "INTEGER"}, {"type": "BOOLEAN"}]}
    assert props["f/g"] == {"type": "BOOLEAN"}
    assert converted["required"] == ["a"]
    assert "title" not in converted


def test_the_input_is_not_modified() -> None:
    schema = Order.model_json_schema()
    before = orjson.dumps(schema)
    gemini_schema(schema)
    assert orjson.dumps(schema) == before
