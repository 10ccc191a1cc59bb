"""Hypothesis: arbitrary valid event sequences keep the Timeline's invariants.

A generated script is a list of blocks (any kind, explicit or implicit start, deltas with
meta events and signatures interleaved, ended by a stop, an abort event or
`abort_current_block`) with meta events between them. From the script the test computes
independently what every handler must see, then dispatches the rendered events and checks:

- each handler sees, for each block, start → deltas → stop/abort, with meta events in place;
- one scope per handler per block, never shared between blocks or handlers;
- every scope opened is closed;
- the collectors give the concatenation of each completed block's deltas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from test_timeline import Log, Recorder, plain

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    Event,
    InputJsonDelta,
    PingEvent,
    ProviderMetadata,
    SignatureDelta,
    StopReason,
    TextBlockAbort,
    TextBlockCollector,
    TextBlockStart,
    TextBlockStop,
    TextDelta,
    TextMetadata,
    ThinkingBlockAbort,
    ThinkingBlockStart,
    ThinkingBlockStop,
    ThinkingDelta,
    ThinkingMetadata,
    Timeline,
    ToolCallCollector,
    ToolResultMetadata,
    ToolUseBlockAbort,
    ToolUseBlockStart,
    ToolUseBlockStop,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.collectors import parse_tool_call

Ending = Literal["stop", "abort_event", "abort_call"]


@dataclass
class Block:
    block_type: BlockType
    explicit: bool
    items: list[Any]  # str (a delta), Event (meta or signature)
    ending: Ending

    @property
    def pieces(self) -> list[str]:
        return [item for item in self.items if isinstance(item, str)]


@dataclass
class AbortCall:
    """`timeline.abort_current_block(reason)` at this point of the script."""

    reason: str


META = st.one_of(
    st.builds(UsageEvent, input_tokens=st.integers(0, 10), output_tokens=st.integers(0, 10)),
    st.builds(PingEvent, st.floats(0, 10)),
)
TEXT = st.text(max_size=5)


@st.composite
def json_pieces(draw: st.DrawFn) -> list[str]:
    """A JSON object's text (or, sometimes, broken JSON) cut at arbitrary points."""
    value = draw(st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3)))
    text = json.dumps(value)
    if draw(st.booleans()) and len(text) > 1:
        text = text[:-1]  # cut short: invalid arguments
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


@st.composite
def blocks(draw: st.DrawFn) -> Block:
    block_type = draw(st.sampled_from(list(BlockType)))
    if block_type is BlockType.PROVIDER:
        # Whole in its start, no deltas; meta events may still come before its stop.
        ending: Ending = draw(st.sampled_from(["stop", "abort_event", "abort_call"]))
        return Block(block_type, True, draw(st.lists(META, max_size=2)), ending)
    pieces = draw(json_pieces()) if block_type is BlockType.TOOL_USE else draw(st.lists(TEXT))
    # A block with no start exists only from its first delta on; TOOL_RESULT always starts.
    explicit = block_type is BlockType.TOOL_RESULT or not pieces or draw(st.booleans())
    items: list[Any] = []
    for piece in pieces:
        items.extend(draw(st.lists(META | st.builds(SignatureDelta, TEXT), max_size=2)))
        items.append(piece)
    ending = draw(st.sampled_from(["stop", "abort_event", "abort_call"]))
    return Block(block_type, explicit, items, ending)


SCRIPTS = st.lists(st.one_of(blocks(), META), max_size=8)


def _delta(block_type: BlockType, index: int, piece: str) -> BlockDelta:
    if block_type is BlockType.TOOL_USE:
        return BlockDelta(index, InputJsonDelta(piece))
    if block_type is BlockType.THINKING:
        return BlockDelta(index, ThinkingDelta(piece))
    return BlockDelta(index, TextDelta(piece))


def _metadata(block_type: BlockType, index: int) -> Any:
    return {
        BlockType.TEXT: TextMetadata(),
        BlockType.THINKING: ThinkingMetadata(),
        BlockType.TOOL_USE: ToolUseMetadata(f"call_{index}", f"tool_{index}"),
        BlockType.TOOL_RESULT: ToolResultMetadata(f"call_{index - 1}"),
        BlockType.PROVIDER: ProviderMetadata({"type": "server_tool_use", "id": f"srv_{index}"}),
    }[block_type]


def render(script: list[Any]) -> list[Event | AbortCall]:
    """The event stream of a script (with abort_current_block calls in place)."""
    out: list[Event | AbortCall] = []
    index = 0
    for item in script:
        if not isinstance(item, Block):
            out.append(item)
            continue
        if item.explicit:
            out.append(BlockStart(index, item.block_type, _metadata(item.block_type, index)))
        for part in item.items:
            if isinstance(part, str):
                out.append(_delta(item.block_type, index, part))
            elif isinstance(part, SignatureDelta):
                out.append(BlockDelta(index, part))
            else:
                out.append(part)
        if item.ending == "stop":
            out.append(BlockStop(index, item.block_type, StopReason.END_TURN, "end_turn"))
        elif item.ending == "abort_event":
            out.append(BlockAbort(index, item.block_type, "reset"))
        else:
            out.append(AbortCall("cancelled"))
        index += 1
    return out


def expected_view(script: list[Any], kinds: set[str], meta: bool) -> list[object]:
    """What a handler registered for `kinds` (and meta events if `meta`) must see, in order."""
    out: list[object] = []
    index = 0
    for item in script:
        if not isinstance(item, Block):
            if meta:
                out.append(item)
            continue
        group = "text" if item.block_type is BlockType.TOOL_RESULT else item.block_type.value
        mine = group in kinds
        started = False
        for part in [None, *item.items]:
            # An explicit block starts before its items; an implicit one at its first delta.
            if mine and not started and (item.explicit or isinstance(part, str)):
                out.append(_start(item, index))
                started = True
            if part is None:
                continue
            if isinstance(part, str):
                if mine:
                    out.append(_delta(item.block_type, index, part).delta)
            elif not isinstance(part, SignatureDelta) and meta:
                out.append(part)
        if mine:
            out.append(_end(item, index))
        index += 1
    return out


