"""Review probes: the encoders' delta fast path against their general path, over hostile
texts, ids and malformed event orders, byte for byte on the whole SSE stream."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import InvalidMessagesError
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    InputJsonDelta,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Origin, ToolUsePart
from llm_worker.ui._agui import AGUIEncoder
from llm_worker.ui._encoder import BlockEncoder, sse
from llm_worker.ui._errors import GENERIC_ERROR
from llm_worker.ui._parts import (  # pyright: ignore[reportPrivateUsage]
    _hidden,  # pyright: ignore[reportPrivateUsage]
    _serialised,  # pyright: ignore[reportPrivateUsage]
    opaque,
)
from llm_worker.ui._vercel import VercelEncoder

ORIGIN = Origin("anthropic", "claude")
HOSTILE = [
    "",
    '"',
    "\\",
    "\x00",
    "\x1f\x7f",
    "\u2028\u2029",
    "</script><script>alert(1)</script>",
    "\U0001f600\U0001f4a9",
    "é" * 47,
    "a" * 47,
    "a" * 48,
    "x" * 100_000,
    '\\"\n\r\t\b\f',
]
# Ids a provider may send for a tool call: quotes, backslashes, unicode, line breaks.
IDS = ['call"1', "call\\2", "call\n3", "调用_4", "</script>", ""]


class _VercelGeneral(VercelEncoder):
    """The same encoder with its fast path off: every event through `encode`."""

    _FAST_PATH = False

    def fast_delta(self, event: BlockDelta) -> str | None:
        return None


class _AGUIGeneral(AGUIEncoder):
    _FAST_PATH = False

    def fast_delta(self, event: BlockDelta) -> str | None:
        return None


def _pair(protocol: str) -> tuple[BlockEncoder, BlockEncoder]:
    if protocol == "vercel":
        fast, general = VercelEncoder("m1", ORIGIN), _VercelGeneral("m1", ORIGIN)
    else:
        fast, general = AGUIEncoder("t1", "r1", ORIGIN), _AGUIGeneral("t1", "r1", ORIGIN)
    # The protocol ids hold a random token: the same one on both sides.
    general._token = fast._token  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    return fast, general


_KINDS = [BlockType.TEXT, BlockType.THINKING, BlockType.TOOL_USE]
_TEXTS = st.one_of(st.sampled_from(HOSTILE[:-2]), st.text(max_size=60))


def _start(index: int, kind: BlockType, call_id: str) -> BlockStart:
    if kind is BlockType.TEXT:
        return BlockStart(index, kind, TextMetadata())
    if kind is BlockType.THINKING:
        return BlockStart(index, kind, ThinkingMetadata())
    return BlockStart(index, kind, ToolUseMetadata(call_id, "weather"))


_INDEX = st.integers(0, 2)
_EVENT = st.one_of(
    st.builds(_start, _INDEX, st.sampled_from(_KINDS), st.sampled_from(IDS)),
    st.builds(BlockDelta, _INDEX, st.builds(TextDelta, _TEXTS)),
    st.builds(BlockDelta, _INDEX, st.builds(ThinkingDelta, _TEXTS)),
    st.builds(BlockDelta, _INDEX, st.builds(InputJsonDelta, st.sampled_from(['{"a', '":1}', ""]))),
    st.builds(BlockDelta, _INDEX, st.builds(SignatureDelta, st.sampled_from(["sig", 'q"']))),
    st.builds(BlockStop, _INDEX, st.sampled_from(_KINDS)),
    st.builds(BlockAbort, _INDEX, st.sampled_from(_KINDS), st.just("cut")),
    st.just(StatusEvent(ResponseStatus.STARTED)),
    st.just(StatusEvent(ResponseStatus.COMPLETED, model="m")),
    st.just(UsageEvent(output_tokens=3)),
)


async def _lines(encoder: BlockEncoder, events: list[object]) -> list[str]:
    async def source() -> AsyncIterator[object]:
        for event in events:
            yield event

    with anyio.fail_after(10):
        return [line async for line in encoder.sse_stream(source())]


@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
@settings(max_examples=300, deadline=None)
@given(events=st.lists(_EVENT, max_size=25))
def test_fast_path_stream_equals_the_general_stream_for_any_event_order(
    protocol: str, events: list[object]
) -> None:
    # Deltas before their start, stops twice, unknown indexes, a text and a reasoning block
    # alternating, parallel tool calls with hostile ids: the same bytes either way.
    fast, general = _pair(protocol)
    fast_lines = anyio.run(_lines, fast, events)
    general_lines = anyio.run(_lines, general, events)
    assert fast_lines == general_lines


_BLOCKS = st.lists(
    st.tuples(st.sampled_from(_KINDS), st.sampled_from(IDS), st.lists(_TEXTS, max_size=4)),
    min_size=1,
    max_size=4,
)


def _interleaved(blocks: list[tuple[BlockType, str, list[str]]]) -> list[object]:
    """One request whose blocks all start, stream their deltas in turn, then stop."""
    events: list[object] = [StatusEvent(ResponseStatus.STARTED)]
    events += [_start(i, kind, f"{call_id}{i}") for i, (kind, call_id, _) in enumerate(blocks)]
    for n in range(max(len(texts) for _, _, texts in blocks)):
        for i, (kind, _, texts) in enumerate(blocks):
            if n < len(texts):
                delta = {
                    BlockType.TEXT: TextDelta,
                    BlockType.THINKING: ThinkingDelta,
                    BlockType.TOOL_USE: InputJsonDelta,
                }[kind](texts[n])
                events.append(BlockDelta(i, delta))
    events += [BlockStop(i, kind) for i, (kind, _, _) in enumerate(blocks)]
    return [*events, UsageEvent(output_tokens=2), StatusEvent(ResponseStatus.COMPLETED)]


@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
@settings(max_examples=200, deadline=None)
@given(blocks=_BLOCKS)
def test_interleaved_blocks_stream_the_same_bytes_on_both_paths(
    protocol: str, blocks: list[tuple[BlockType, str, list[str]]]
) -> None:
    # Text and reasoning alternating with parallel tool calls: the layout at the step's end
    # (AG-UI) holds each text's length, which only the fast path's count gives.
    fast, general = _pair(protocol)
    events = _interleaved(blocks)
    assert anyio.run(_lines, fast, events) == anyio.run(_lines, general, events)


@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
@pytest.mark.parametrize("kind", [BlockType.TEXT, BlockType.THINKING])
@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_delta_is_written_as_orjson_writes_it(
    protocol: str, kind: BlockType, text: str
) -> None:
    fast, _ = _pair(protocol)
    fast.encode(StatusEvent(ResponseStatus.STARTED))
    meta = TextMetadata() if kind is BlockType.TEXT else ThinkingMetadata()
    first = fast.encode(BlockStart(0, kind, meta))[-1]
    delta = TextDelta(text) if kind is BlockType.TEXT else ThinkingDelta(text)
    line = fast.fast_delta(BlockDelta(0, delta))
    if protocol == "ag-ui" and not text:
        assert line is None
        return
    kinds = {
        ("vercel", BlockType.TEXT): "text-delta",
        ("vercel", BlockType.THINKING): "reasoning-delta",
        ("ag-ui", BlockType.TEXT): "TEXT_MESSAGE_CONTENT",
        ("ag-ui", BlockType.THINKING): "REASONING_MESSAGE_CONTENT",
    }
    field = "id" if protocol == "vercel" else "messageId"
    assert line == sse({"type": kinds[protocol, kind], field: first[field], "delta": text})


Make = Callable[[], BlockEncoder]


@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
@pytest.mark.parametrize("text", ["\ud800", "a\udfff\U0001f600"])
def test_a_lone_surrogate_fails_alike_on_both_paths(protocol: str, text: str) -> None:
    # Not valid UTF-8 (a provider's JSON parser refuses it first); only a hook could send it.
    fast, general = _pair(protocol)
    events: list[Any] = [
        StatusEvent(ResponseStatus.STARTED),
        BlockStart(0, BlockType.TEXT, TextMetadata()),
        BlockDelta(0, TextDelta(text)),
        BlockStop(0, BlockType.TEXT),
    ]
    fast_lines = anyio.run(_lines, fast, events)
    assert fast_lines == anyio.run(_lines, general, events)
    assert any('"type":"error"' in line or "RUN_ERROR" in line for line in fast_lines)


def _cyclic() -> dict[str, Any]:
    loop: dict[str, Any] = {"city": "Kyoto"}
    loop["self"] = [loop]
    return loop


def test_opaque_of_a_call_whose_input_holds_a_cycle_raises_a_typed_error() -> None:
    # A hook may hand the history such an input; reading a part's opaque data looped forever
    # on a cycle, and the general path raised a bare ValueError.
    part = ToolUsePart("call_1", "weather", _cyclic(), signature="sig")
    # In a daemon thread, bounded: a regression fails here instead of hanging the suite.
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(opaque(part))
        except InvalidMessagesError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], InvalidMessagesError)


def test_opaque_of_a_call_reusing_one_json_value_twice_reads_it() -> None:
    shared = {"city": "Kyoto"}
    part = ToolUsePart("call_1", "weather", {"a": shared, "b": [shared]}, signature="sig")
    assert _hidden(part) == _serialised(part) == {"signature": "sig"}


async def _failing() -> AsyncIterator[object]:
    yield StatusEvent(ResponseStatus.STARTED)
    yield BlockStart(0, BlockType.TEXT, TextMetadata())
    yield BlockDelta(0, TextDelta("half an ans"))
    raise OSError("disk gone")


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
@pytest.mark.parametrize("bad", [42, None, "lone \ud800 surrogate"])
async def test_an_on_error_giving_no_sendable_text_still_ends_the_stream(
    protocol: str, bad: object
) -> None:
    # Not a str, or a str no UTF-8 can carry: the stream raised out of its error handler, so
    # the client got neither an error nor an end.
    fast, _ = _pair(protocol)
    with anyio.fail_after(10):
        lines = [line async for line in fast.sse_stream(_failing(), lambda exc: bad)]  # pyright: ignore[reportArgumentType]
    if protocol == "vercel":
        assert lines[-1] == "data: [DONE]\n\n"
        chunks = [orjson.loads(line[6:]) for line in lines[:-1]]
        assert chunks[-2:] == [
            {"type": "error", "errorText": GENERIC_ERROR},
            {"type": "finish", "finishReason": "error"},
        ]
    else:
        last = orjson.loads(lines[-1][6:])
        assert last == {"type": "RUN_ERROR", "message": GENERIC_ERROR, "code": "RunError"}
