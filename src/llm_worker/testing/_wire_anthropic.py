"""A `ScriptedResponse` as the bytes Anthropic's streamed `POST /v1/messages` really sends.

The shape follows the recordings: `message_start` (usage with the cached tokens apart), a
`ping` after the first block starts, then per part `content_block_start` /
`content_block_delta`* / `content_block_stop`, then `message_delta` (stop reason, usage) and
`message_stop`. Text and thinking are streamed in `chunk_size` pieces; a thinking part's
`signature` arrives as one `signature_delta` after its text; redacted thinking is one
`redacted_thinking` block; a tool call starts with `input: {}` and streams its JSON in
`input_json_delta` pieces (a call without arguments gets one empty fragment, as the API
sends). A response with `fail_with` breaks inside its last block: an `event: error` comes
where that block's `content_block_stop` would have.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from llm_worker.errors import ProviderError
from llm_worker.events import StopReason, UsageEvent
from llm_worker.messages import Part, TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing._script import ScriptedResponse

__all__ = ("encode",)

_STOP: Final = {
    StopReason.END_TURN: "end_turn",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.TOOL_USE: "tool_use",
    StopReason.PAUSE_TURN: "pause_turn",
    StopReason.REFUSAL: "refusal",
    StopReason.COMPACTION: "compaction",
}


def encode(response: ScriptedResponse, *, model: str) -> bytes:
    """The SSE body Anthropic would stream for this answer.

    Args:
        response: The scripted answer (text, thinking, redacted thinking and tool-call parts).
        model: The model name written in `message_start`.

    Raises:
        ValueError: The answer holds something Anthropic cannot stream (a tool result, a
            Gemini-style signature on text or a tool call, a stop reason it has no name for).
    """
    out: list[bytes] = []
    usage = response.resolved_usage()
    _event(out, "message_start", message=_message(model, usage))
    parts = response.with_ids(0)
    for index, part in enumerate(parts):
        _block(out, index, part, response.chunk_size)
        if index == 0:
            _event(out, "ping")
        if response.fail_with is None or index < len(parts) - 1:
            _event(out, "content_block_stop", index=index)
    if response.fail_with is not None:
        _event(out, "error", error=_error(response.fail_with))
        return b"".join(out)
    stop = response.resolved_stop_reason()
    if stop not in _STOP:
        raise ValueError(f"Anthropic has no stop reason for {stop}")
    delta = {"stop_reason": _STOP[stop], "stop_sequence": None}
    _event(out, "message_delta", delta=delta, usage=_usage(usage))
    _event(out, "message_stop")
    return b"".join(out)


def _event(out: list[bytes], kind: str, **fields: Any) -> None:
    data = orjson.dumps({"type": kind, **fields})
    out.append(b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n")


def _message(model: str, usage: UsageEvent) -> dict[str, Any]:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_usage(usage), "output_tokens": 1},
    }


def _usage(usage: UsageEvent) -> dict[str, Any]:
    # Anthropic counts cached prompt tokens apart from input_tokens; the event model adds
    # them back, so they are taken out here.
    read = usage.cache_read_input_tokens or 0
    created = usage.cache_creation_input_tokens or 0
    out: dict[str, Any] = {
        "input_tokens": max(0, (usage.input_tokens or 0) - read - created),
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
        "output_tokens": usage.output_tokens or 0,
    }
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out


def _block(out: list[bytes], index: int, part: Part, size: int) -> None:
    if isinstance(part, TextPart):
        if part.signature is not None:
            raise ValueError("Anthropic text blocks carry no signature")
        _event(out, "content_block_start", index=index, content_block={"type": "text", "text": ""})
        for piece in _pieces(part.text, size):
            _delta(out, index, type="text_delta", text=piece)
    elif isinstance(part, ThinkingPart):
        _thinking(out, index, part, size)
    elif isinstance(part, ToolUsePart):
        if part.signature is not None:
            raise ValueError("Anthropic tool calls carry no signature")
        block: dict[str, Any] = {"type": "tool_use", "id": part.id, "name": part.name, "input": {}}
        _event(out, "content_block_start", index=index, content_block=block)
        arguments = orjson.dumps(part.input).decode() if part.input else ""
        for piece in _pieces(arguments, size) or [""]:
            _delta(out, index, type="input_json_delta", partial_json=piece)
    else:
        raise ValueError("a tool result is not part of an Anthropic answer")


def _thinking(out: list[bytes], index: int, part: ThinkingPart, size: int) -> None:
    if part.redacted is not None:
        block: dict[str, Any] = {"type": "redacted_thinking", "data": part.redacted}
        _event(out, "content_block_start", index=index, content_block=block)
        return
    block = {"type": "thinking", "thinking": "", "signature": ""}
    _event(out, "content_block_start", index=index, content_block=block)
    for piece in _pieces(part.text, size):
        _delta(out, index, type="thinking_delta", thinking=piece)
    if part.signature is not None:
        _delta(out, index, type="signature_delta", signature=part.signature)


def _delta(out: list[bytes], index: int, **delta: Any) -> None:
    _event(out, "content_block_delta", index=index, delta=delta)


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _error(error: ProviderError) -> dict[str, Any]:
    return {"type": error.error_type or "api_error", "message": error.message}
