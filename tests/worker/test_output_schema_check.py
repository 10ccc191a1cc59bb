"""Output types given as a JSON Schema dict: answers checked against the core keywords."""

from __future__ import annotations

from typing import Any

import pytest

from llm_worker.worker._schema_check import schema_problems

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"enum": ["a", "b"]},
        "where": {"$ref": "#/$defs/Place"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["name", "count"],
    "additionalProperties": False,
    "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ({"name": "x", "count": 1}, []),
        ({"name": "x", "count": 1, "tags": ["a"], "kind": "a", "note": None}, []),
        ({"name": "x"}, ["count: required, but missing"]),
        ({"name": "x", "count": "1"}, ["count: expected integer, got str"]),
        ({"name": "x", "count": True}, ["count: expected integer, got bool"]),
        ({"name": "x", "count": 1, "tags": [1]}, ["tags[0]: expected string, got int"]),
        ({"name": "x", "count": 1, "kind": "c"}, ["kind: must be one of ['a', 'b']"]),
        ({"name": "x", "count": 1, "where": {"city": 3}}, ["where.city: expected string, got int"]),
        ({"name": "x", "count": 1, "note": 3}, ["note: matches none of the allowed shapes"]),
        ({"name": "x", "count": 1, "extra": 1}, ["extra: not allowed (no such field)"]),
        ([1], ["(the value): expected object, got list"]),
    ],
)
def test_schema_problems(value: Any, problems: list[str]) -> None:
    assert schema_problems(value, SCHEMA) == problems
