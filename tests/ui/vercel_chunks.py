"""The field names of each UI message chunk, from `uiMessageChunkSchema` of `ai` 6.x.

The schema accepts unknown fields (`looseObject`), so a misspelled optional field would pass
it unnoticed: the tests check every chunk's fields against this table as well.
"""

from __future__ import annotations

from typing import Any

_META = {"providerMetadata"}
_TOOL = {"providerExecuted", "providerMetadata", "toolMetadata", "dynamic", "title"}
# type -> (required fields, optional fields)
FIELDS: dict[str, tuple[set[str], set[str]]] = {
    "text-start": ({"id"}, _META),
    "text-delta": ({"id", "delta"}, _META),
    "text-end": ({"id"}, _META),
    "reasoning-start": ({"id"}, _META),
    "reasoning-delta": ({"id", "delta"}, _META),
    "reasoning-end": ({"id"}, _META),
    "error": ({"errorText"}, set()),
    "tool-input-start": ({"toolCallId", "toolName"}, {"inputEncoding", *_TOOL}),
    "tool-input-delta": ({"toolCallId", "inputTextDelta"}, set()),
    "tool-input-available": ({"toolCallId", "toolName", "input"}, _TOOL),
    "tool-input-error": ({"toolCallId", "toolName", "input", "errorText"}, _TOOL),
    "tool-approval-request": (
        {"approvalId", "toolCallId"},
        {"approvalDescriptor", "inputSchemaInput", "signature"},
    ),
    "tool-output-available": ({"toolCallId", "output"}, {"preliminary", *_TOOL}),
    "tool-output-error": ({"toolCallId", "errorText"}, _TOOL),
    "tool-output-denied": ({"toolCallId"}, set()),
    "start-step": (set(), set()),
    "finish-step": (set(), set()),
    "start": (set(), {"messageId", "messageMetadata"}),
    "finish": (set(), {"finishReason", "messageMetadata"}),
    "abort": (set(), {"reason"}),
    "message-metadata": ({"messageMetadata"}, set()),
}


def check_chunk_fields(chunk: dict[str, Any]) -> None:
    """Fail on a chunk with a missing required field or a field the protocol does not have."""
    kind = chunk["type"]
    if kind.startswith("data-"):
        extra = set(chunk) - {"type", "id", "data", "transient"}
        assert "data" in chunk, chunk
        assert not extra, f"{kind} has unknown fields {extra}"
        return
    required, optional = FIELDS[kind]
    fields = set(chunk) - {"type"}
    assert required <= fields, f"{kind} lacks {required - fields}: {chunk}"
    assert fields <= required | optional, (
        f"{kind} has unknown fields {fields - required - optional}"
    )
