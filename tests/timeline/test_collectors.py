"""TextBlockCollector, ToolCallCollector and ToolCall parsing."""

from __future__ import annotations

import json
import threading

import anyio
import pytest

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    Event,
    InputJsonDelta,
    StopReason,
    TextBlockCollector,
    TextDelta,
    TextMetadata,
    Timeline,
    ToolCall,
    ToolCallCollector,
    ToolResultMetadata,
    ToolUseMetadata,
    collectors,
)
from llm_worker._json import json_type
from llm_worker.collectors import parse_tool_call
from llm_worker.providers import _blocks


def text_block(index: int, *pieces: str) -> list[Event]:
    return [
        BlockStart(index, BlockType.TEXT, TextMetadata()),
        *(BlockDelta(index, TextDelta(p)) for p in pieces),
        BlockStop(index, BlockType.TEXT),
    ]


def tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[Event]:
    return [
        BlockStart(index, BlockType.TOOL_USE, ToolUseMetadata(call_id, name)),
        *(BlockDelta(index, InputJsonDelta(p)) for p in pieces),
        BlockStop(index, BlockType.TOOL_USE, StopReason.TOOL_USE),
    ]


def run(events: list[Event]) -> tuple[Timeline, TextBlockCollector, ToolCallCollector]:
    timeline = Timeline()
    texts, calls = TextBlockCollector(), ToolCallCollector()
    timeline.on_text_block(texts)
    timeline.on_tool_use_block(calls)
    for event in events:
        timeline.dispatch(event)
    return timeline, texts, calls


# -- ToolCall and parse_tool_call -----------------------------------------------------------


def test_tool_call_shape() -> None:
    call = ToolCall("c1", "f", {"a": 1})
    assert (call.id, call.name, call.input, call.raw_input, call.error) == (
        "c1",
        "f",
        {"a": 1},
        "",
        None,
    )
    assert call.valid
    assert not ToolCall("c", "f", {}, error="bad").valid
    with pytest.raises(TypeError):
        ToolCall("c", "f", {}, "raw")  # type: ignore[misc]  # raw_input is keyword-only


@pytest.mark.parametrize("raw", ["", " ", "\n\t "])
def test_empty_arguments_are_an_empty_object(raw: str) -> None:
    call = parse_tool_call("c", "f", raw)
    assert call.input == {}
    assert call.valid
    assert call.raw_input == raw


def test_valid_arguments_are_parsed_and_the_text_kept() -> None:
    raw = '{"city": "Zürich", "days": [1, 2], "deep": {"x": null}}'
    call = parse_tool_call("c", "f", raw)
    assert call.input == json.loads(raw)
    assert call.raw_input == raw
    assert call.valid


def test_integers_beyond_64_bits_are_valid_json() -> None:
    call = parse_tool_call("c", "f", '{"n": 123456789012345678901234567890}')
    assert call.input == {"n": 123456789012345678901234567890}
    assert call.valid


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"city": "Par', "not valid JSON"),
        ('{"a": 1,}', "not valid JSON"),
        ("{'a': 1}", "not valid JSON"),
        ('{"a": NaN}', "not valid JSON"),
        ("[" * 100_000, "not valid JSON"),
        ("[1, 2]", "must be a JSON object, not an array"),
        ('"text"', "must be a JSON object, not a string"),
        ("3.5", "must be a JSON object, not a number"),
        ("true", "must be a JSON object, not a boolean"),
        ("null", "must be a JSON object, not null"),
    ],
)
def test_invalid_arguments_give_an_invalid_call_not_an_exception(raw: str, says: str) -> None:
    call = parse_tool_call("c", "get_weather", raw)
    assert not call.valid
    assert call.input == {}
    assert call.raw_input == raw
    assert call.error is not None
    assert says in call.error
    assert "'get_weather'" in call.error


@pytest.mark.parametrize(
    ("raw", "value"), [("[1]", [1]), ('"t"', "t"), ("3.5", 3.5), ("true", True), ("null", None)]
)
def test_the_parser_and_the_stream_mappers_name_a_json_type_alike(raw: str, value: object) -> None:
    # One helper of the model layer names the type for both layers (they may not import each
    # other): a call's arguments and a provider's wrongly typed field read the same words.
    assert collectors.json_type is _blocks.json_type is json_type
    named = json_type(value)
    call = parse_tool_call("c", "f", raw)
    assert call.error is not None
    assert f"must be a JSON object, not {named}: " in call.error
    assert f"`delta.text` is {named}, expected a string" in str(
        _blocks.wrong_type("content_block_delta", "delta.text", value)
    )


def test_the_error_locates_the_mistake() -> None:
    call = parse_tool_call("c", "f", '{"a": 1\n "b": 2}')
    assert call.error is not None
    assert "line 2 column 2" in call.error
    assert '\'{"a": 1\\n "b": 2}\'' in call.error  # the text, quoted


def test_the_error_quotes_a_bounded_part_of_huge_arguments() -> None:
    raw = '{"data": "' + "x" * 100_000
    call = parse_tool_call("c", "f", raw)
    assert call.error is not None
    assert len(call.error) < 500
    assert "100010 characters in all" in call.error
    assert call.raw_input == raw


# -- TextBlockCollector ---------------------------------------------------------------------


def test_text_collector_collects_one_text_per_stopped_block() -> None:
    _, texts, _ = run([*text_block(0, "Hel", "lo"), *text_block(1), *text_block(2, "again")])
    assert texts.collected() == ["Hello", "", "again"]
    assert texts.has_content()


