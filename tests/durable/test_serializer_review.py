"""Review probes: hostile rows given to the JSON serializer are typed errors; nothing runs."""

from __future__ import annotations

import json

import pytest

from llm_worker.durable import RecordError
from llm_worker.durable._errors import RecordedError
from llm_worker.durable._serializer import JsonSerializer


@pytest.mark.parametrize("bracket", ["[", '{"a":'])
def test_a_row_nested_past_the_parsers_depth_is_a_record_error(bracket: str) -> None:
    closing = "]" if bracket == "[" else "}"
    text = '{"json": ' + bracket * 200_000 + "1" + closing * 200_000 + "}"
    with pytest.raises(RecordError, match="nested too deep"):
        JsonSerializer().deserialize(text)


def test_a_forged_error_naming_a_builtin_with_hostile_args_is_inert() -> None:
    serializer = JsonSerializer()
    forged = {"type": "builtins:ExceptionGroup", "args": ["x", [1]], "state": {}}
    rebuilt = serializer.deserialize(json.dumps({"error": forged}))
    assert isinstance(rebuilt, RecordedError)
    # A type outside llm-worker, DBOS and builtins is never looked up, let alone imported.
    forged = {"type": "os:system", "args": ["touch /tmp/x"], "state": {}, "message": "m"}
    assert isinstance(serializer.deserialize(json.dumps({"error": forged})), RecordedError)
    forged = {"type": "builtins:OSError", "args": {"a": 1}, "state": "not a dict"}
    assert type(serializer.deserialize(json.dumps({"error": forged}))) is OSError


def test_a_huge_row_reads_back_whole() -> None:
    serializer = JsonSerializer()
    value = {"text": "x" * 5_000_000}
    assert serializer.deserialize(serializer.serialize(value)) == value
