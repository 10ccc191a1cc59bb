"""Helpers of the OpenAI Chat client tests (no tests here).

- `replay` / `collect`: run the real client against a `WireServer` answer, every wait bounded;
- `expected`: what a recording holds, read straight from its JSON (not through the client);
- `answer`: the same summary, from the events the client yielded;
- `check_invariants`: the event-model rules every stream must keep, failed ones included;
- `request_from_body`: a recorded request body read back into a neutral `Request`.

The provider-neutral parts are `support.streams`, bound here to `OpenAIChatClient`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    ErrorEvent,
    Event,
    InputJsonDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import (
    Message,
    Part,
    Request,
    SpecificTool,
    TextPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers import OpenAIChatClient
from llm_worker.providers._blocks import drive
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer
from support import streams
from support.recorded import load

API = "openai_chat"
TIMEOUT = streams.TIMEOUT
collect = streams.collect
API_KEY = "sk-test-chat-0123456789abcdef"


def client_for(
    server: WireServer, *, model: str = "gpt-test", prefix: str = "/v1", **options: Any
) -> OpenAIChatClient:
    options.setdefault("retry", RetryPolicy.disabled())
    options.setdefault("api_key", API_KEY)
    return OpenAIChatClient(model=model, base_url=server.base_url + prefix, **options)


async def replay(
    response: WireResponse, request: Request | None = None, **options: Any
) -> tuple[list[Event], Exception | None, WireServer]:
    """Serve one answer and stream it through a fresh client."""
    return await streams.replay(
        [response],
        lambda server: client_for(server, **options),
        request or Request([Message.user("hi")]),
    )


async def replay_sans_io(body: bytes) -> tuple[list[Event], Exception | None]:
    """The client's decoding path (SSE → mapper → emitter → drive), fed one byte at a time.

    The same code the HTTP path runs after the transport, without the per-write cost of a
    socket: byte-by-byte over real HTTP costs ~0.3 ms a byte here, so large recordings are
    checked at every split point this way (small ones also go bytewise over HTTP).
    """
    from llm_worker.providers.openai_chat import ChatStreamMapper

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(len(body)):
            yield body[i : i + 1]
            if i % 4096 == 0:
                await anyio.lowlevel.checkpoint()

    events: list[Event] = []
    error: Exception | None = None
    with anyio.fail_after(TIMEOUT):
        try:
            async for event in drive(chunks(), ChatStreamMapper(), provider=API):
                events.append(event)
        except Exception as exc:
            error = exc
    return events, error


recorded_response = partial(streams.recorded_response, API)


# --- a summary of an answer ----------------------------------------------------------------


@dataclass
class Call:
    id: str
    name: str
    input: Any


@dataclass
class Summary:
    text: str = ""
    thinking: str = ""
    calls: list[Call] = field(default_factory=lambda: [])
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    usage: UsageEvent = field(default_factory=UsageEvent)
    error: dict[str, Any] | None = None


# --- what a recording holds, read independently of the client ---------------------------

_STOP = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "content_filter": StopReason.CONTENT_FILTER,
}


def sse_payloads(body: str) -> list[tuple[str, str]]:
    """`(event type, data)` of each SSE event, split with plain string operations."""
    out: list[tuple[str, str]] = []
    for raw in body.replace("\r\n", "\n").split("\n\n"):
        lines = raw.split("\n")
        data = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
        kinds = [line[6:].strip() for line in lines if line.startswith("event:")]
        if data:
            out.append((kinds[-1] if kinds else "message", "\n".join(data)))
    return out


def chunks_of(body: str, content_type: str) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of a recorded body: SSE `data:` payloads, or one whole JSON answer."""
    if "json" in content_type:
        return [("message", json.loads(body))]
    return [(kind, json.loads(data)) for kind, data in sse_payloads(body) if data != "[DONE]"]


def expected(name: str) -> Summary:
    """Text, thinking, tool calls, stop reason, usage and error straight from a recording."""
    rec = load(API, name)["response"]
    return expected_from(rec["body"], rec["content_type"])


def expected_from(body: str, content_type: str = "text/event-stream") -> Summary:
    summary = Summary()
    calls: dict[int, dict[str, str]] = {}
    refused = False
    for kind, chunk in chunks_of(body, content_type):
        if kind == "error" or chunk.get("error"):
            summary.error = chunk.get("error") or chunk
            _read_usage(chunk, summary)
            break
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            summary.thinking += delta.get("reasoning_content") or delta.get("reasoning") or ""
            summary.text += delta.get("content") or ""
            if delta.get("refusal"):
                refused = True
                summary.text += delta["refusal"]
            for position, call in enumerate(delta.get("tool_calls") or []):
                slot = calls.setdefault(call.get("index", position), {"args": ""})
                slot.setdefault("id", call.get("id"))
                slot.setdefault("name", call["function"].get("name"))
                slot["args"] += call["function"].get("arguments") or ""
            if choice.get("finish_reason"):
                summary.raw_stop_reason = choice["finish_reason"]
        _read_usage(chunk, summary)
    summary.calls = [
        Call(c["id"], c["name"], json.loads(c["args"]) if c["args"] else {})
        for _, c in sorted(calls.items())
    ]
    if refused:
        summary.stop_reason = StopReason.REFUSAL
    elif summary.raw_stop_reason is not None:
        summary.stop_reason = _STOP.get(summary.raw_stop_reason, StopReason.OTHER)
    return summary


