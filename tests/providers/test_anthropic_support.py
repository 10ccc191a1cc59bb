"""Helpers of the Anthropic client tests (no tests here).

- `replay` / `collect`: run the real client against a `WireServer` answer, every wait bounded;
- `expected`: what a recording holds, read straight from its JSON (not through the client);
- `answer`: the same summary, from the events the client yielded;
- `assemble`: the assistant `Message` those events make (for multi-turn request checks);
- `check_invariants`: the event-model rules every replay must keep.

The provider-neutral parts are `support.streams`, bound here to `AnthropicClient`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from llm_worker.errors import ProviderError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    Event,
    InputJsonDelta,
    ProviderMetadata,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
    ThinkingMetadata,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Message, Request
from llm_worker.providers import AnthropicClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer
from support import streams
from support.recorded import load

API = "anthropic_messages"
TIMEOUT = streams.TIMEOUT
assemble = streams.assemble


def client_for(server: WireServer, model: str = "claude-test", **options: Any) -> AnthropicClient:
    options.setdefault("retry", RetryPolicy.disabled())
    return AnthropicClient(
        model=model, api_key="sk-ant-test-key", base_url=server.base_url, **options
    )


async def collect(
    client: AnthropicClient, request: Request
) -> tuple[list[Event], ProviderError | None]:
    """Every event of one stream, and the typed error that ended it (if any)."""
    return await streams.collect(client, request, ProviderError)


async def replay(
    response: WireResponse, request: Request | None = None, **options: Any
) -> tuple[list[Event], ProviderError | None, WireServer]:
    """Serve one answer and stream it through a fresh client."""
    return await replay_many([response], request, **options)


async def replay_many(
    responses: list[WireResponse], request: Request | None = None, **options: Any
) -> tuple[list[Event], ProviderError | None, WireServer]:
    """Serve answers in turn (retries take the next) to one request of a fresh client."""
    return await streams.replay(
        responses,
        lambda server: client_for(server, **options),
        request or Request([Message.user("hi")]),
        ProviderError,
    )


recorded_response = partial(streams.recorded_response, API)


# --- what a recording holds, read independently of the client ---------------------------


@dataclass
class Block:
    kind: str  # "text" | "thinking" | "tool_use" | "provider"
    text: str = ""
    signature: str = ""
    redacted: str | None = None
    id: str = ""
    name: str = ""
    input: Any = None
    data: dict[str, Any] | None = None  # a provider block, whole
    citations: list[dict[str, Any]] = field(default_factory=lambda: [])  # a text block's


@dataclass
class Summary:
    blocks: list[Block] = field(default_factory=lambda: [])
    stop_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read: int | None = None
    cache_creation: int | None = None


def sse_payloads(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body, parsed with the standard library."""
    out: list[dict[str, Any]] = []
    for raw in body.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in raw.split("\n") if line.startswith("data:")]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


_KNOWN = {"text", "thinking", "redacted_thinking", "tool_use"}


def expected(name: str) -> Summary:
    """Blocks, stop reason and usage straight from the recording's JSON."""
    summary = Summary()
    by_index: dict[int, Block] = {}
    partial: dict[int, str] = {}
    usage: dict[str, int] = {}
    end: dict[str, Any] = {"delta": {}, "usage": {}}
    for payload in sse_payloads(load(API, name)["response"]["body"]):
        kind = payload["type"]
        if kind == "content_block_start":
            block = _started_block(payload["content_block"])
            by_index[payload["index"]] = block
            summary.blocks.append(block)
            if block.kind in ("provider", "tool_use"):
                partial[payload["index"]] = ""
        elif kind == "content_block_delta" and payload["index"] in by_index:
            _add_delta(by_index[payload["index"]], payload, partial)
        elif kind in ("message_start", "message_delta"):
            source = payload["message"]["usage"] if kind == "message_start" else payload["usage"]
            usage.update({k: v for k, v in source.items() if isinstance(v, int)})
            end = payload if kind == "message_delta" else end
    for index, text in partial.items():
        data = by_index[index].data
        if data is None:
            by_index[index].input = json.loads(text) if text else {}
        elif text:
            data["input"] = json.loads(text)
    summary.stop_reason = end["delta"].get("stop_reason")
    if end["delta"].get("container"):
        # The code-execution container: kept after the content, for the next request.
        container = {**end["delta"]["container"], "type": "container"}
        summary.blocks.append(Block("provider", data=container))
    _add_compaction_usage(usage, end["usage"].get("iterations") or [])
    summary.cache_read = usage.get("cache_read_input_tokens")
    summary.cache_creation = usage.get("cache_creation_input_tokens")
    summary.input_tokens = (
        usage["input_tokens"] + (summary.cache_read or 0) + (summary.cache_creation or 0)
    )
    summary.output_tokens = usage["output_tokens"]
    return summary


def _started_block(cb: dict[str, Any]) -> Block:
    if cb["type"] not in _KNOWN:
        # Server tools, MCP, compaction: kept whole, deltas merged in.
        return Block("provider", data=json.loads(json.dumps(cb)))
    block = Block("thinking" if "thinking" in cb["type"] else cb["type"])
    if cb["type"] == "redacted_thinking":
        block.redacted = cb["data"]
    if cb["type"] == "tool_use":
        block.id, block.name = cb["id"], cb["name"]
    return block


