"""OpenAI Responses client against the recorded streams, over real HTTP on 127.0.0.1.

Expected values are computed from the recording itself, independently of the client: the
`response.output_item.done` events carry each item whole (text, summaries, encrypted content,
arguments), the terminal event carries status and usage. The client builds its blocks from the
deltas instead, so a delta lost, reordered or misrouted shows up as a difference.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
import pytest

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    Event,
    InputJsonDelta,
    Message,
    Origin,
    Request,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    TextDelta,
    TextMetadata,
    TextPart,
    ThinkingConfig,
    ThinkingDelta,
    ThinkingMetadata,
    ThinkingPart,
    ToolResultPart,
    ToolSpec,
    ToolUseMetadata,
    ToolUsePart,
    UsageEvent,
)
from llm_worker.errors import AuthenticationError, InvalidRequestError, ProviderError
from llm_worker.providers import OpenAIResponsesClient
from llm_worker.providers._blocks import drive
from llm_worker.testing import Chunking, WireResponse, WireServer
from support.recorded import load, params

API = "openai_responses"
KEY = "sk-test-0123456789abcdef"


def _recordings(wanted: Callable[[dict[str, Any]], bool]) -> list[Any]:
    """pytest params of the recordings whose response is `wanted` (the skip param if absent)."""
    return [
        p for p in params(API) if p.values[0] is None or wanted(load(API, p.values[0])["response"])
    ]


STREAMS = _recordings(lambda r: r["status"] == 200 and "event-stream" in r["content_type"])
ERRORS = _recordings(lambda r: r["status"] >= 400)
CHUNKINGS = [
    pytest.param(Chunking.whole(), id="whole"),
    pytest.param(Chunking.bytewise(), id="bytewise"),
    pytest.param(Chunking.random(seed=7, max_size=256), id="random"),
]
# One byte per HTTP write costs ~0.2 ms a byte (socket, h11, httpx): recordings above 6 kB
# (up to 107 kB) are fed byte by byte to the same client code in-process instead.
BYTEWISE_OVER_HTTP_MAX = 6_000


# -- what the recording says ---------------------------------------------------------------


@dataclass
class Block:
    """A block as expected or as received."""

    kind: str
    content: str = ""
    signature: str = ""
    item_id: str | None = None
    call_id: str | None = None
    name: str | None = None


@dataclass
class Expected:
    blocks: list[Block] = field(default_factory=lambda: [])
    stop: StopReason | None = None
    usage: dict[str, Any] = field(default_factory=lambda: {})


def _data_events(body: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            events.append(orjson.loads(line[5:]))
    return events


def expected_from(body: str) -> Expected:
    events = _data_events(body)
    done = sorted(
        (e for e in events if e["type"] == "response.output_item.done"),
        key=lambda e: e["output_index"],
    )
    out = Expected()
    refusal = calls = False
    for event in done:
        item = event["item"]
        if item["type"] == "message":
            texts = [c.get("text", c.get("refusal", "")) for c in item["content"]]
            refusal = refusal or any(c["type"] == "refusal" for c in item["content"])
            out.blocks.append(Block("text", "".join(texts), item_id=item["id"]))
        elif item["type"] == "reasoning":
            summaries = [s["text"] for s in item.get("summary") or []] or [""]
            raw = "".join(c["text"] for c in item.get("content") or [])
            summaries[-1] += raw
            for text in summaries:
                out.blocks.append(Block("thinking", text, item_id=item["id"]))
            out.blocks[-1].signature = item.get("encrypted_content") or ""
        elif item["type"] == "function_call":
            calls = True
            out.blocks.append(
                Block(
                    "tool_use",
                    item["arguments"],
                    item_id=item["id"],
                    call_id=item["call_id"],
                    name=item["name"],
                )
            )
    if not out.blocks:
        out.blocks.append(Block("text"))  # the empty block that carries the stop reason
    terminal = next(e for e in events if e["type"] in ("response.completed", "response.incomplete"))
    response = terminal["response"]
    out.usage = response.get("usage") or {}
    reason = (response.get("incomplete_details") or {}).get("reason")
    if terminal["type"] == "response.incomplete":
        out.stop = {"max_output_tokens": StopReason.MAX_TOKENS}.get(reason, StopReason.OTHER)
    elif calls:
        out.stop = StopReason.TOOL_USE
    elif refusal:
        out.stop = StopReason.REFUSAL
    else:
        out.stop = StopReason.END_TURN
    return out


# -- what the client gives -------------------------------------------------------------------


def blocks_of(events: list[Event]) -> list[Block]:
    blocks: list[Block] = []
    for event in events:
        if isinstance(event, BlockStart):
            meta = event.metadata
            block = Block(event.block_type.value)
            if isinstance(meta, TextMetadata | ThinkingMetadata):
                block.item_id = meta.item_id
            elif isinstance(meta, ToolUseMetadata):
                block.item_id, block.call_id, block.name = meta.item_id, meta.id, meta.name
            blocks.append(block)
        elif isinstance(event, BlockDelta):
            delta = event.delta
            block = blocks[event.index]
            if isinstance(delta, TextDelta | ThinkingDelta):
                block.content += delta.text
            elif isinstance(delta, InputJsonDelta):
                block.content += delta.partial_json
            elif isinstance(delta, SignatureDelta):
                block.signature += delta.signature
    return blocks


def check_invariants(events: list[Event]) -> None:
    """The event-model rules every stream keeps, whatever the provider sent."""
    assert events[0] == StatusEvent(ResponseStatus.STARTED)
    assert events[-1] == StatusEvent(ResponseStatus.COMPLETED)
    open_index: int | None = None
    next_index = 0
    stops: list[BlockStop] = []
    for event in events[1:-1]:
        assert not isinstance(event, StatusEvent)
        if isinstance(event, BlockStart):
            assert open_index is None, "a block started while another was open"
            assert event.index == next_index
            open_index, next_index = event.index, next_index + 1
        elif isinstance(event, BlockDelta):
            assert event.index == open_index, "a delta outside its block"
        elif isinstance(event, BlockStop):
            assert event.index == open_index
            open_index = None
            stops.append(event)
        else:
            assert not isinstance(event, BlockAbort)
    assert open_index is None
    assert stops, "no block carried the stop reason"
    assert all(s.stop_reason is None for s in stops[:-1])
    assert stops[-1].stop_reason is not None


async def replay_in_process(body: str) -> list[Event]:
    """The client's mapping of a body fed one byte at a time, without a socket."""
    client = OpenAIResponsesClient(model="m", api_key=KEY)
    request = Request([Message.user("hi")])
    data = body.encode()

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(len(data)):
            yield data[i : i + 1]

    with anyio.fail_after(30):
        return [e async for e in drive(chunks(), client.mapper(request), provider=API)]


