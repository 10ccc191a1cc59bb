"""Helpers of the OpenAI Responses client tests (no tests here).

- `replay` / `replay_bytewise` / `collect`: the real client against a `WireServer` answer (or
  an in-process transport feeding one byte per read), every wait bounded;
- `expected`: what a recording holds, read from its `output_item.done` events and terminal
  event with the standard `json` module (the client builds its blocks from the deltas);
- `blocks_of`: the same summary, from the events the client yielded;
- `assemble`: the assistant `Message` those events make (for the multi-turn request checks);
- `check_invariants`: the event-model rules every stream keeps, failed ones included;
- `sse` and friends: documented event shapes for streams no recording has.

The provider-neutral parts are `support.streams`, bound here to `OpenAIResponsesClient`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    Event,
    InputJsonDelta,
    ProviderMetadata,
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
from llm_worker.messages import Message, Request
from llm_worker.providers import OpenAIResponsesClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer
from support import streams
from support.recorded import load, params

API = "openai_responses"
KEY = "sk-test-0123456789abcdef"
TIMEOUT = streams.TIMEOUT
collect = streams.collect
assemble = streams.assemble


def recordings(wanted: Callable[[dict[str, Any]], bool]) -> list[Any]:
    """pytest params of the recordings whose response is `wanted` (the skip param if absent)."""
    return [
        p for p in params(API) if p.values[0] is None or wanted(load(API, p.values[0])["response"])
    ]


def client_for(server: WireServer, model: str = "m", **options: Any) -> OpenAIResponsesClient:
    options.setdefault("retry", RetryPolicy.disabled())
    return OpenAIResponsesClient(
        model=model, api_key=KEY, base_url=server.base_url + "/v1", **options
    )


def user_request(text: str = "hi") -> Request:
    return Request([Message.user(text)])


async def replay(
    *responses: WireResponse, request: Request | None = None, **options: Any
) -> tuple[list[Event], Exception | None, WireServer]:
    """Serve the answers in turn (retries take the next) to one request of a fresh client."""
    return await streams.replay(
        responses, lambda server: client_for(server, **options), request or user_request()
    )


async def replay_bytewise(body: str) -> tuple[list[Event], Exception | None]:
    """The real client reading `body` (an SSE stream) one byte per read, in process."""
    return await streams.replay_bytewise(
        WireResponse(body),
        lambda http: OpenAIResponsesClient(
            model="m",
            api_key=KEY,
            base_url="http://responses.test/v1",
            http_client=http,
            retry=RetryPolicy.disabled(),
        ),
        user_request(),
    )


recorded = partial(streams.recorded_response, API)


# -- what a recording says -------------------------------------------------------------------


@dataclass
class Block:
    """One block, as expected or as received."""

    kind: str
    content: str = ""
    signature: str = ""
    item_id: str | None = None
    call_id: str | None = None
    name: str | None = None
    data: dict[str, Any] | None = None  # a provider block: the whole item
    phase: str | None = None  # a message's
    citations: list[dict[str, Any]] = field(default_factory=lambda: [])  # annotations, whole


@dataclass
class Expected:
    blocks: list[Block] = field(default_factory=lambda: [])
    stop: StopReason | None = None
    raw_stop: str | None = None
    usage: UsageEvent | None = None
    status: StatusEvent | None = None  # the closing one: the response's id, model and tier


def data_events(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of a recorded SSE body, in order (`[DONE]` left out)."""
    events: list[dict[str, Any]] = []
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            events.append(json.loads(line[5:]))
    return events


def _item_blocks(item: dict[str, Any]) -> list[Block]:
    if item["type"] == "message":
        texts = [c.get("text", c.get("refusal", "")) for c in item["content"]]
        block = Block("text", "".join(texts), item_id=item["id"], phase=item.get("phase"))
        block.citations = [a for c in item["content"] for a in c.get("annotations") or []]
        return [block]
    if item["type"] == "reasoning":
        summaries = [s["text"] for s in item.get("summary") or []] or [""]
        summaries[-1] += "".join(c["text"] for c in item.get("content") or [])
        blocks = [Block("thinking", text, item_id=item["id"]) for text in summaries]
        blocks[-1].signature = item.get("encrypted_content") or ""
        return blocks
    if item["type"] == "function_call":
        args = item["arguments"]
        return [Block("tool_use", args, "", item["id"], item["call_id"], item["name"])]
    return [Block("provider", data=item)]  # hosted tools: web search, MCP, tool search, …