def _read_usage(chunk: dict[str, Any], summary: Summary) -> None:
    usage = chunk.get("usage") or (chunk.get("x_groq") or {}).get("usage")
    if not usage:
        return
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    summary.usage = UsageEvent(
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        total_tokens=usage.get("total_tokens"),
        cache_read_input_tokens=prompt.get("cached_tokens"),
        cache_creation_input_tokens=prompt.get("cache_write_tokens"),
        reasoning_tokens=completion.get("reasoning_tokens"),
        audio_input_tokens=prompt.get("audio_tokens"),
        audio_output_tokens=completion.get("audio_tokens"),
        accepted_prediction_tokens=completion.get("accepted_prediction_tokens"),
        rejected_prediction_tokens=completion.get("rejected_prediction_tokens"),
    )


# --- the same summary, from the client's events ------------------------------------------


def answer(events: list[Event]) -> Summary:
    """Text, thinking, tool calls, stop reason and final usage from the client's events."""
    summary = Summary()
    args: dict[int, str] = {}
    metas: dict[int, ToolUseMetadata] = {}
    for event in events:
        if isinstance(event, BlockStart) and isinstance(event.metadata, ToolUseMetadata):
            metas[event.index] = event.metadata
            args[event.index] = ""
        elif isinstance(event, BlockDelta):
            delta = event.delta
            if isinstance(delta, TextDelta):
                summary.text += delta.text
            elif isinstance(delta, ThinkingDelta):
                summary.thinking += delta.text
            elif isinstance(delta, InputJsonDelta):
                args[event.index] += delta.partial_json
        elif isinstance(event, BlockStop):
            summary.stop_reason = event.stop_reason
            summary.raw_stop_reason = event.raw_stop_reason
        elif isinstance(event, UsageEvent):
            summary.usage = summary.usage.updated(event)
        elif isinstance(event, ErrorEvent):
            summary.error = {"code": event.code, "message": event.message}
    summary.calls = [
        Call(meta.id, meta.name, json.loads(args[i]) if args[i] else {})
        for i, meta in sorted(metas.items())
        if any(isinstance(e, BlockStop) and e.index == i for e in events)
    ]
    return summary


# --- the rules of the event model ---------------------------------------------------------

_DELTAS = {**streams.deltas(), BlockType.TEXT: (TextDelta, CitationDelta)}  # no signatures


def check_invariants(events: list[Event], error: Exception | None) -> None:
    """The event-model rules (`support.streams.check_invariants`); no block carries a
    signature, and a complete answer may have no stop reason (some servers send no
    `finish_reason`, e.g. the snowflake_logprobs recording)."""
    streams.check_invariants(
        events, failed=error is not None, allowed=_DELTAS, reason_required=False
    )


# --- a recorded request body read back into a neutral Request -------------------------------

_REQUEST_FIELDS = {"messages", "model", "tools", "tool_choice", "max_completion_tokens"}
_REQUEST_FIELDS |= {"temperature", "stop", "stream", "stream_options"}


def request_from_body(body: dict[str, Any]) -> Request:
    """The neutral request whose Chat body is `body` (fields Chat has no neutral form for go
    through `options`)."""
    system, messages = _history(body["messages"])
    options = {k: v for k, v in body.items() if k not in _REQUEST_FIELDS}
    tools: list[ToolSpec] = []
    if all(t.get("type") == "function" for t in body.get("tools", [])):
        tools = [_tool_spec(t["function"]) for t in body.get("tools", [])]
    else:
        options["tools"] = body["tools"]  # provider tools (OpenRouter web search)
    if "stream_options" not in body:
        options["stream_options"] = None
    if body.get("stream") is not True:
        options["stream"] = body.get("stream")
    return Request(
        messages,
        system=system,
        tools=tools,
        tool_choice=_choice(body.get("tool_choice")),
        max_tokens=body.get("max_completion_tokens"),
        temperature=body.get("temperature"),
        stop_sequences=body.get("stop", []),
        options=options,
    )


def _history(raw: list[dict[str, Any]]) -> tuple[str | None, list[Message]]:
    system: str | None = None
    messages: list[Message] = []
    for item in raw:
        role, content = item["role"], item.get("content") or ""
        if role == "system":
            system = content
        elif role == "tool":
            result = ToolResultPart(item["tool_call_id"], content)
            if messages and messages[-1].role == "user" and messages[-1].tool_results:
                messages[-1].content.append(result)
            else:
                messages.append(Message("user", [result]))
        elif role == "user":
            texts = [content] if isinstance(content, str) else [p["text"] for p in item["content"]]
            messages.append(Message("user", [TextPart(t) for t in texts]))
        else:
            parts: list[Part] = [TextPart(content)] if content else []
            parts += [
                ToolUsePart(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in item.get("tool_calls", [])
            ]
            messages.append(Message("assistant", parts))
    return system, messages


def _tool_spec(function: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        function["name"],
        function.get("description", ""),
        function["parameters"],
        strict=bool(function.get("strict")),
    )


def _choice(raw: Any) -> ToolChoice | None:
    if isinstance(raw, dict):
        return SpecificTool(raw["function"]["name"])
    return raw


def normalized_body(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat body with equivalent spellings made equal: a missing assistant `content` is
    `null`, `strict: false` is no `strict`, tool-call arguments are compared parsed."""
    out = json.loads(json.dumps(body))
    for message in out["messages"]:
        if message["role"] == "assistant":
            message.setdefault("content", None)
            for call in message.get("tool_calls", []):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    for tool in out.get("tools", []):
        if tool.get("type") == "function" and tool["function"].get("strict") is False:
            del tool["function"]["strict"]
    return out
