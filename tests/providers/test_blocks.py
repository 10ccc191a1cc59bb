"""BlockEmitter's block rules, and drive(): status, failure order, scrubbing, closing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import orjson
import pytest

from llm_worker.errors import (
    AuthenticationError,
    MalformedStreamError,
    OverloadedError,
    ProviderError,
    StreamInterruptedError,
)
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    Event,
    InputJsonDelta,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.providers._blocks import BlockEmitter, StreamMapper, drive

TEXT, THINKING, TOOL = BlockType.TEXT, BlockType.THINKING, BlockType.TOOL_USE

# --- BlockEmitter ----------------------------------------------------------------------------


def test_a_delta_with_no_open_block_starts_one() -> None:
    emitter = BlockEmitter()
    emitter.text("Hel")
    emitter.text("lo")
    assert emitter.out == [
        BlockStart(0, TEXT, TextMetadata()),
        BlockDelta(0, TextDelta("Hel")),
        BlockDelta(0, TextDelta("lo")),
    ]
    assert emitter.open_type is TEXT
    assert emitter.index == 0


def test_a_delta_of_another_kind_closes_the_open_block() -> None:
    emitter = BlockEmitter()
    emitter.thinking("hmm")
    emitter.text("answer")
    emitter.thinking("again")
    assert emitter.out == [
        BlockStart(0, THINKING, ThinkingMetadata()),
        BlockDelta(0, ThinkingDelta("hmm")),
        BlockStop(0, THINKING),
        BlockStart(1, TEXT, TextMetadata()),
        BlockDelta(1, TextDelta("answer")),
        BlockStop(1, TEXT),
        BlockStart(2, THINKING, ThinkingMetadata()),
        BlockDelta(2, ThinkingDelta("again")),
    ]


def test_each_tool_use_is_a_new_block_and_indexes_count_up() -> None:
    emitter = BlockEmitter()
    assert emitter.index == -1
    assert emitter.tool_use("call_1", "a") == 0
    emitter.input_json('{"x":')
    emitter.input_json("1}")
    assert emitter.tool_use("call_2", "b", item_id="fc_2") == 1
    assert emitter.out == [
        BlockStart(0, TOOL, ToolUseMetadata("call_1", "a")),
        BlockDelta(0, InputJsonDelta('{"x":')),
        BlockDelta(0, InputJsonDelta("1}")),
        BlockStop(0, TOOL),
        BlockStart(1, TOOL, ToolUseMetadata("call_2", "b", "fc_2")),
    ]


def test_at_most_one_block_is_open() -> None:
    emitter = BlockEmitter()
    emitter.start(TEXT, TextMetadata())
    emitter.start(THINKING, ThinkingMetadata(redacted="xyz"))
    emitter.text("t")
    opened: list[int] = []
    for event in emitter.out:
        if isinstance(event, BlockStart):
            assert not opened, "a block started while another was open"
            opened.append(event.index)
        elif isinstance(event, BlockStop | BlockAbort):
            assert opened == [event.index]
            opened.clear()
    assert [type(e).__name__ for e in emitter.out] == [
        "BlockStart",
        "BlockStop",
        "BlockStart",
        "BlockStop",
        "BlockStart",
        "BlockDelta",
    ]


def test_input_json_outside_a_tool_call_is_malformed() -> None:
    emitter = BlockEmitter()
    with pytest.raises(MalformedStreamError, match="outside a tool call"):
        emitter.input_json("{}")
    emitter.text("x")
    with pytest.raises(MalformedStreamError):
        emitter.input_json("{}")


def test_signature_goes_to_the_open_block_and_needs_one() -> None:
    emitter = BlockEmitter()
    with pytest.raises(MalformedStreamError, match="outside any block"):
        emitter.signature("sig")
    emitter.thinking("t")
    emitter.signature("sig")
    assert emitter.out[-1] == BlockDelta(0, SignatureDelta("sig"))


def test_the_last_stop_is_held_and_gets_the_reason() -> None:
    emitter = BlockEmitter()
    emitter.thinking("t")
    emitter.text("a")
    emitter.stop()  # explicit stop: held, not emitted yet
    assert emitter.out[-1] == BlockDelta(1, TextDelta("a"))
    assert emitter.open_type is None
    emitter.finish(StopReason.END_TURN, "end_turn")
    assert emitter.out[-1] == BlockStop(1, TEXT, StopReason.END_TURN, "end_turn")
    stops = [e for e in emitter.out if isinstance(e, BlockStop)]
    assert [s.stop_reason for s in stops] == [None, StopReason.END_TURN]


def test_finish_closes_the_open_block_with_the_reason() -> None:
    emitter = BlockEmitter()
    emitter.tool_use("c", "n")
    emitter.finish(StopReason.TOOL_USE, "tool_calls")
    assert emitter.out[-1] == BlockStop(0, TOOL, StopReason.TOOL_USE, "tool_calls")
    assert emitter.open_type is None


def test_stop_without_open_block_does_nothing() -> None:
    emitter = BlockEmitter()
    emitter.stop()
    emitter.text("a")
    emitter.stop()
    emitter.stop()
    assert emitter.out == [BlockStart(0, TEXT, TextMetadata()), BlockDelta(0, TextDelta("a"))]


def test_an_empty_answer_gets_an_empty_text_block_carrying_the_reason() -> None:
    emitter = BlockEmitter()
    emitter.finish(StopReason.MAX_TOKENS, "length")
    assert emitter.out == [
        BlockStart(0, TEXT, TextMetadata()),
        BlockStop(0, TEXT, StopReason.MAX_TOKENS, "length"),
    ]


def test_abort_releases_a_held_stop() -> None:
    emitter = BlockEmitter()
    emitter.text("a")
    emitter.stop()
    emitter.abort("boom")
    assert emitter.out[-1] == BlockStop(0, TEXT)
    assert not any(isinstance(e, BlockAbort) for e in emitter.out)


def test_abort_aborts_the_open_block_after_releasing_earlier_stops() -> None:
    emitter = BlockEmitter()
    emitter.text("a")
    emitter.tool_use("c", "n")
    emitter.input_json('{"x"')
    emitter.abort("boom")
    assert emitter.out[-2:] == [BlockDelta(1, InputJsonDelta('{"x"')), BlockAbort(1, TOOL, "boom")]
    assert emitter.out.count(BlockStop(0, TEXT)) == 1
    assert emitter.open_type is None


def test_abort_with_nothing_open_emits_nothing() -> None:
    emitter = BlockEmitter()
    emitter.abort("boom")
    assert emitter.out == []


# --- drive -----------------------------------------------------------------------------------


class Mapper:
    """A tiny protocol: one JSON object per SSE event, one key saying what to do."""

    def __init__(self) -> None:
        self.complete = False
        self.ended = False

    def on_event(self, event: str, raw: bytes, emitter: BlockEmitter) -> None:
        data = orjson.loads(raw)
        if "text" in data:
            emitter.text(data["text"])
        elif "thinking" in data:
            emitter.thinking(data["thinking"])
        elif "tool" in data:
            emitter.tool_use(data["tool"][0], data["tool"][1])
        elif "args" in data:
            emitter.input_json(data["args"])
        elif "usage" in data:
            emitter.out.append(UsageEvent(output_tokens=data["usage"]))
        elif "stop" in data:
            emitter.finish(StopReason(data["stop"]), data["stop"])
            self.complete = True
        elif "error" in data:
            raise OverloadedError(data["error"], error_type="overloaded_error")
        elif "missing" in data:
            data["no such key"]
        elif "info" in data:
            emitter.response_info(**data["info"])

    def on_end(self, emitter: BlockEmitter) -> None:
        self.ended = True


def sse(*payloads: str) -> list[bytes]:
    return [b"data: " + p.encode() + b"\n\n" for p in payloads]


async def chunks_of(
    pieces: list[bytes], error: ProviderError | None = None
) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece
    if error is not None:
        raise error


async def run(
    chunks: AsyncIterator[bytes],
    mapper: StreamMapper | None = None,
    *,
    scrub_secret: str = "",
) -> tuple[list[Event], BaseException | None]:
    def scrub(text: str) -> str:
        return text.replace(scrub_secret, "***") if scrub_secret else text

    events: list[Event] = []
    error: BaseException | None = None
    with anyio.fail_after(5):
        try:
            async for event in drive(chunks, mapper or Mapper(), provider="test", scrub=scrub):
                events.append(event)
        except ProviderError as exc:
            error = exc
    return events, error


STARTED = StatusEvent(ResponseStatus.STARTED)
COMPLETED = StatusEvent(ResponseStatus.COMPLETED)
FAILED = StatusEvent(ResponseStatus.FAILED)


@pytest.mark.anyio
async def test_drive_a_complete_answer() -> None:
    mapper = Mapper()
    body = sse('{"thinking": "t"}', '{"text": "Hi"}', '{"usage": 3}', '{"stop": "end_turn"}')
    events, error = await run(chunks_of([b"".join(body)]), mapper)
    assert error is None
    assert mapper.ended
    assert events == [
        STARTED,
        BlockStart(0, THINKING, ThinkingMetadata()),
        BlockDelta(0, ThinkingDelta("t")),
        BlockStop(0, THINKING),
        BlockStart(1, TEXT, TextMetadata()),
        BlockDelta(1, TextDelta("Hi")),
        UsageEvent(output_tokens=3),
        BlockStop(1, TEXT, StopReason.END_TURN, "end_turn"),
        COMPLETED,
    ]


@pytest.mark.anyio
async def test_drive_decodes_events_split_across_chunks() -> None:
    body = b"".join(sse('{"text": "a\u00e9"}', '{"stop": "end_turn"}'))
    events, error = await run(chunks_of([body[i : i + 1] for i in range(len(body))]))
    assert error is None
    assert BlockDelta(0, TextDelta("a\u00e9")) in events
    assert events[-1] == COMPLETED


@pytest.mark.anyio
async def test_a_provider_error_event_aborts_then_reports_then_raises() -> None:
    body = sse('{"text": "partial"}', '{"error": "Overloaded"}')
    events, error = await run(chunks_of(body))
    assert events == [
        STARTED,
        BlockStart(0, TEXT, TextMetadata()),
        BlockDelta(0, TextDelta("partial")),
        BlockAbort(0, TEXT, "Overloaded"),
        ErrorEvent("overloaded_error", "Overloaded"),
        FAILED,
    ]
    assert isinstance(error, OverloadedError)
    assert error.provider == "test"


@pytest.mark.anyio
async def test_events_of_the_failing_chunk_come_before_the_abort() -> None:
    # Both SSE events arrive in one chunk: the text of the first is not lost.
    body = b"".join(sse('{"text": "a"}', '{"error": "x"}'))
    events, _ = await run(chunks_of([body]))
    assert events[1:4] == [
        BlockStart(0, TEXT, TextMetadata()),
        BlockDelta(0, TextDelta("a")),
        BlockAbort(0, TEXT, "x"),
    ]


@pytest.mark.anyio
async def test_an_early_end_is_interrupted_not_complete() -> None:
    mapper = Mapper()
    events, error = await run(
        chunks_of(sse('{"tool": ["c", "f"]}', '{"args": "{\\"a\\""}')), mapper
    )
    assert isinstance(error, StreamInterruptedError)
    assert error.streamed
    assert not mapper.ended
    assert events[-3:] == [
        BlockAbort(0, TOOL, error.message),
        ErrorEvent("stream_interrupted", error.message),
        FAILED,
    ]
    assert COMPLETED not in events


@pytest.mark.anyio
async def test_a_transport_failure_mid_stream_keeps_what_arrived() -> None:
    broken = StreamInterruptedError("reset", provider="test", streamed=True)
    events, error = await run(chunks_of(sse('{"text": "kept"}'), broken))
    assert error is broken
    assert BlockDelta(0, TextDelta("kept")) in events
    assert events[-3:] == [
        BlockAbort(0, TEXT, "reset"),
        ErrorEvent("stream_interrupted", "reset"),
        FAILED,
    ]


@pytest.mark.anyio
async def test_a_failure_before_any_byte_has_no_start_and_no_blocks() -> None:
    denied = AuthenticationError("bad key", status_code=401, error_type="authentication_error")
    events, error = await run(chunks_of([], denied))
    assert error is denied
    assert events == [ErrorEvent("authentication_error", "bad key"), FAILED]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "payload", ["{not json", '{"missing": 1}', '"text string"', '{"tool": []}'], ids=str
)
async def test_malformed_data_becomes_malformed_stream_error(payload: str) -> None:
    events, error = await run(chunks_of(sse('{"text": "a"}', payload)))
    assert isinstance(error, MalformedStreamError)
    assert error.provider == "test"
    assert error.streamed
    assert isinstance(error.__cause__, ValueError | KeyError | TypeError | IndexError)
    assert events[-3:] == [
        BlockAbort(0, TEXT, error.message),
        ErrorEvent("malformed_stream", error.message),
        FAILED,
    ]


@pytest.mark.anyio
async def test_an_emitter_rule_violation_names_the_provider() -> None:
    events, error = await run(chunks_of(sse('{"args": "{}"}')))
    assert isinstance(error, MalformedStreamError)
    assert error.provider == "test"
    assert str(error).startswith("test: ")
    assert events[-2:] == [ErrorEvent("malformed_stream", error.message), FAILED]


@pytest.mark.anyio
async def test_a_key_echoed_by_the_provider_is_scrubbed_everywhere() -> None:
    secret = "sk-secret-1234567890"
    body = sse('{"text": "a"}', '{"error": "bad key sk-secret-1234567890 used"}')
    events, error = await run(chunks_of(body), scrub_secret=secret)
    assert error is not None
    assert secret not in str(error)
    assert secret not in repr(error)
    assert all(secret not in str(a) for a in error.args)
    assert secret not in repr(events)
    assert ErrorEvent("overloaded_error", "bad key *** used") in events


@pytest.mark.anyio
async def test_closing_the_stream_closes_the_chunks_at_once() -> None:
    closed: list[bool] = []

    async def endless() -> AsyncIterator[bytes]:
        try:
            while True:
                yield b'data: {"text": "x"}\n\n'
        finally:
            closed.append(True)

    stream = drive(endless(), Mapper(), provider="test")
    with anyio.fail_after(5):
        async for event in stream:
            if isinstance(event, BlockDelta):
                break
        assert not closed
        await stream.aclose()  # type: ignore[attr-defined]
    # No event-loop turn in between: the body iterator was closed by aclose itself.
    assert closed == [True]


@pytest.mark.anyio
async def test_the_closing_status_carries_what_the_provider_said_about_the_response() -> None:
    body = sse(
        '{"info": {"response_id": "resp_1", "model": "m-2026"}}',
        '{"text": "Hi"}',
        '{"info": {"service_tier": "flex"}}',
        '{"stop": "end_turn"}',
    )
    events, error = await run(chunks_of(body))
    assert error is None
    assert events[-1] == StatusEvent(ResponseStatus.COMPLETED, "resp_1", "m-2026", "flex")


@pytest.mark.anyio
async def test_a_failed_status_carries_the_response_id_known_so_far() -> None:
    body = sse('{"info": {"response_id": "resp_2"}}', '{"text": "x"}', '{"error": "Overloaded"}')
    events, error = await run(chunks_of(body))
    assert isinstance(error, OverloadedError)
    assert events[-1] == StatusEvent(ResponseStatus.FAILED, "resp_2")


def test_a_citation_joins_the_open_text_block_and_the_assembled_part() -> None:
    from llm_worker.events import CitationDelta
    from llm_worker.messages import Citation, Origin, TextPart
    from llm_worker.worker._assembler import Assembler

    emitter = BlockEmitter()
    cite = Citation({"type": "url_citation", "url": "https://e.x"}, url="https://e.x")
    emitter.start(TEXT, TextMetadata(item_id="msg_1", phase="final_answer"))
    emitter.text("Hi")
    emitter.citation(cite)
    emitter.finish(StopReason.END_TURN, "end_turn", stop_sequence="##", stop_message="done")
    assert emitter.out[2] == BlockDelta(0, CitationDelta(cite))
    assert emitter.out[-1] == BlockStop(0, TEXT, StopReason.END_TURN, "end_turn", "##", "done")
    origin = Origin("openai_responses", "m")
    assembler = Assembler(origin)
    for event in emitter.out:
        assembler.feed(event)
    assert assembler.message.content == [
        TextPart("Hi", item_id="msg_1", origin=origin, citations=[cite], phase="final_answer")
    ]


def test_usage_sums_and_overlays_every_counter() -> None:
    a = UsageEvent(input_tokens=1, web_search_requests=2, cache_creation_1h_input_tokens=5)
    b = UsageEvent(web_search_requests=3, audio_output_tokens=7)
    assert a + b == UsageEvent(
        input_tokens=1,
        web_search_requests=5,
        cache_creation_1h_input_tokens=5,
        audio_output_tokens=7,
    )
    assert a.updated(b) == UsageEvent(
        input_tokens=1,
        web_search_requests=3,
        cache_creation_1h_input_tokens=5,
        audio_output_tokens=7,
    )


@pytest.mark.anyio
async def test_each_event_is_handed_on_before_the_next_of_the_same_read_is_mapped() -> None:
    # A bulk read completes many events: holding them all until the read is mapped made the
    # garbage collector's passes cost more than the parsing (issue 39). One read, three events.
    log: list[str] = []

    class Logging(Mapper):
        def on_event(self, event: str, raw: bytes, emitter: BlockEmitter) -> None:
            log.append(f"map {raw.decode()}")
            super().on_event(event, raw, emitter)

    body = b"".join(sse('{"text": "a"}', '{"text": "b"}', '{"stop": "end_turn"}'))
    with anyio.fail_after(5):
        async for event in drive(chunks_of([body]), Logging(), provider="test"):
            if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                log.append(f"got {event.delta.text}")
    assert log == ['map {"text": "a"}', "got a", 'map {"text": "b"}', "got b",
                   'map {"stop": "end_turn"}']  # fmt: skip


@pytest.mark.anyio
async def test_started_comes_with_the_first_read_even_when_it_ends_no_event() -> None:
    pieces = [b'data: {"te', b'xt": "a"}\n\n', *sse('{"stop": "end_turn"}')]
    seen: list[Event] = []

    async def reads() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece
            if piece is pieces[0]:
                assert seen == [StatusEvent(ResponseStatus.STARTED)]  # before the 2nd read

    with anyio.fail_after(5):
        async for event in drive(reads(), Mapper(), provider="test"):
            seen.append(event)
    assert isinstance(seen[-1], StatusEvent)
    assert seen[-1].status is ResponseStatus.COMPLETED


@pytest.mark.anyio
async def test_invalid_utf8_in_a_json_event_reaches_the_answer_as_replacement_characters() -> None:
    from llm_worker.providers.openai_chat import ChatStreamMapper

    body = (
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"caf\xe9 \xff"}}]}\n\n'
        b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    events, error = await run(chunks_of([body]), ChatStreamMapper())
    assert error is None
    texts = [e.delta.text for e in events if isinstance(e, BlockDelta)
             and isinstance(e.delta, TextDelta)]  # fmt: skip
    assert texts == ["caf\ufffd \ufffd"]