async def replay(body: str, chunking: Chunking, *, model: str = "m") -> list[Event]:
    response = WireResponse(body, content_type="text/event-stream", chunking=chunking)
    async with WireServer([response]) as server:
        client = OpenAIResponsesClient(model=model, base_url=server.base_url + "/v1", api_key=KEY)
        events: list[Event] = []
        with anyio.fail_after(30):
            async for event in client.stream(Request([Message.user("hi")])):
                events.append(event)
        await client.aclose()
        assert server.requests[0].path == "/v1/responses"
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    return events


# -- tests ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize("name", STREAMS)
async def test_recorded_stream_replays(name: str, chunking: Chunking) -> None:
    body = load(API, name)["response"]["body"]
    expected = expected_from(body)
    if chunking.mode == "bytewise" and len(body.encode()) > BYTEWISE_OVER_HTTP_MAX:
        events = await replay_in_process(body)
    else:
        events = await replay(body, chunking)
    check_invariants(events)
    assert blocks_of(events) == expected.blocks
    stops = [e for e in events if isinstance(e, BlockStop)]
    assert stops[-1].stop_reason is expected.stop
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usage) == 1
    recorded = expected.usage
    assert usage[0] == UsageEvent(
        input_tokens=recorded["input_tokens"],
        output_tokens=recorded["output_tokens"],
        total_tokens=recorded["total_tokens"],
        cache_read_input_tokens=recorded["input_tokens_details"]["cached_tokens"],
        cache_creation_input_tokens=recorded["input_tokens_details"].get("cache_write_tokens"),
        reasoning_tokens=recorded["output_tokens_details"]["reasoning_tokens"],
    )


def test_recordings_cover_the_features() -> None:
    """The replay above is only as good as what the recordings hold: make sure they hold it."""
    names = [p.values[0] for p in STREAMS]
    features = {f for n in names for f in load(API, n)["features"]}
    for needed in (
        "reasoning_summary",
        "reasoning_text",
        "encrypted_reasoning",
        "tool_calls:2",
        "refusal",
        "incomplete:max_output_tokens",
        "cached_tokens",
        "done_sentinel",
        "sse_comments",
        "item:web_search_call",
    ):
        assert needed in features


