"""Helpers of the Gemini client tests (no tests here).

- `replay` / `collect`: run the real client against a `WireServer` answer, every wait bounded;
- `recorded_chunks` / `expected`: what a recording holds, read with the standard `json`
  module straight from the recorded body (not through the client);
- `answer`: the same summary, from the events the client yielded;
- `assemble`: the assistant `Message` those events make (for the multi-turn request checks);
- `check_invariants`: the event-model rules every stream must keep.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

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
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Message, Origin, Part, Request, TextPart, ThinkingPart, ToolUsePart
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import WireResponse, WireServer
from support.recorded import load

API = "gemini"
TIMEOUT = 30.0
KEY = "gemini-test-key-0123456789"
FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}


def client_for(server: WireServer, model: str = "gemini-2.5-flash", **options: Any) -> GeminiClient:
    options.setdefault("retry", RetryPolicy.disabled())
    return GeminiClient(model=model, api_key=KEY, base_url=server.base_url + "/v1beta", **options)


def user_request(text: str = "hello") -> Request:
    return Request([Message.user(text)])


async def collect(client: GeminiClient, request: Request) -> tuple[list[Event], Exception | None]:
    """Every event of one stream, and the exception that ended it (if any)."""
    events: list[Event] = []
    error: Exception | None = None
    with anyio.fail_after(TIMEOUT):
        try:
            async for event in client.stream(request):
                events.append(event)
        except Exception as exc:
            error = exc
    return events, error


async def replay(
    *responses: WireResponse, request: Request | None = None, **options: Any
) -> tuple[list[Event], Exception | None, WireServer]:
    """Serve the answers in turn (retries take the next) to one request of a fresh client."""
    async with WireServer(responses) as server:
        client = client_for(server, **options)
        try:
            events, error = await collect(client, request or user_request())
        finally:
            await client.aclose()
    return events, error, server


class _OneByteAtATime(httpx.AsyncByteStream):
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(len(self._body)):
            yield self._body[i : i + 1]


async def replay_bytewise(response: WireResponse) -> tuple[list[Event], Exception | None]:
    """The real client reading the body one byte per read, through an in-process transport.

    The same code path as over a socket (transport, SSE or JSON-array framing, mapper) at a
    fraction of the cost: a socket write per byte makes large recordings take seconds.
    """

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": response.content_type}
        stream = _OneByteAtATime(response.body_bytes())
        return httpx.Response(response.status, headers=headers, stream=stream)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = GeminiClient(
            model="gemini-2.5-flash",
            api_key=KEY,
            base_url="http://gemini.test/v1beta",
            http_client=http,
            retry=RetryPolicy.disabled(),
        )
        return await collect(client, user_request())


def recording_response(name: str, **options: Any) -> WireResponse:
    """The recorded answer as the server sends it (status, content type, body)."""
    response = load(API, name)["response"]
    return WireResponse(
        response["body"],
        status=response["status"],
        content_type=response["content_type"],
        **options,
    )


def recorded_model(name: str) -> str:
    """The model named in the recording's URL path."""
    path: str = load(API, name)["request"]["url_path"]
    return path.rsplit("/models/", 1)[1].split(":", 1)[0]


def recorded_chunks(body: str) -> list[dict[str, Any]]:
    """The `GenerateContentResponse` chunks of a recorded body: SSE, JSON array or one object."""
    text = body.strip()
    if text.startswith("["):
        return list(json.loads(text))
    if text.startswith("{"):
        return [json.loads(text)]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


@dataclass
class Answer:
    """What one answer holds, comparable between a recording and a client's events."""

    blocks: list[str] = field(default_factory=lambda: [])
    text: str = ""
    thinking: str = ""
    signatures: list[str] = field(default_factory=lambda: [])
    calls: list[tuple[str, Any]] = field(default_factory=lambda: [])
    finish: str | None = None
    usage: UsageEvent = field(default_factory=UsageEvent)


def _kind(part: dict[str, Any]) -> str | None:
    if "functionCall" in part:
        return "tool_use"
    if "text" not in part:
        return None  # executableCode, codeExecutionResult, …: not in the event model
    if not part["text"] and "thoughtSignature" not in part:
        return None  # an empty text part carries nothing
    return "thinking" if part.get("thought") else "text"


def expected(name: str) -> Answer:
    """The answer of a recording, read from its JSON (candidate 0, last usage)."""
    out = Answer()
    signed_last = False
    usage: dict[str, Any] = {}
    for chunk in recorded_chunks(load(API, name)["response"]["body"]):
        usage = chunk.get("usageMetadata", usage)
        for candidate in chunk.get("candidates", []):
            for part in candidate.get("content", {}).get("parts", []):
                kind = _kind(part)
                if kind is None:
                    continue
                signature = part.get("thoughtSignature")
                # Calls are whole blocks; a second signature also opens a new block.
                if (
                    kind == "tool_use"
                    or not out.blocks
                    or out.blocks[-1] != kind
                    or (signature and signed_last)
                ):
                    out.blocks.append(kind)
                    signed_last = False
                if signature:
                    out.signatures.append(signature)
                    signed_last = True
                if kind == "tool_use":
                    call = part["functionCall"]
                    out.calls.append((call["name"], call.get("args", {})))
                elif kind == "thinking":
                    out.thinking += part["text"]
                else:
                    out.text += part["text"]
            out.finish = candidate.get("finishReason", out.finish)
    if not out.blocks and out.finish is not None and out.finish not in FILTERED:
        out.blocks.append("text")  # an answer with no content still gets a (empty) block
    out.usage = _expected_usage(usage)
    return out


