"""A `ScriptedResponse` as the bytes Gemini's `streamGenerateContent?alt=sse` really sends.

Each text or thinking piece (`chunk_size` characters) is one chunk with one part, as Gemini
streams them; a part's `thoughtSignature` rides on its first piece; a tool call is one whole
`functionCall` part without an id (Gemini sends none); the last chunk carries `finishReason`
and `usageMetadata`. Events are framed with CRLF, as recorded from the real API. A response
with `fail_with` ends with Gemini's in-stream `error` object instead of a finish reason.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from llm_worker.errors import ProviderError
from llm_worker.events import StopReason, UsageEvent
from llm_worker.messages import Part, TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing._script import ScriptedResponse

__all__ = ("encode",)

_FINISH: Final = {
    StopReason.END_TURN: "STOP",
    StopReason.TOOL_USE: "STOP",
    StopReason.STOP_SEQUENCE: "STOP",
    StopReason.MAX_TOKENS: "MAX_TOKENS",
    StopReason.CONTENT_FILTER: "SAFETY",
    StopReason.MALFORMED_TOOL_CALL: "MALFORMED_FUNCTION_CALL",
}


def encode(response: ScriptedResponse, *, model: str) -> bytes:
    """The SSE body Gemini would stream for this answer.

    Args:
        response: The scripted answer (text, thinking and tool-call parts).
        model: The model name written in each chunk's `modelVersion`.

    Raises:
        ValueError: The answer holds something Gemini cannot stream (redacted thinking, a
            tool result).
    """
    chunks = [[p] for part in response.parts for p in _parts(part, response.chunk_size)]
    head: dict[str, Any] = {"modelVersion": model, "responseId": "scripted"}
    events = [_chunk(parts, head) for parts in chunks]
    if response.fail_with is not None:
        events.append({"error": _error(response.fail_with)})
    else:
        last = events[-1] if events else _chunk([], head)
        if not events:
            events.append(last)
        last["candidates"][0]["finishReason"] = _FINISH.get(
            response.resolved_stop_reason(), "OTHER"
        )
        last["usageMetadata"] = _usage(response.resolved_usage())
    return b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in events)


def _parts(part: Part, size: int) -> list[dict[str, Any]]:
    if isinstance(part, ToolUsePart):
        out: dict[str, Any] = {"functionCall": {"name": part.name, "args": part.input}}
        return [_signed(out, part.signature)]
    if isinstance(part, TextPart | ThinkingPart):
        if isinstance(part, ThinkingPart) and part.redacted is not None:
            raise ValueError("Gemini has no redacted thinking")
        pieces = [part.text[i : i + max(1, size)] for i in range(0, len(part.text), max(1, size))]
        parts: list[dict[str, Any]] = [{"text": piece} for piece in pieces or [""]]
        if isinstance(part, ThinkingPart):
            for piece in parts:
                piece["thought"] = True
        _signed(parts[0], part.signature)
        return parts
    raise ValueError("a tool result is not part of a Gemini answer")


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _chunk(parts: list[dict[str, Any]], head: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {"role": "model"}
    if parts:
        content["parts"] = parts
    return {"candidates": [{"content": content, "index": 0}], **head}


def _usage(usage: UsageEvent) -> dict[str, Any]:
    prompt = usage.input_tokens or 0
    thoughts = usage.reasoning_tokens
    output = usage.output_tokens or 0
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output - (thoughts or 0),
        "totalTokenCount": usage.total_tokens
        if usage.total_tokens is not None
        else prompt + output,
    }
    if thoughts is not None:
        out["thoughtsTokenCount"] = thoughts
    if usage.cache_read_input_tokens is not None:
        out["cachedContentTokenCount"] = usage.cache_read_input_tokens
    return out


def _error(error: ProviderError) -> dict[str, Any]:
    return {
        "code": error.status_code or 500,
        "message": error.message,
        "status": error.error_type or "INTERNAL",
    }