@pytest.mark.anyio
async def test_interleaved_items_are_serialized_in_arrival_order() -> None:
    # OpenRouter streams a whole message while its reasoning item is still open: the text
    # waits until the reasoning is done, and nothing of either is lost.
    body = load(API, "openrouter_reasoning_text_done_sentinel")["response"]["body"]
    events = await replay(body, Chunking.whole())
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.block_type.value for s in starts] == ["thinking", "text"]
    first_text = next(i for i, e in enumerate(events) if isinstance(e, BlockDelta) and e.index == 1)
    thinking_stop = next(
        i for i, e in enumerate(events) if isinstance(e, BlockStop) and e.index == 0
    )
    assert thinking_stop < first_text


@pytest.mark.anyio
async def test_summary_parts_become_blocks_of_one_item() -> None:
    body = load(API, "reasoning_summary_run_step1")["response"]["body"]
    events = await replay(body, Chunking.whole())
    thinking = [b for b in blocks_of(events) if b.kind == "thinking"]
    assert len(thinking) == 3
    assert len({b.item_id for b in thinking}) == 1
    assert thinking[0].content.startswith("**Exploring prime numbers**")


@pytest.mark.anyio
async def test_encrypted_content_comes_from_the_finished_item() -> None:
    # The `added` event carries a short provisional blob; only the `done` one is valid.
    recording = load(API, "reasoning_encrypted_then_function_call")["response"]["body"]
    done = next(
        e["item"]
        for e in _data_events(recording)
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    )
    events = await replay(recording, Chunking.whole())
    signatures = [
        e.delta.signature
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, SignatureDelta)
    ]
    assert signatures == [done["encrypted_content"]]
    # The signature arrives before the thinking block's stop.
    sig_at = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, BlockDelta) and isinstance(e.delta, SignatureDelta)
    )
    stop_at = next(i for i, e in enumerate(events) if isinstance(e, BlockStop) and e.index == 0)
    assert sig_at < stop_at


@pytest.mark.anyio
@pytest.mark.parametrize("name", ERRORS)
async def test_recorded_http_errors_are_typed(name: str) -> None:
    recording = load(API, name)
    response = recording["response"]
    wire = WireResponse(
        response["body"], status=response["status"], content_type=response["content_type"]
    )
    error = orjson.loads(response["body"])["error"]
    async with WireServer([wire]) as server:
        client = OpenAIResponsesClient(model="m", base_url=server.base_url + "/v1", api_key=KEY)
        events: list[Event] = []

        async def consume() -> None:
            async for event in client.stream(Request([Message.user("hi")])):
                events.append(event)

        with anyio.fail_after(10), pytest.raises(ProviderError) as caught:
            await consume()
        await client.aclose()
    expected = {401: AuthenticationError, 400: InvalidRequestError}[response["status"]]
    assert type(caught.value) is expected
    assert caught.value.status_code == response["status"]
    assert caught.value.message == error["message"]
    assert [type(e).__name__ for e in events] == ["ErrorEvent", "StatusEvent"]
    assert events[-1] == StatusEvent(ResponseStatus.FAILED)


# -- multi-turn: the step-2 request rebuilt from the neutral history -----------------------


def assemble(events: list[Event], origin: Origin) -> Message:
    """The assistant message of a response, as the Worker keeps it."""
    parts: list[TextPart | ThinkingPart | ToolUsePart] = []
    for block in blocks_of(events):
        if block.kind == "text":
            parts.append(TextPart(block.content, item_id=block.item_id, origin=origin))
        elif block.kind == "thinking":
            parts.append(
                ThinkingPart(
                    block.content,
                    signature=block.signature or None,
                    item_id=block.item_id,
                    origin=origin,
                )
            )
        else:
            assert block.call_id is not None
            assert block.name is not None
            parts.append(
                ToolUsePart(
                    block.call_id,
                    block.name,
                    orjson.loads(block.content or "{}"),
                    item_id=block.item_id,
                    origin=origin,
                )
            )
    return Message("assistant", list(parts))


def normalize(item: dict[str, Any]) -> dict[str, Any]:
    """An input item reduced to what the API reads (plain-string content = one text part)."""
    kind = item.get("type", "message")
    if kind == "message":
        content = item["content"]
        texts = [content] if isinstance(content, str) else [c["text"] for c in content]
        role = "system" if item["role"] == "developer" else item["role"]
        return {"type": kind, "role": role, "texts": texts, "id": item.get("id")}
    if kind == "function_call":
        return {
            "type": kind,
            "call_id": item["call_id"],
            "name": item["name"],
            "arguments": orjson.loads(item["arguments"]),
        }
    if kind == "reasoning":
        summary = [s["text"] for s in item["summary"]]
        return {"type": kind, "id": item["id"], "summary": summary}
    return item


async def step_one(name: str, model: str) -> Message:
    body = load(API, name)["response"]["body"]
    return assemble(await replay(body, Chunking.whole()), Origin(API, model))


