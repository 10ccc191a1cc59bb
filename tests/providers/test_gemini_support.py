"""Helpers of the Gemini client tests (no tests here).

- `replay` / `collect`: run the real client against a `WireServer` answer, every wait bounded;
- `recorded_chunks` / `expected`: what a recording holds, read with the standard `json`
  module straight from the recorded body (not through the client);
- `answer`: the same summary, from the events the client yielded;
- `assemble`: the assistant `Message` those events make (for the multi-turn request checks);
- `check_invariants`: the event-model rules every stream must keep.

The provider-neutral parts are `support.streams`, bound here to `GeminiClient`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    Delta,
    Event,
    InputJsonDelta,
    ProviderMetadata,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Message, Request
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import WireResponse, WireServer
from support import streams
from support.recorded import load

API = "gemini"
TIMEOUT = streams.TIMEOUT
collect = streams.collect
assemble = streams.assemble
KEY = "gemini-test-key-0123456789"
FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}


def client_for(server: WireServer, model: str = "gemini-2.5-flash", **options: Any) -> GeminiClient:
    options.setdefault("retry", RetryPolicy.disabled())
    return GeminiClient(model=model, api_key=KEY, base_url=server.base_url + "/v1beta", **options)


def user_request(text: str = "hello") -> Request:
    return Request([Message.user(text)])


async def replay(
    *responses: WireResponse, request: Request | None = None, **options: Any
) -> tuple[list[Event], Exception | None, WireServer]:
    """Serve the answers in turn (retries take the next) to one request of a fresh client."""
    return await streams.replay(
        responses, lambda server: client_for(server, **options), request or user_request()
    )


async def replay_bytewise(response: WireResponse) -> tuple[list[Event], Exception | None]:
    """The real client reading the body one byte per read (SSE or JSON-array framing)."""
    return await streams.replay_bytewise(
        response,
        lambda http: GeminiClient(
            model="gemini-2.5-flash",
            api_key=KEY,
            base_url="http://gemini.test/v1beta",
            http_client=http,
            retry=RetryPolicy.disabled(),
        ),
        user_request(),
    )


def recording_response(name: str, **options: Any) -> WireResponse:
    """The recorded answer as the server sends it (status, content type, body)."""
    return streams.recorded_response(API, name, **options)


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
    provider: list[dict[str, Any]] = field(default_factory=lambda: [])
    citations: list[dict[str, Any]] = field(default_factory=lambda: [])
    finish: str | None = None
    usage: UsageEvent = field(default_factory=UsageEvent)


def _kind(part: dict[str, Any]) -> str | None:
    if "functionCall" in part:
        return "tool_use"
    if "text" not in part:
        # executableCode, codeExecutionResult, …: kept whole (a bare signature holds nothing).
        return "provider" if set(part) - {"thought", "thoughtSignature"} else None
    if not part["text"] and "thoughtSignature" not in part:
        return None  # an empty text part carries nothing
    return "thinking" if part.get("thought") else "text"


def expected(name: str) -> Answer:
    """The answer of a recording, read from its JSON (candidate 0, last usage)."""
    out = Answer()
    signed_last = False
    usage: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for chunk in recorded_chunks(load(API, name)["response"]["body"]):
        usage = chunk.get("usageMetadata", usage)
        for candidate in chunk.get("candidates", []):
            _add_metadata(metadata, candidate)
            for part in candidate.get("content", {}).get("parts", []):
                kind = _kind(part)
                if kind is None:
                    continue
                if kind == "provider":
                    out.blocks.append(kind)  # the whole part, its signature inside
                    out.provider.append(part)
                    signed_last = False
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
    out.citations = _expected_citations(metadata.get("groundingMetadata", {}))
    if metadata:
        out.blocks.append("provider")  # grounding / URL context, after the content
        out.provider.append(metadata)
    out.usage = _expected_usage(usage)
    return out


def _add_metadata(metadata: dict[str, Any], candidate: dict[str, Any]) -> None:
    # The newest non-empty value of each grounding key; URL context merged.
    for key, value in candidate.get("groundingMetadata", {}).items():
        if value:
            metadata.setdefault("groundingMetadata", {})[key] = value
    if candidate.get("urlContextMetadata"):
        metadata.setdefault("urlContextMetadata", {}).update(candidate["urlContextMetadata"])


def _expected_citations(grounding: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = grounding.get("groundingChunks", [])
    return [
        {"groundingSupport": support, "groundingChunk": chunks[n]}
        for support in grounding.get("groundingSupports", [])
        for n in support["groundingChunkIndices"]
    ]


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
            name = _started(event, out) or name
            pieces = []
        elif isinstance(event, BlockDelta):
            _add_delta(event.delta, out, pieces)
        elif isinstance(event, BlockStop):
            if event.block_type is BlockType.TOOL_USE:
                out.calls.append((name, json.loads("".join(pieces))))
            if event.stop_reason is not None:
                out.finish = event.raw_stop_reason
        elif isinstance(event, UsageEvent):
            out.usage = out.usage.updated(event)
    return out


def _add_delta(delta: Delta, out: Answer, pieces: list[str]) -> None:
    if isinstance(delta, TextDelta):
        out.text += delta.text
    elif isinstance(delta, ThinkingDelta):
        out.thinking += delta.text
    elif isinstance(delta, SignatureDelta):
        out.signatures.append(delta.signature)
    elif isinstance(delta, InputJsonDelta):
        pieces.append(delta.partial_json)
    elif isinstance(delta, CitationDelta):
        out.citations.append(delta.citation.data)


def _started(event: BlockStart, out: Answer) -> str | None:
    """Record a block's start; the called function's name for a tool-use block."""
    out.blocks.append(event.block_type.value)
    if isinstance(event.metadata, ProviderMetadata):
        out.provider.append(event.metadata.data)
    return event.metadata.name if isinstance(event.metadata, ToolUseMetadata) else None


# A thoughtSignature may ride on any part; text blocks may carry citations.
_DELTAS = {
    **streams.deltas(signed=BlockType),
    BlockType.TEXT: (TextDelta, SignatureDelta, CitationDelta),
}


def check_invariants(events: list[Event], error: Exception | None) -> None:
    """The rules of the event model (`support.streams.check_invariants`), for a finished
    stream; usage snapshots (one per network read) are never repeated unchanged."""
    streams.check_invariants(events, failed=error is not None, allowed=_DELTAS)
    usages = [e for e in events if isinstance(e, UsageEvent)]
    for before, after in pairwise(usages):
        assert after != before, "an unchanged usage snapshot was repeated"