def expected(name: str) -> Expected:
    """What the client must give for a recording: blocks in output order, stop, usage."""
    events = data_events(load(API, name)["response"]["body"])
    done = [e for e in events if e["type"] == "response.output_item.done"]
    items = [e["item"] for e in sorted(done, key=lambda e: e["output_index"])]
    out = Expected()
    for item in items:
        out.blocks.extend(_item_blocks(item))
    if not out.blocks:
        out.blocks.append(Block("text"))  # the empty block that carries the stop reason
    terminal = next(e for e in events if e["type"] in ("response.completed", "response.incomplete"))
    response = terminal["response"]
    out.status = _closing_status(events, terminal)
    reason = (response.get("incomplete_details") or {}).get("reason")
    refused = any(c["type"] == "refusal" for i in items for c in i.get("content") or [])
    if terminal["type"] == "response.incomplete":
        assert reason == "max_output_tokens"  # the only reason the recordings hold
        out.stop, out.raw_stop = StopReason.MAX_TOKENS, reason
    elif any(i["type"] == "function_call" for i in items):
        out.stop, out.raw_stop = StopReason.TOOL_USE, "completed"
    elif refused:
        out.stop, out.raw_stop = StopReason.REFUSAL, "refusal"
    else:
        out.stop, out.raw_stop = StopReason.END_TURN, "completed"
    usage = response["usage"]
    out.usage = UsageEvent(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        total_tokens=usage["total_tokens"],
        cache_read_input_tokens=usage["input_tokens_details"]["cached_tokens"],
        cache_creation_input_tokens=usage["input_tokens_details"].get("cache_write_tokens"),
        reasoning_tokens=usage["output_tokens_details"]["reasoning_tokens"],
    )
    return out


def _closing_status(events: list[dict[str, Any]], terminal: dict[str, Any]) -> StatusEvent:
    """COMPLETED with what `response.created` and the terminal event say (the later wins)."""
    status = StatusEvent(ResponseStatus.COMPLETED)
    for event in [e for e in events if e["type"] == "response.created"] + [terminal]:
        response = event["response"]
        status.response_id = response.get("id") or status.response_id
        status.model = response.get("model") or status.model
        status.service_tier = response.get("service_tier") or status.service_tier
    return status


# -- what the client gave --------------------------------------------------------------------


def blocks_of(events: list[Event]) -> list[Block]:
    """The blocks the events describe, with their content and opaque data joined."""
    blocks: list[Block] = []
    for event in events:
        if isinstance(event, BlockStart):
            meta = event.metadata
            block = Block(event.block_type.value)
            if isinstance(meta, TextMetadata | ThinkingMetadata):
                block.item_id = meta.item_id
                block.phase = meta.phase if isinstance(meta, TextMetadata) else None
            elif isinstance(meta, ToolUseMetadata):
                block.item_id, block.call_id, block.name = meta.item_id, meta.id, meta.name
            elif isinstance(meta, ProviderMetadata):
                block.data = meta.data
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
            elif isinstance(delta, CitationDelta):
                block.citations.append(delta.citation.data)
    return blocks


def text_of(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def stops(events: list[Event]) -> list[BlockStop]:
    return [e for e in events if isinstance(e, BlockStop)]


_DELTAS = {
    **streams.deltas(signed=[BlockType.THINKING]),  # encrypted reasoning
    BlockType.TEXT: (TextDelta, CitationDelta),
}


def check_invariants(events: list[Event], *, failed: bool = False) -> None:
    """The event-model rules (`support.streams.check_invariants`), whatever the provider
    sent; every stream here, failed ones too, has started."""
    assert events[0] == StatusEvent(ResponseStatus.STARTED)
    streams.check_invariants(events, failed=failed, allowed=_DELTAS)


# -- documented shapes for streams no recording has ------------------------------------------


def sse(payload: dict[str, Any]) -> str:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n"


def created() -> str:
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    return sse({"type": "response.created", "response": response})


def message_added(index: int = 0, item_id: str = "msg_1") -> str:
    item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
    return sse({"type": "response.output_item.added", "output_index": index, "item": item})


def text_delta(delta: str, index: int = 0, item_id: str = "msg_1") -> str:
    return sse(
        {
            "type": "response.output_text.delta",
            "item_id": item_id,
            "output_index": index,
            "content_index": 0,
            "delta": delta,
        }
    )


def message_done(text: str, index: int = 0, item_id: str = "msg_1") -> str:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    item = {"id": item_id, "type": "message", "status": "completed", "content": content}
    return sse({"type": "response.output_item.done", "output_index": index, "item": item})


USAGE = {
    "input_tokens": 20,
    "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 29,
}


def completed(usage: dict[str, Any] | None = None) -> str:
    response = {"id": "resp_1", "status": "completed", "usage": usage or USAGE}
    return sse({"type": "response.completed", "response": response})


def text_stream(*pieces: str) -> str:
    """A whole text answer, one delta per piece."""
    text = "".join(pieces)
    deltas = "".join(text_delta(p) for p in pieces)
    return created() + message_added() + deltas + message_done(text) + completed()
