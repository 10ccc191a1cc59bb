"""The attributes of the request, response and tool spans, built from the Worker's values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import llm_worker.otel._names as n
from llm_worker.errors import ProviderError
from llm_worker.otel._content import (
    as_json,
    captured,
    input_messages,
    output_messages,
    system_instructions,
)

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.events import UsageEvent
    from llm_worker.messages import Request
    from llm_worker.providers._base import LLMClient
    from llm_worker.tools import Tool, ToolResult
    from llm_worker.worker._assembler import Assembler

__all__ = (
    "answered_by",
    "error_type",
    "request_attributes",
    "response_attributes",
    "tool_attributes",
    "tool_result_attributes",
    "usage_attributes",
)


def error_type(exc: BaseException) -> str:
    """`error.type`: the provider's error type where it gave one, else the exception's class."""
    if isinstance(exc, ProviderError) and exc.error_type:
        return exc.error_type
    return type(exc).__name__


def request_attributes(client: LLMClient, request: Request, content: int | None) -> dict[str, Any]:
    """A `chat` span's attributes at its start.

    `content` caps each captured attribute, in characters (`None`: content is not captured);
    likewise below.
    """
    attributes: dict[str, Any] = {
        n.OPERATION: "chat",
        n.PROVIDER: n.provider_name(client.provider),
        n.REQUEST_MODEL: client.model,
    }
    if request.max_tokens is not None:
        attributes[n.REQUEST_MAX_TOKENS] = request.max_tokens
    if request.temperature is not None:
        attributes[n.REQUEST_TEMPERATURE] = request.temperature
    if request.stop_sequences:
        attributes[n.REQUEST_STOP] = list(request.stop_sequences)
    if content is not None:
        attributes |= captured(n.INPUT_MESSAGES, input_messages(request.messages), content)
        if request.system:
            system = system_instructions(request.system)
            attributes |= captured(n.SYSTEM_INSTRUCTIONS, system, content)
    return attributes


def response_attributes(answer: Assembler, content: int | None) -> dict[str, Any]:
    """A `chat` span's attributes once the answer is in."""
    finish = n.finish_reason(answer.stop_reason)
    attributes = usage_attributes(answer.usage)
    attributes[n.FINISH_REASONS] = [finish]
    if answer.model:
        attributes[n.RESPONSE_MODEL] = answer.model
    if answer.response_id:
        attributes[n.RESPONSE_ID] = answer.response_id
    if content is not None:
        output = output_messages(answer.message, finish)
        attributes |= captured(n.OUTPUT_MESSAGES, output, content)
    return attributes


def answered_by(answer: Assembler) -> dict[str, Any]:
    """A `chat` span's attributes naming the client that answered, when not the one asked.

    A `FallbackClient` answers from a later client when the first fails: the span keeps the
    first as `gen_ai.provider.name` / `gen_ai.request.model` (what was asked) and names the
    one that answered.
    """
    origin = answer.origin
    return {
        n.ANSWER_PROVIDER: n.provider_name(origin.provider),
        n.ANSWER_MODEL: origin.model,
        n.RESPONSE_MODEL: answer.model or origin.model,
    }


def usage_attributes(usage: UsageEvent) -> dict[str, Any]:
    """The token counts the usage has (a span's `gen_ai.usage.*`)."""
    counts = (
        (n.INPUT_TOKENS, usage.input_tokens),
        (n.OUTPUT_TOKENS, usage.output_tokens),
        (n.CACHE_READ, usage.cache_read_input_tokens),
        (n.CACHE_CREATION, usage.cache_creation_input_tokens),
        (n.REASONING, usage.reasoning_tokens),
    )
    return {name: count for name, count in counts if count is not None}


def tool_attributes(call: ToolCall, tool: Tool | None, content: int | None) -> dict[str, Any]:
    """An `execute_tool` span's attributes at its start."""
    attributes: dict[str, Any] = {
        n.OPERATION: "execute_tool",
        n.TOOL_NAME: call.name,
        n.TOOL_CALL_ID: call.id,
        n.TOOL_TYPE: "function",
    }
    if tool is not None:
        attributes[n.TOOL_DESCRIPTION] = tool.description
    if content is not None:
        attributes |= captured(n.TOOL_ARGUMENTS, as_json(call.input), content)
    return attributes


def tool_result_attributes(result: ToolResult, content: int | None) -> dict[str, Any]:
    """An `execute_tool` span's attributes once its result is in."""
    from llm_worker.blobs import StoredOutput

    attributes: dict[str, Any] = {n.TOOL_OUTCOME: "error" if result.is_error else "done"}
    if result.is_error:
        failure = result.exception
        attributes[n.ERROR_TYPE] = type(failure).__name__ if failure else "tool_error"
    if isinstance(result.output, StoredOutput):
        attributes[n.BLOB_ID] = result.output.blob_id
    if content is not None:
        attributes |= captured(n.TOOL_RESULT, result.content, content)
    return attributes