def _add_compaction_usage(usage: dict[str, int], iterations: list[dict[str, Any]]) -> None:
    # A compaction's own tokens are not in the top-level usage: the answer's cost adds them.
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    for item in iterations:
        if item["type"] == "compaction":
            for key in (*keys, "output_tokens"):
                usage[key] = usage.get(key, 0) + item[key]


def _add_delta(block: Block, payload: dict[str, Any], partial: dict[int, str]) -> None:
    delta = payload["delta"]
    if delta["type"] == "text_delta":
        block.text += delta["text"]
    elif delta["type"] == "citations_delta" and block.kind == "text":
        block.citations.append(delta["citation"])
    elif delta["type"] == "thinking_delta":
        block.text += delta["thinking"]
    elif delta["type"] == "signature_delta":
        block.signature += delta["signature"]
    elif delta["type"] == "input_json_delta":
        partial[payload["index"]] += delta["partial_json"]
    elif block.data is not None and delta["type"] == "compaction_delta":
        for key in ("content", "encrypted_content"):
            if delta.get(key) is not None:
                block.data[key] = (block.data.get(key) or "") + delta[key]
    elif block.data is not None and delta["type"] == "citations_delta":
        block.data.setdefault("citations", []).append(delta["citation"])


# --- the same summary, from the client's events ------------------------------------------


def answer(events: list[Event]) -> Summary:
    """Blocks, stop reason and final usage from the client's events."""
    summary = Summary()
    partial: list[str] = []
    last = UsageEvent()
    for event in events:
        if isinstance(event, BlockStart):
            partial = []
            summary.blocks.append(_started(event))
        elif isinstance(event, BlockDelta):
            block = summary.blocks[-1]
            delta = event.delta
            if isinstance(delta, TextDelta | ThinkingDelta):
                block.text += delta.text
            elif isinstance(delta, SignatureDelta):
                block.signature += delta.signature
            elif isinstance(delta, InputJsonDelta):
                partial.append(delta.partial_json)
            elif isinstance(delta, CitationDelta):
                block.citations.append(delta.citation.data)
        elif isinstance(event, BlockStop):
            if event.block_type is BlockType.TOOL_USE:
                summary.blocks[-1].input = orjson.loads("".join(partial))
            if event.raw_stop_reason is not None:
                summary.stop_reason = event.raw_stop_reason
        elif isinstance(event, UsageEvent):
            last = last.updated(event)
    summary.input_tokens = last.input_tokens
    summary.output_tokens = last.output_tokens
    summary.cache_read = last.cache_read_input_tokens
    summary.cache_creation = last.cache_creation_input_tokens
    return summary


def _started(event: BlockStart) -> Block:
    block = Block(str(event.block_type))
    meta = event.metadata
    if isinstance(meta, ThinkingMetadata):
        block.redacted = meta.redacted
    if isinstance(meta, ToolUseMetadata):
        block.id, block.name = meta.id, meta.name
    if isinstance(meta, ProviderMetadata):
        block.data = meta.data
    return block


# --- the event-model rules ---------------------------------------------------------------

# Thinking blocks alone carry signatures; text blocks may carry citations.
_DELTAS = {
    **streams.deltas(signed=[BlockType.THINKING]),
    BlockType.TEXT: (TextDelta, CitationDelta),
}


def check_invariants(events: list[Event], *, failed: bool = False) -> None:
    """The event-model rules (`support.streams.check_invariants`); thinking blocks alone carry
    signatures."""
    streams.check_invariants(events, failed=failed, allowed=_DELTAS)


# --- synthetic streams in the recorded shape ---------------------------------------------


def sse(payload: dict[str, Any], event: str | None = None) -> str:
    """One SSE event as Anthropic writes it (`event:` line named after the payload type)."""
    return f"event: {event or payload['type']}\ndata: {json.dumps(payload)}\n\n"


def message_start(input_tokens: int = 10) -> str:
    return sse(
        {
            "type": "message_start",
            "message": {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }
    )


def block_start(index: int, block: dict[str, Any]) -> str:
    return sse({"type": "content_block_start", "index": index, "content_block": block})


def block_delta(index: int, delta: dict[str, Any]) -> str:
    return sse({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> str:
    return sse({"type": "content_block_stop", "index": index})


def message_end(stop_reason: str = "end_turn", output_tokens: int = 5) -> str:
    return sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    ) + sse({"type": "message_stop"})


def text_stream(*pieces: str, stop_reason: str = "end_turn") -> str:
    """A whole answer of one text block."""
    deltas = "".join(block_delta(0, {"type": "text_delta", "text": p}) for p in pieces)
    return (
        message_start()
        + block_start(0, {"type": "text", "text": ""})
        + deltas
        + block_stop(0)
        + message_end(stop_reason)
    )


def texts(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def thinking_text(events: list[Event]) -> str:
    return "".join(
        e.delta.text
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, ThinkingDelta)
    )
