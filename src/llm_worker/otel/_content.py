"""Messages in the conventions' content form (`gen_ai.input.messages` and its kin), as JSON.

Only built when `capture_content=True`, and each attribute cut to the instrumentation's
`content_max_chars` (`captured`). Parts the conventions have no type for (a provider's
opaque continuation data, a thinking block's signature) are left out: they are not content
a person reads, and a signature is bulky.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from llm_worker.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.otel._names import TRUNCATED

__all__ = (
    "as_json",
    "captured",
    "input_messages",
    "output_messages",
    "system_instructions",
)


def as_json(value: object) -> str:
    """`value` as compact JSON text (what a span attribute holds)."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        # orjson refuses lone surrogates (a file name `os.fsdecode` escaped, a model's `\\ud800`)
        # and integers past 64 bits; tracing must never fail the run it observes.
        return json.dumps(value, default=str, separators=(",", ":"))


def captured(name: str, text: str, cap: int) -> dict[str, Any]:
    """The content attribute `name`, cut to `cap` characters if it is longer.

    A cut value ends with a marker that gives its length before the cut, and an attribute
    `llm_worker.truncated.<name>` holds that length: a 50 MB tool output stays a bounded
    attribute, and a reader of the trace sees that more was there.
    """
    if len(text) <= cap:
        return {name: text}
    marker = f"…[truncated: {len(text)} chars]"
    return {name: text[: cap - len(marker)] + marker, TRUNCATED + name: len(text)}


def input_messages(messages: list[Message]) -> str:
    """The request's messages: a tool result's message has the role `tool`."""
    return as_json([_message(m) for m in messages])


def output_messages(message: Message, finish_reason: str) -> str:
    """The answer, with its finish reason."""
    return as_json([_message(message) | {"finish_reason": finish_reason}])


def system_instructions(system: str) -> str:
    """The system prompt as the conventions' parts."""
    return as_json([{"type": "text", "content": system}])


def _message(message: Message) -> dict[str, Any]:
    parts = [p for p in (_part(part) for part in message.content) if p is not None]
    tool = bool(message.content) and all(isinstance(p, ToolResultPart) for p in message.content)
    return {"role": "tool" if tool else message.role, "parts": parts}


def _part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ThinkingPart):
        return {"type": "reasoning", "content": part.text}
    if isinstance(part, ToolUsePart):
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.input}
    if isinstance(part, ToolResultPart):
        return {"type": "tool_call_response", "id": part.tool_use_id, "response": part.content}
    return None
