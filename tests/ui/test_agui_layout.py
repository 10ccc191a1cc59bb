"""AG-UI: the layout the encoder writes at a step's end is the one `messages_to_agui` writes."""

from __future__ import annotations

import pytest

from llm_worker.messages import (
    Message,
    Origin,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolUsePart,
)
from llm_worker.ui._agui_messages import layout_of, messages_to_agui

ORIGIN = Origin("scripted", "scripted-model")

_PARTS: list[Part] = [
    ThinkingPart("a thought", signature="sig-1", origin=ORIGIN),
    TextPart("shown text", signature="sig-2", item_id="it_1", origin=ORIGIN),
    TextPart(""),
    ToolUsePart("c1", "weather", {"city": "Kyoto", "days": [1, 2]}, origin=ORIGIN),
    ProviderPart({"type": "server_tool_use", "id": "srv_1"}, origin=ORIGIN),
    ToolUsePart("c2", "weather", {}),
    TextPart("é" * 70),
]


@pytest.mark.parametrize("cut", range(len(_PARTS) + 1))
def test_a_steps_layout_is_the_one_messages_to_agui_writes(cut: int) -> None:
    # The AG-UI encoder writes a step's layout with `layout_of` (not the whole message):
    # the browser sends it back, and `messages_from_agui` reads it as the snapshot's.
    parts = _PARTS[cut:] + _PARTS[:cut]
    [message] = messages_to_agui([Message("assistant", parts)])[-1:]
    assert layout_of(parts) == message["encryptedValue"]