def test_text_collector_take_collected_empties_it() -> None:
    _, texts, _ = run(text_block(0, "a"))
    assert texts.take_collected() == ["a"]
    assert texts.take_collected() == []
    assert not texts.has_content()


def test_text_collector_collected_is_a_copy() -> None:
    _, texts, _ = run(text_block(0, "a"))
    texts.collected().append("mutated")
    assert texts.collected() == ["a"]


def test_has_content_is_false_for_empty_texts_only() -> None:
    _, texts, _ = run(text_block(0))
    assert texts.collected() == [""]
    assert not texts.has_content()


def test_text_collector_clear() -> None:
    _, texts, _ = run(text_block(0, "a"))
    texts.clear()
    assert texts.collected() == []


def test_an_aborted_block_is_not_collected() -> None:
    events: list[Event] = [
        BlockStart(0, BlockType.TEXT, TextMetadata()),
        BlockDelta(0, TextDelta("half")),
        BlockAbort(0, BlockType.TEXT, "connection reset"),
        *text_block(1, "whole"),
        BlockStart(2, BlockType.TEXT, TextMetadata()),
        BlockDelta(2, TextDelta("cut")),
    ]
    timeline, texts, _ = run(events)
    timeline.abort_current_block("cancelled")
    assert texts.collected() == ["whole"]


def test_text_collector_collects_implicit_and_tool_result_blocks() -> None:
    events: list[Event] = [
        BlockDelta(0, TextDelta("no start")),
        BlockStop(0, BlockType.TEXT),
        BlockStart(1, BlockType.TOOL_RESULT, ToolResultMetadata("c")),
        BlockDelta(1, TextDelta("result")),
        BlockStop(1, BlockType.TOOL_RESULT),
    ]
    _, texts, _ = run(events)
    assert texts.collected() == ["no start", "result"]


def test_a_clone_shares_the_storage() -> None:
    texts = TextBlockCollector()
    clone = texts.clone()
    timeline = Timeline()
    timeline.on_text_block(clone)
    for event in text_block(0, "shared"):
        timeline.dispatch(event)
    assert texts.collected() == ["shared"]
    assert texts.take_collected() == ["shared"]
    assert clone.collected() == []


# -- ToolCallCollector ----------------------------------------------------------------------


def test_tool_call_collector_parses_each_call() -> None:
    events = [
        *tool_block(0, "call_1", "get_weather", '{"ci', 'ty": "Oslo"}'),
        *tool_block(1, "call_2", "now"),
    ]
    _, _, calls = run(events)
    assert calls.has_pending_calls()
    assert calls.collected() == [
        ToolCall("call_1", "get_weather", {"city": "Oslo"}, raw_input='{"city": "Oslo"}'),
        ToolCall("call_2", "now", {}),
    ]
    assert calls.take_collected()[0].id == "call_1"
    assert not calls.has_pending_calls()
    assert calls.take_collected() == []


def test_tool_call_collector_never_raises_on_bad_arguments() -> None:
    _, _, calls = run(tool_block(0, "c", "f", '{"a": ', "oops"))
    (call,) = calls.collected()
    assert not call.valid
    assert call.raw_input == '{"a": oops'
    assert call.error is not None


def test_tool_call_collector_drops_aborted_calls_and_clear_works() -> None:
    events: list[Event] = [
        BlockStart(0, BlockType.TOOL_USE, ToolUseMetadata("c0", "f")),
        BlockDelta(0, InputJsonDelta('{"a"')),
        BlockAbort(0, BlockType.TOOL_USE, "reset"),
        *tool_block(1, "c1", "g", "{}"),
    ]
    _, _, calls = run(events)
    assert [c.id for c in calls.collected()] == ["c1"]
    calls.clear()
    assert not calls.has_pending_calls()


def test_tool_call_collector_clone_shares_the_storage() -> None:
    calls = ToolCallCollector()
    timeline = Timeline()
    timeline.on_tool_use_block(calls.clone())
    for event in tool_block(0, "c", "f", '{"x": 1}'):
        timeline.dispatch(event)
    assert calls.take_collected() == [ToolCall("c", "f", {"x": 1}, raw_input='{"x": 1}')]


def test_a_collector_registered_mid_call_still_gets_the_id_and_name() -> None:
    timeline = Timeline()
    timeline.dispatch(BlockStart(0, BlockType.TOOL_USE, ToolUseMetadata("c9", "late")))
    calls = ToolCallCollector()
    timeline.on_tool_use_block(calls)
    timeline.dispatch(BlockDelta(0, InputJsonDelta("{}")))
    timeline.dispatch(BlockStop(0, BlockType.TOOL_USE))
    assert calls.collected() == [ToolCall("c9", "late", {}, raw_input="{}")]


# -- reading from another thread while dispatching ------------------------------------------


@pytest.mark.anyio
async def test_collectors_can_be_read_from_another_thread_while_dispatching() -> None:
    texts = TextBlockCollector()
    timeline = Timeline()
    timeline.on_text_block(texts)
    blocks = 2000
    taken: list[str] = []
    done = threading.Event()

    def reader() -> None:
        # take_collected is atomic: every text is taken exactly once, none is lost.
        while not done.is_set():
            taken.extend(texts.take_collected())
        taken.extend(texts.take_collected())

    with anyio.fail_after(20):
        thread = threading.Thread(target=reader)
        thread.start()
        try:
            for index in range(blocks):
                for event in text_block(index, str(index)):
                    timeline.dispatch(event)
        finally:
            done.set()
            await anyio.to_thread.run_sync(thread.join)
    assert taken == [str(i) for i in range(blocks)]
