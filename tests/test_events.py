"""The event model: cheap slotted types, closed unions, usage snapshot and sum rules."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_worker import events
from llm_worker.events import (
    USAGE_FIELDS,
    BlockAbort,
    BlockDelta,
    BlockMetadata,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    Delta,
    ErrorEvent,
    Event,
    InputJsonDelta,
    PingEvent,
    ProviderMetadata,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
    ToolResultMetadata,
    ToolUseMetadata,
    UsageEvent,
)

EVENT_CLASSES: set[type] = {
    PingEvent,
    UsageEvent,
    StatusEvent,
    ErrorEvent,
    BlockStart,
    BlockDelta,
    BlockStop,
    BlockAbort,
}
DELTA_CLASSES: set[type] = {TextDelta, ThinkingDelta, InputJsonDelta, SignatureDelta, CitationDelta}
METADATA_CLASSES: set[type] = {
    TextMetadata,
    ThinkingMetadata,
    ToolUseMetadata,
    ToolResultMetadata,
    ProviderMetadata,
}


def test_the_unions_are_closed_over_the_documented_classes() -> None:
    assert set(typing.get_args(Event)) == EVENT_CLASSES
    assert set(typing.get_args(Delta)) == DELTA_CLASSES
    assert set(typing.get_args(BlockMetadata)) == METADATA_CLASSES


ALL_CLASSES = sorted(EVENT_CLASSES | DELTA_CLASSES | METADATA_CLASSES, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=[c.__name__ for c in ALL_CLASSES])
def test_hot_path_types_are_slotted_dataclasses(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" in vars(cls)
    assert "__dict__" not in dir(cls)


def test_every_public_name_is_exported() -> None:
    public = {n for n, v in vars(events).items() if not n.startswith("_") and n[0].isupper()}
    public -= {"Any", "TypeAlias", "StrEnum", "Citation", "Origin"}  # messages.py's
    assert public <= set(events.__all__)


def test_enum_values_are_the_wire_spellings() -> None:
    assert [s.value for s in ResponseStatus] == ["started", "completed", "cancelled", "failed"]
    assert [t.value for t in BlockType] == [
        "text",
        "thinking",
        "tool_use",
        "tool_result",
        "provider",
    ]
    assert {r.value for r in StopReason} >= {"end_turn", "max_tokens", "stop_sequence", "tool_use"}
    assert str(StopReason.END_TURN) == "end_turn"
    assert StopReason("tool_use") is StopReason.TOOL_USE


def test_defaults() -> None:
    assert BlockStop(0, BlockType.TEXT) == BlockStop(0, BlockType.TEXT, None, None)
    assert ThinkingMetadata() == ThinkingMetadata(redacted=None, item_id=None)
    assert ToolUseMetadata("c", "n").item_id is None
    assert PingEvent().timestamp is None
    assert UsageEvent() == UsageEvent(None, None, None, None, None, None)


def test_metadata_kinds_are_told_apart_by_match() -> None:
    def kind(metadata: BlockMetadata) -> str:
        match metadata:
            case TextMetadata():
                return "text"
            case ThinkingMetadata(redacted=str()):
                return "redacted"
            case ThinkingMetadata():
                return "thinking"
            case ToolUseMetadata(id=call_id):
                return call_id
            case ToolResultMetadata(tool_use_id=call_id):
                return "result:" + call_id
            case ProviderMetadata(data=data):
                return "provider:" + str(data["type"])
            case _:
                typing.assert_never(metadata)

    assert kind(TextMetadata()) == "text"
    assert kind(ThinkingMetadata(redacted="x")) == "redacted"
    assert kind(ThinkingMetadata()) == "thinking"
    assert kind(ToolUseMetadata("call_1", "f")) == "call_1"
    assert kind(ToolResultMetadata("call_1")) == "result:call_1"
    assert kind(ProviderMetadata({"type": "compaction"})) == "provider:compaction"


# --- usage -----------------------------------------------------------------------------------

counts = st.none() | st.integers(0, 10**9)
usages = st.builds(
    UsageEvent,
    input_tokens=counts,
    output_tokens=counts,
    total_tokens=counts,
    cache_read_input_tokens=counts,
    cache_creation_input_tokens=counts,
    reasoning_tokens=counts,
)
FIELDS = list(USAGE_FIELDS)  # the counters (not `path`, where the event came from)


def test_updated_overlays_the_known_fields_of_the_newer_snapshot() -> None:
    start = UsageEvent(input_tokens=100, output_tokens=1, cache_read_input_tokens=80)
    end = UsageEvent(output_tokens=42, total_tokens=142)
    assert start.updated(end) == UsageEvent(
        input_tokens=100, output_tokens=42, total_tokens=142, cache_read_input_tokens=80
    )
    assert start == UsageEvent(input_tokens=100, output_tokens=1, cache_read_input_tokens=80)


@given(older=usages, newer=usages)
def test_updated_keeps_the_latest_known_value_of_each_field(
    older: UsageEvent, newer: UsageEvent
) -> None:
    merged = older.updated(newer)
    for name in FIELDS:
        new, old = getattr(newer, name), getattr(older, name)
        assert getattr(merged, name) == (old if new is None else new)
    assert merged.updated(newer) == merged  # idempotent
    assert UsageEvent().updated(older) == older


def test_sum_adds_known_fields_and_keeps_unknown_ones_unknown() -> None:
    a = UsageEvent(input_tokens=10, output_tokens=5, reasoning_tokens=None)
    b = UsageEvent(input_tokens=1, output_tokens=None, cache_read_input_tokens=7)
    assert a + b == UsageEvent(input_tokens=11, output_tokens=5, cache_read_input_tokens=7)
    assert (a + b).reasoning_tokens is None


@given(a=usages, b=usages, c=usages)
def test_sum_is_commutative_associative_with_an_identity(
    a: UsageEvent, b: UsageEvent, c: UsageEvent
) -> None:
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert a + UsageEvent() == a
    total = a + b
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        expected = None if x is None and y is None else (x or 0) + (y or 0)
        assert getattr(total, name) == expected


def test_every_error_survives_pickling() -> None:
    import pickle

    from llm_worker import Aborted, HookError, LimitExceededError, OverloadedError

    for error in (
        HookError("m", hook="h", kind="before_tool_call"),
        LimitExceededError("m", limit="max_requests", value=3),
        OverloadedError("busy", status_code=529, retry_after=2.0, streamed=True),
        Aborted("no"),
    ):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error)
        assert str(again) == str(error)
        assert vars(again) == vars(error)
