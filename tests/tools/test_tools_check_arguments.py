"""`check_arguments`: do arguments fit a tool, before it runs (used to check a person's edits)."""

from __future__ import annotations

from typing import Any

from llm_worker import tool
from llm_worker.tools import check_arguments


@tool
def transfer(amount: int, to: str = "savings") -> str:
    """Move money."""
    return f"{amount}->{to}"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "count": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]},
    },
    "required": ["mode"],
    "additionalProperties": False,
}


class Hand:
    """A hand-written tool: only its JSON Schema says what it takes."""

    def __init__(self) -> None:
        self.name = "hand"
        self.description = "A hand-written tool."
        self.input_schema = SCHEMA

    async def execute(self, input_json: str) -> str:
        return input_json


def test_a_function_tool_is_checked_by_its_own_validator() -> None:
    assert check_arguments(transfer, {"amount": 3}) is None
    problem = check_arguments(transfer, {"amount": "lots", "extra": 1})
    assert problem is not None
    assert "amount" in problem and "extra" in problem


def test_a_hand_written_tool_is_checked_against_its_schema() -> None:
    hand = Hand()
    assert check_arguments(hand, {"mode": "fast", "count": 2, "tags": ["a"], "note": None}) is None
    problem = check_arguments(hand, {"mode": "warp", "count": True, "tags": ["a", 1], "x": 0})
    assert problem is not None
    assert "arguments.mode: must be one of ['fast', 'slow']" in problem
    assert "arguments.count: expected integer (got True)" in problem
    assert "arguments.tags[1]: expected string (got 1)" in problem
    assert "arguments.x: not a parameter of this tool" in problem
    assert check_arguments(hand, {}) == "arguments.mode: required, but missing"
    assert check_arguments(hand, {"mode": "slow", "count": 2.0}) is None  # 2.0 is an integer