def recorded_input(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body = load(API, name)["request"]["body"]
    items = [normalize(i) for i in body["input"]]
    # A leading system/developer message is what `instructions` carries.
    if items and items[0].get("role") == "system":
        body = {**body, "instructions": items[0]["texts"][0]}
        items = items[1:]
    return body, items


@pytest.mark.anyio
async def test_reasoning_summary_run_step2_request_is_rebuilt() -> None:
    step1 = load(API, "reasoning_summary_run_step1")["request"]["body"]
    recorded, items = recorded_input("reasoning_summary_run_step2")
    assistant = await step_one("reasoning_summary_run_step1", "gpt-5")
    history = [
        Message.user(step1["input"][0]["content"]),
        assistant,
        Message.user(items[-1]["texts"][0]),
    ]
    client = OpenAIResponsesClient(model="gpt-5", api_key=KEY)
    body = client.build_body(
        Request(history, thinking=ThinkingConfig(effort="minimal", include_thoughts=False))
    )
    assert [normalize(i) for i in body["input"]] == items
    # The message that followed the reasoning item goes back with its id and status.
    message = body["input"][2]
    assert message["status"] == "completed"
    assert message["content"][0]["type"] == "output_text"
    assert body["reasoning"] == recorded["reasoning"]
    assert (body["model"], body["stream"]) == (recorded["model"], recorded["stream"])


@pytest.mark.anyio
async def test_parallel_function_calls_step2_request_is_rebuilt() -> None:
    recorded, items = recorded_input("parallel_function_calls_run_step2")
    step1, _ = recorded_input("parallel_function_calls_run_step1")
    assistant = await step_one("parallel_function_calls_run_step1", "gpt-4o")
    raw = load(API, "parallel_function_calls_run_step2")["request"]["body"]["input"]
    results = [
        ToolResultPart(i["call_id"], i["output"])
        for i in raw
        if i.get("type") == "function_call_output"
    ]
    user = step1["input"][-1]["content"]
    history = [Message.user(user), assistant, Message("user", list(results))]
    tools = [
        ToolSpec(t["name"], t["description"], t["parameters"], strict=t["strict"])
        for t in recorded["tools"]
    ]
    client = OpenAIResponsesClient(model="gpt-4o", api_key=KEY)
    body = client.build_body(Request(history, system=recorded["instructions"], tools=tools))
    assert [normalize(i) for i in body["input"]] == items
    sent_ids = [i.get("id") for i in body["input"] if i["type"] == "function_call"]
    assert sent_ids == [i.get("id") for i in raw if i.get("type") == "function_call"]
    assert body["instructions"] == recorded["instructions"]
    assert body["tools"] == recorded["tools"]


@pytest.mark.anyio
async def test_function_call_step2_request_is_rebuilt() -> None:
    recorded, items = recorded_input("function_call_run_step2")
    assistant = await step_one("function_call_run_step1", "gpt-4o")
    (call,) = assistant.tool_uses
    # Quirk of the recording: pydantic-ai (March 2025) sent the `fc_…` item id as `call_id`;
    # the call's real `call_id` (what the tool result must name) is the `call_…` one.
    assert items[1]["call_id"] == call.item_id
    for item in items:
        if "call_id" in item:
            item["call_id"] = call.id
    history = [
        Message.user(items[0]["texts"][0]),
        assistant,
        Message("user", [ToolResultPart(call.id, "Paris")]),
    ]
    spec = recorded["tools"][0]
    tools = [ToolSpec(spec["name"], "", spec["parameters"], strict=True)]
    client = OpenAIResponsesClient(model="gpt-4o", api_key=KEY)
    body = client.build_body(Request(history, tools=tools, tool_choice="auto"))
    assert [normalize(i) for i in body["input"]] == items
    assert body["tools"] == recorded["tools"]
    assert body["tool_choice"] == recorded["tool_choice"]
    assert "instructions" not in body  # the recording's `""` says nothing


def test_previous_response_id_request_is_rebuilt() -> None:
    recorded = load(API, "nonstream_previous_response_id_tool_output")["request"]["body"]
    output = recorded["input"][0]
    spec = recorded["tools"][0]
    request = Request(
        [Message("user", [ToolResultPart(output["call_id"], output["output"])])],
        tools=[ToolSpec(spec["name"], "", spec["parameters"], strict=True)],
        tool_choice="auto",
        options={"previous_response_id": recorded["previous_response_id"], "store": True},
    )
    body = OpenAIResponsesClient(model="gpt-4.1", api_key=KEY).build_body(request)
    assert body["input"] == recorded["input"]
    for key in ("previous_response_id", "store", "tool_choice", "model"):
        assert body[key] == recorded[key]
    assert "include" not in body