def _expected_usage(usage: dict[str, Any]) -> UsageEvent:
    def total(*keys: str) -> int | None:
        values = [usage[k] for k in keys if k in usage]
        return sum(values) if values else None

    return UsageEvent(
        input_tokens=total("promptTokenCount", "toolUsePromptTokenCount"),
        output_tokens=total("candidatesTokenCount", "thoughtsTokenCount"),
        total_tokens=usage.get("totalTokenCount"),
        cache_read_input_tokens=usage.get("cachedContentTokenCount"),
        reasoning_tokens=usage.get("thoughtsTokenCount"),
    )


def answer(events: list[Event]) -> Answer:
    """The answer the client's events carry."""
    out = Answer()
    pieces: list[str] = []
    name = ""
    for event in events:
        if isinstance(event, BlockStart):
            out.blocks.append(event.block_type.value)
            pieces = []
            if isinstance(event.metadata, ToolUseMetadata):
                name = event.metadata.name
        elif isinstance(event, BlockDelta):
            delta = event.delta
            if isinstance(delta, TextDelta):
                out.text += delta.text
            elif isinstance(delta, ThinkingDelta):
                out.thinking += delta.text
            elif isinstance(delta, SignatureDelta):
                out.signatures.append(delta.signature)
            else:
                pieces.append(delta.partial_json)
        elif isinstance(event, BlockStop):
            if event.block_type is BlockType.TOOL_USE:
                out.calls.append((name, json.loads("".join(pieces))))
            if event.stop_reason is not None:
                out.finish = event.raw_stop_reason
        elif isinstance(event, UsageEvent):
            out.usage = out.usage.updated(event)
    return out


def assemble(events: list[Event], origin: Origin) -> Message:
    """The assistant message of a finished stream, opaque data and origin included."""
    parts: list[Part] = []
    start: BlockStart | None = None
    pieces: list[str] = []
    signature: str | None = None
    for event in events:
        if isinstance(event, BlockStart):
            start, pieces, signature = event, [], None
        elif isinstance(event, BlockDelta):
            if isinstance(event.delta, SignatureDelta):
                signature = event.delta.signature
            elif isinstance(event.delta, InputJsonDelta):
                pieces.append(event.delta.partial_json)
            else:
                pieces.append(event.delta.text)
        elif isinstance(event, BlockStop) and start is not None:
            parts.append(_part(start, "".join(pieces), signature, origin))
    return Message("assistant", parts)


def _part(start: BlockStart, text: str, signature: str | None, origin: Origin) -> Part:
    signed = origin if signature else None
    meta = start.metadata
    if isinstance(meta, ToolUseMetadata):
        return ToolUsePart(meta.id, meta.name, json.loads(text), signature=signature, origin=signed)
    if start.block_type is BlockType.THINKING:
        return ThinkingPart(text, signature=signature, origin=signed)
    return TextPart(text, signature=signature, origin=signed)


_DELTAS: dict[BlockType, type] = {
    BlockType.TEXT: TextDelta,
    BlockType.THINKING: ThinkingDelta,
    BlockType.TOOL_USE: InputJsonDelta,
}


def check_invariants(events: list[Event], error: Exception | None) -> None:
    """The rules of the event model (see `llm_worker.events`), for a finished stream."""
    open_block: BlockStart | None = None
    next_index = 0
    stops: list[BlockStop] = []
    last_usage: UsageEvent | None = None
    for event in events:
        if isinstance(event, BlockStart):
            assert open_block is None, f"block {event.index} starts while another is open"
            assert event.index == next_index
            open_block, next_index = event, next_index + 1
        elif isinstance(event, BlockDelta):
            assert open_block is not None and event.index == open_block.index
            allowed = (_DELTAS[open_block.block_type], SignatureDelta)
            assert isinstance(event.delta, allowed), (open_block.block_type, event.delta)
        elif isinstance(event, BlockStop | BlockAbort):
            assert open_block is not None and event.index == open_block.index
            assert event.block_type is open_block.block_type
            open_block = None
            if isinstance(event, BlockStop):
                stops.append(event)
        elif isinstance(event, UsageEvent):
            assert event != last_usage, "an unchanged usage snapshot was repeated"
            last_usage = event
    assert open_block is None, "a block was left open"
    with_reason = [s for s in stops if s.stop_reason is not None]
    if error is None:
        assert events[0] == StatusEvent(ResponseStatus.STARTED)
        assert events[-1] == StatusEvent(ResponseStatus.COMPLETED)
        assert len(with_reason) == 1 and with_reason[0] is stops[-1], "stop reason not on last"
    else:
        assert events[-1] == StatusEvent(ResponseStatus.FAILED)
        assert isinstance(events[-2], ErrorEvent)
        assert not with_reason, "a failed answer must not look finished"
