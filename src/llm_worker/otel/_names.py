"""The GenAI semantic conventions' names this instrumentation emits, and a few of its own.

From the OpenTelemetry semantic conventions 1.41 GenAI spans and metrics (as shipped in
`opentelemetry-semantic-conventions` 0.66b2): `gen_ai.provider.name` (not the older
`gen_ai.system`), `gen_ai.input.messages` / `gen_ai.output.messages` as JSON in the
conventions' parts form. Names under `llm_worker.` are this library's own additions.
"""

from __future__ import annotations

from typing import Final

from llm_worker.events import StopReason

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_STOP: Final = "gen_ai.request.stop_sequences"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION: Final = "gen_ai.usage.cache_creation.input_tokens"
REASONING: Final = "gen_ai.usage.reasoning.output_tokens"
TOKEN_TYPE: Final = "gen_ai.token.type"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
ERROR_TYPE: Final = "error.type"

TOKEN_USAGE: Final = "gen_ai.client.token.usage"
DURATION: Final = "gen_ai.client.operation.duration"
FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"

# This library's own.
RUN_STATUS: Final = "llm_worker.run.status"
RUN_REQUESTS: Final = "llm_worker.run.requests"
REQUEST_REPLAYED: Final = "llm_worker.request.replayed"
ANSWER_PROVIDER: Final = "llm_worker.answer.provider"  # a fallback client's answering client
ANSWER_MODEL: Final = "llm_worker.answer.model"
TOOL_OUTCOME: Final = "llm_worker.tool.outcome"
BLOB_ID: Final = "llm_worker.blob.id"
HOOK_EVENT: Final = "llm_worker.hook"
RETRY_EVENT: Final = "llm_worker.retry"
COMPACTED_EVENT: Final = "llm_worker.context.compacted"
# Followed by a content attribute's name: the characters it had before it was cut.
TRUNCATED: Final = "llm_worker.truncated."
CONTENT_MAX_CHARS: Final = 16_384  # the default cap on each captured attribute, in characters
CONTENT_MIN_CHARS: Final = 64  # room for the marker a cut value ends with

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.41.0"

# The conventions' bucket boundaries for the two client histograms.
TOKEN_BUCKETS: Final = [4**n for n in range(14)]
SECOND_BUCKETS: Final = [0.01 * 2**n for n in range(14)]

_PROVIDERS: Final = {
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "openai_responses": "openai",
    "gemini": "gcp.gemini",
}

_FINISH: Final = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.TOOL_USE: "tool_call",
    StopReason.CONTENT_FILTER: "content_filter",
    StopReason.REFUSAL: "content_filter",
}


def provider_name(provider: str) -> str:
    """The conventions' `gen_ai.provider.name` for one of our client's provider names."""
    return _PROVIDERS.get(provider, provider)


def finish_reason(reason: StopReason | None) -> str:
    """The conventions' finish reason (`stop`, `length`, `tool_call`, …) for a stop reason."""
    if reason is None:
        return "error"
    return _FINISH.get(reason, reason.value)