def _start(block: Block, index: int) -> object:
    if block.block_type is BlockType.TOOL_USE:
        if block.explicit:
            return ToolUseBlockStart(index, f"call_{index}", f"tool_{index}")
        return ToolUseBlockStart(index, "", "")
    if block.block_type is BlockType.THINKING:
        return ThinkingBlockStart(index)
    if block.block_type is BlockType.TOOL_RESULT:
        return TextBlockStart(index, f"call_{index - 1}")
    return TextBlockStart(index)


def _end(block: Block, index: int) -> object:
    reason = "reset" if block.ending == "abort_event" else "cancelled"
    stopped = block.ending == "stop"
    if block.block_type is BlockType.TOOL_USE:
        call_id, name = (f"call_{index}", f"tool_{index}") if block.explicit else ("", "")
        if stopped:
            return ToolUseBlockStop(index, call_id, name, StopReason.END_TURN, "end_turn")
        return ToolUseBlockAbort(index, call_id, name, reason)
    if block.block_type is BlockType.THINKING:
        if stopped:
            return ThinkingBlockStop(index, StopReason.END_TURN, "end_turn")
        return ThinkingBlockAbort(index, reason)
    if stopped:
        return TextBlockStop(index, StopReason.END_TURN, "end_turn")
    return TextBlockAbort(index, reason)


ALL_BLOCKS = {"text", "thinking", "tool_use"}
ENDS = (
    TextBlockStop,
    TextBlockAbort,
    ThinkingBlockStop,
    ThinkingBlockAbort,
    ToolUseBlockStop,
    ToolUseBlockAbort,
)


def setup(log: Log) -> tuple[Timeline, TextBlockCollector, ToolCallCollector]:
    timeline = Timeline()
    everything = Recorder("all", log)
    everything_plain = plain("plain", log)
    for register in (
        timeline.on_text_block,
        timeline.on_thinking_block,
        timeline.on_tool_use_block,
        timeline.on_usage,
        timeline.on_ping,
    ):
        register(everything)
        register(everything_plain)
    timeline.on_text_block(Recorder("text2", log))
    texts, calls = TextBlockCollector(), ToolCallCollector()
    timeline.on_text_block(texts)
    timeline.on_tool_use_block(calls)
    return timeline, texts, calls


def play(timeline: Timeline, events: list[Event | AbortCall]) -> None:
    for event in events:
        if isinstance(event, AbortCall):
            timeline.abort_current_block(event.reason)
        else:
            timeline.dispatch(event)


@settings(max_examples=150, deadline=None)
@given(SCRIPTS)
def test_every_handler_sees_each_block_in_order_with_meta_events_in_place(
    script: list[Any],
) -> None:
    log = Log()
    timeline, _, _ = setup(log)
    play(timeline, render(script))
    assert log.of("all") == expected_view(script, ALL_BLOCKS, meta=True)
    assert log.of("plain") == expected_view(script, ALL_BLOCKS, meta=True)
    assert log.of("text2") == expected_view(script, {"text"}, meta=False)
    assert timeline.current_block is None


@settings(max_examples=150, deadline=None)
@given(SCRIPTS)
def test_scopes_are_per_block_per_handler_and_all_closed(script: list[Any]) -> None:
    log = Log()
    timeline, _, _ = setup(log)
    meta_scopes = {scope.serial for scope in log.scopes}  # made at registration
    play(timeline, render(script))
    block_scopes = [scope for scope in log.scopes if scope.serial not in meta_scopes]
    # Each block scope saw exactly one block: a start first, an end last, nothing else.
    for scope in block_scopes:
        assert isinstance(scope.events[0], (TextBlockStart, ThinkingBlockStart, ToolUseBlockStart))
        assert isinstance(scope.events[-1], ENDS)
        assert not any(isinstance(e, ENDS) for e in scope.events[:-1])
    # One scope per handler per block, used by that handler only.
    for name in ("all", "text2"):
        ends = sum(isinstance(e, ENDS) for e in log.of(name))
        mine = [s for s in block_scopes if s.owner == name]
        assert len(mine) == ends
        assert {s.serial for s in mine} == {
            serial for who, serial, e in log.calls if who == name and serial not in meta_scopes
        }
    assert len({id(s) for s in log.scopes}) == len(log.scopes)


@settings(max_examples=150, deadline=None)
@given(SCRIPTS)
def test_collectors_give_the_deltas_of_each_completed_block(script: list[Any]) -> None:
    timeline, texts, calls = setup(Log())
    play(timeline, render(script))
    expected_texts: list[str] = []
    expected_calls: list[Any] = []
    index = -1
    for item in script:
        if not isinstance(item, Block):
            continue
        index += 1
        if item.ending != "stop":
            continue  # aborted blocks are never collected
        joined = "".join(item.pieces)
        if item.block_type is BlockType.TOOL_USE:
            call_id, name = (f"call_{index}", f"tool_{index}") if item.explicit else ("", "")
            expected_calls.append(parse_tool_call(call_id, name, joined))
        elif item.block_type in (BlockType.TEXT, BlockType.TOOL_RESULT):
            expected_texts.append(joined)
    assert texts.take_collected() == expected_texts
    got = calls.take_collected()
    assert got == expected_calls
    for call in got:
        if call.valid:
            assert call.input == json.loads(call.raw_input or "{}")
