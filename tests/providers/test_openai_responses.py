"""OpenAI Responses client against every recorded stream, over real HTTP on 127.0.0.1.

Expected values come from the recording itself (`test_openai_responses_support.expected`):
the `response.output_item.done` events carry each item whole, the terminal event status and
usage. The client builds its blocks from the deltas, so a delta lost, reordered or misrouted
shows up as a difference.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_openai_responses_support import (
    API,
    KEY,
    USAGE,
    Block,
    blocks_of,
    check_invariants,
    created,
    data_events,
    expected,
    message_added,
    message_done,
    recorded,
    recordings,
    replay,
    replay_bytewise,
    sse,
    stops,
    text_delta,
    text_stream,
)

from llm_worker.errors import (
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    ProviderError,
)
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    UsageEvent,
)
from llm_worker.testing import Chunking, WireResponse
from support.recorded import load

STREAMS = recordings(lambda r: r["status"] == 200 and "event-stream" in r["content_type"])
ERRORS = recordings(lambda r: r["status"] >= 400)
CHUNKINGS = [
    pytest.param(Chunking.whole(), id="whole"),
    pytest.param(Chunking.bytewise(), id="bytewise"),
    pytest.param(Chunking.random(seed=7, max_size=256), id="random"),
]
# A socket write per byte costs ~0.2 ms: recordings above 6 kB (up to 107 kB) are read one
# byte at a time through an in-process transport instead (same client code from httpx on).
BYTEWISE_OVER_HTTP_MAX = 6_000


@pytest.mark.anyio
@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize("name", STREAMS)
async def test_recorded_stream_replays(name: str, chunking: Chunking) -> None:
    want = expected(name)
    body = load(API, name)["response"]["body"]
    if chunking.mode == "bytewise" and len(body.encode()) > BYTEWISE_OVER_HTTP_MAX:
        events, error = await replay_bytewise(body)
    else:
        events, error, server = await replay(recorded(name, chunking))
        assert server.requests[0].path == "/v1/responses"
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert error is None
    check_invariants(events)
    assert blocks_of(events) == want.blocks
    last = stops(events)[-1]
    assert (last.stop_reason, last.raw_stop_reason) == (want.stop, want.raw_stop)
    assert [e for e in events if isinstance(e, UsageEvent)] == [want.usage]
    assert events[-1] == want.status


def test_recordings_cover_the_features() -> None:
    """The replay is only as good as what the recordings hold: make sure they hold it."""
    features = {f for p in STREAMS if p.values[0] for f in load(API, p.values[0])["features"]}
    for needed in (
        "reasoning_summary",
        "reasoning_text",
        "encrypted_reasoning",
        "tool_calls:2",
        "tool_empty_args",
        "refusal",
        "incomplete:max_output_tokens",
        "cached_tokens",
        "done_sentinel",
        "sse_comments",
        "item:web_search_call",
        "item:code_interpreter_call",
        "item:tool_search_call",
        "annotations",
        "message_phase",
        "logprobs",
    ):
        assert needed in features


@pytest.mark.anyio
async def test_interleaved_items_are_serialized_in_arrival_order() -> None:
    # OpenRouter streams a whole message while its reasoning item is still open: the text
    # waits until the reasoning is done; nothing of either is lost.
    name = "openrouter_reasoning_text_done_sentinel"
    events, error, _ = await replay(recorded(name))
    assert error is None
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.block_type for s in starts] == [BlockType.THINKING, BlockType.TEXT]
    first_text = next(i for i, e in enumerate(events) if isinstance(e, BlockDelta) and e.index)
    thinking_stop = next(i for i, e in enumerate(events) if isinstance(e, BlockStop))
    assert thinking_stop < first_text
    assert blocks_of(events) == expected(name).blocks


@pytest.mark.anyio
async def test_summary_parts_become_blocks_of_one_item() -> None:
    events, _, _ = await replay(recorded("reasoning_summary_run_step1"))
    thinking = [b for b in blocks_of(events) if b.kind == "thinking"]
    assert len(thinking) == 3
    assert len({b.item_id for b in thinking}) == 1
    assert thinking[0].content.startswith("**Exploring prime numbers**")
    assert thinking[1].content.startswith("**Testing prime candidates**")


@pytest.mark.anyio
async def test_encrypted_content_is_the_finished_items_before_the_stop() -> None:
    # The `added` event carries a provisional blob; the `done` one is what goes back.
    name = "reasoning_encrypted_then_function_call"
    body = load(API, name)["response"]["body"]
    added, done = (
        e["item"]["encrypted_content"]
        for e in data_events(body)
        if e["type"].startswith("response.output_item") and e["item"]["type"] == "reasoning"
    )
    assert added != done
    events, _, _ = await replay(recorded(name))
    signed = [
        i
        for i, e in enumerate(events)
        if isinstance(e, BlockDelta) and isinstance(e.delta, SignatureDelta)
    ]
    assert len(signed) == 1
    delta = events[signed[0]]
    assert isinstance(delta, BlockDelta)
    assert isinstance(delta.delta, SignatureDelta)
    assert delta.delta.signature == done
    assert events[signed[0] + 1] == BlockStop(0, BlockType.THINKING)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ERRORS)
async def test_recorded_http_errors_are_typed(name: str) -> None:
    response = load(API, name)["response"]
    events, error, server = await replay(recorded(name))
    kind = {400: InvalidRequestError, 401: AuthenticationError}[response["status"]]
    assert type(error) is kind
    assert isinstance(error, ProviderError)
    assert error.status_code == response["status"]
    assert KEY not in str(error)
    assert events == [
        ErrorEvent(error.error_type, error.message),
        StatusEvent(ResponseStatus.FAILED),
    ]
    assert len(server.requests) == 1  # a 4xx is not retried
    assert not isinstance(error, NotFoundError)


# -- shapes no recording has -------------------------------------------------------------------


def _item(kind: str, index: int, item: dict[str, Any]) -> str:
    return sse({"type": f"response.output_item.{kind}", "output_index": index, "item": item})


def _delta(kind: str, index: int, delta: str, **extra: Any) -> str:
    return sse({"type": f"response.{kind}.delta", "output_index": index, "delta": delta, **extra})


def _terminal(kind: str = "completed", **response: Any) -> str:
    return sse({"type": f"response.{kind}", "response": {"usage": USAGE, **response}})


REASONING = {"id": "rs_1", "type": "reasoning", "summary": []}
CALL = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": ""}
CALL_2 = {**CALL, "id": "fc_2", "call_id": "call_2", "name": "g"}


async def _blocks(body: str) -> tuple[list[Block], BlockStop]:
    events, error, _ = await replay(WireResponse(body, chunking=Chunking.random(seed=3)))
    assert error is None
    check_invariants(events)
    return blocks_of(events), stops(events)[-1]


@pytest.mark.anyio
async def test_an_item_never_done_is_closed_and_the_held_ones_played_at_the_end() -> None:
    body = (
        created()
        + _item("added", 0, REASONING)
        + _delta("reasoning_text", 0, "think")
        + message_added(1)
        + text_delta("answer", 1)
        + message_done("answer", 1)
        + _terminal()  # the reasoning item never got its `done`
    )
    blocks, stop = await _blocks(body)
    assert blocks == [
        Block("thinking", "think", item_id="rs_1"),
        Block("text", "answer", item_id="msg_1"),
    ]
    assert stop.stop_reason is StopReason.END_TURN


@pytest.mark.anyio
async def test_interleaved_call_arguments_are_serialized_per_call() -> None:
    body = (
        created()
        + _item("added", 0, CALL)
        + _item("added", 1, CALL_2)
        + _delta("function_call_arguments", 0, '{"a":')
        + _delta("function_call_arguments", 1, '{"b":')
        + _delta("function_call_arguments", 1, "2}")
        + _delta("function_call_arguments", 0, "1}")
        + _item("done", 1, {**CALL_2, "arguments": '{"b":2}'})
        + _item("done", 0, {**CALL, "arguments": '{"a":1}'})
        + _terminal()
    )
    blocks, stop = await _blocks(body)
    assert [(b.call_id, b.content) for b in blocks] == [
        ("call_1", '{"a":1}'),
        ("call_2", '{"b":2}'),
    ]
    assert stop.stop_reason is StopReason.TOOL_USE


@pytest.mark.anyio
async def test_items_that_arrive_whole_still_give_their_content() -> None:
    summary = [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}]
    message = {
        "id": "msg_1",
        "type": "message",
        "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
    }
    body = (
        created()
        + _item("added", 0, REASONING)
        + _item("done", 0, {**REASONING, "summary": summary, "encrypted_content": "enc"})
        + _item("added", 1, {"id": "msg_1", "type": "message", "content": []})
        + _item("done", 1, message)
        + _item("added", 2, CALL)
        + sse(
            {"type": "response.function_call_arguments.done", "output_index": 2, "arguments": "{}"}
        )
        + _item("done", 2, {**CALL, "arguments": "{}"})
        + _item("added", 3, CALL_2)
        + _item("done", 3, {**CALL_2, "arguments": '{"x":1}'})
        + _terminal()
    )
    blocks, _ = await _blocks(body)
    assert blocks == [
        Block("thinking", "one", item_id="rs_1"),
        Block("thinking", "two", "enc", item_id="rs_1"),
        Block("text", "Hi", item_id="msg_1"),
        Block("tool_use", "{}", "", "fc_1", "call_1", "f"),
        Block("tool_use", '{"x":1}', "", "fc_2", "call_2", "g"),
    ]


@pytest.mark.anyio
async def test_unknown_events_pass_and_unknown_items_are_kept_whole() -> None:
    body = (
        created()
        + sse({"type": "response.queued", "response": {"status": "queued"}})
        + _item("added", 0, {"id": "ig_1", "type": "image_generation_call"})
        + sse(
            {"type": "response.image_generation_call.partial_image", "output_index": 0, "b64": "x"}
        )
        + sse({"type": "response.some_future_event", "output_index": 0, "whatever": [1]})
        + _item("done", 0, {"id": "ig_1", "type": "image_generation_call", "result": "x"})
        + text_stream("After.")[len(created()) :]
    )
    blocks, stop = await _blocks(body)
    # The item as it is done (not as added); its progress events leave no trace.
    image = {"id": "ig_1", "type": "image_generation_call", "result": "x"}
    assert blocks == [Block("provider", data=image), Block("text", "After.", item_id="msg_1")]
    assert stop.stop_reason is StopReason.END_TURN


@pytest.mark.anyio
async def test_deltas_without_an_added_item_still_stream() -> None:
    body = created() + text_delta("no ") + text_delta("preamble") + _terminal()
    blocks, _ = await _blocks(body)
    assert [(b.kind, b.content) for b in blocks] == [("text", "no preamble")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("max_output_tokens", StopReason.MAX_TOKENS),
        ("content_filter", StopReason.CONTENT_FILTER),
        ("something_new", StopReason.OTHER),
    ],
)
async def test_incomplete_reasons(reason: str, stop: StopReason) -> None:
    details = {"reason": reason}
    body = text_stream("cut")
    body = body[: body.index("event: response.completed")]
    body += _terminal("incomplete", status="incomplete", incomplete_details=details)
    _, last = await _blocks(body)
    assert (last.stop_reason, last.raw_stop_reason) == (stop, reason)
