"""The field names of each AG-UI 1.0 event, from `@ag-ui/core`'s schemas.

The schemas accept unknown fields (`looseObject`): the tests check names here as well.
"""

from __future__ import annotations

from typing import Any

_BASE = {"timestamp", "rawEvent", "metadata", "subagentRunId"}
FIELDS: dict[str, tuple[set[str], set[str]]] = {
    "RUN_STARTED": ({"threadId", "runId"}, {"protocolVersion", "parentRunId", "input"}),
    "RUN_FINISHED": ({"threadId", "runId"}, {"result", "outcome", "usage"}),
    "RUN_ERROR": ({"message"}, {"code", "usage"}),
    "STEP_STARTED": ({"stepName"}, set()),
    "STEP_FINISHED": ({"stepName"}, set()),
    "TEXT_MESSAGE_START": ({"messageId"}, {"role", "name"}),
    "TEXT_MESSAGE_CONTENT": ({"messageId", "delta"}, set()),
    "TEXT_MESSAGE_END": ({"messageId"}, set()),
    "REASONING_START": ({"messageId"}, set()),
    "REASONING_MESSAGE_START": ({"messageId", "role"}, set()),
    "REASONING_MESSAGE_CONTENT": ({"messageId", "delta"}, set()),
    "REASONING_MESSAGE_END": ({"messageId"}, set()),
    "REASONING_END": ({"messageId"}, set()),
    "REASONING_ENCRYPTED_VALUE": ({"subtype", "entityId", "encryptedValue"}, set()),
    "TOOL_CALL_START": ({"toolCallId", "toolCallName"}, {"parentMessageId"}),
    "TOOL_CALL_ARGS": ({"toolCallId", "delta"}, set()),
    "TOOL_CALL_END": ({"toolCallId"}, set()),
    "TOOL_CALL_RESULT": ({"messageId", "toolCallId", "content"}, {"role"}),
    "MESSAGES_SNAPSHOT": ({"messages"}, set()),
    "CUSTOM": ({"name", "value"}, set()),
}
_OUTCOMES = {"success": {"pendingToolCallIds"}, "interrupt": {"interrupts"}, "cancelled": set()}
_INTERRUPT = {"id", "reason", "message", "toolCallId", "responseSchema", "expiresAt", "metadata"}
_USAGE = {
    "provider", "model", "inputTokens", "outputTokens", "totalTokens", "reasoningTokens",
    "cachedInputTokens", "cacheWriteInputTokens",
}  # fmt: skip


def check_event_fields(event: dict[str, Any]) -> None:
    """Fail on a missing required field or a field the protocol does not name."""
    required, optional = FIELDS[event["type"]]
    fields = set(event) - {"type"}
    assert required <= fields, f"{event['type']} lacks {required - fields}"
    unknown = fields - required - optional - _BASE
    assert not unknown, f"{event['type']} has unknown fields {unknown}"
    outcome = event.get("outcome")
    if outcome is not None:
        assert set(outcome) - {"type"} <= _OUTCOMES[outcome["type"]], outcome
        for interrupt in outcome.get("interrupts", []):
            assert set(interrupt) <= _INTERRUPT, interrupt
    for usage in event.get("usage", []):
        assert set(usage) <= _USAGE, usage
