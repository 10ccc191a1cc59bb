"""@ag-ui/client's HttpAgent running against AGUIAdapter, every event checked by EventSchema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_worker import TextPart, ToolUsePart
from llm_worker.testing import ScriptedResponse, decode_request
from llm_worker.ui import messages_from_agui

from .conftest import AGUI, PROVIDERS, booking, consumed, first_turn

pytestmark = pytest.mark.anyio


def types(out: dict[str, Any]) -> list[str]:
    return [e["type"] for e in out["events"]]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_thinking_and_parallel_calls_end_as_the_workers_history(
    provider: str, node_modules: Path
) -> None:
    out, _ = await first_turn(AGUI, node_modules, provider)
    kinds = types(out)
    assert kinds[0] == "RUN_STARTED"
    assert kinds[-2:] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert kinds.count("STEP_STARTED") == kinds.count("STEP_FINISHED") == 2
    starts = [e for e in out["events"] if e["type"] == "TOOL_CALL_START"]
    assert len(starts) == 2
    assert len({e["parentMessageId"] for e in starts}) == 1  # parallel calls, one message
    assert kinds.count("TOOL_CALL_RESULT") == 2
    assert "REASONING_MESSAGE_CONTENT" in kinds
    finished = out["finished"][-1]
    assert finished["outcome"] == {"type": "success"}
    assert finished["usage"][0]["outputTokens"] > 0
    assert finished["usage"][0]["provider"] == provider


@pytest.mark.parametrize("approve", [True, False])
async def test_an_interrupt_is_answered_by_the_next_runs_resume(
    approve: bool, node_modules: Path
) -> None:
    answer = "Booked." if approve else "Not booked."
    plan = [{"send": "Book Kyoto"}, {"approve": approve, "reason": "too expensive"}]
    async with consumed(AGUI, node_modules, "anthropic", booking(answer), plan) as run:
        out, server, factory, adapter = run
        last_request = server.requests[-1].body.decode()
    first, second = out["finished"]
    assert first["outcome"]["type"] == "interrupt"
    [interrupt] = first["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "call_1"
    assert interrupt["reason"] == "tool_approval"
    assert second["outcome"] == {"type": "success"}
    history = factory.workers[1].history
    assert messages_from_agui(out["messages"]) == history
    [result] = [r for m in history for r in m.tool_results if r.tool_use_id == "call_1"]
    if approve:
        assert result.content == "booked Kyoto"
    else:
        assert result.is_error
        assert "Denied: too expensive" in last_request
    assert len(adapter.store) == 0  # type: ignore[arg-type]


async def test_a_front_end_tool_ends_the_run_pending_and_its_result_comes_back(
    node_modules: Path,
) -> None:
    script = [
        ScriptedResponse([TextPart("Let me ask."), ToolUsePart("", "pick_color", {"of": "car"})]),
        ScriptedResponse.text("Red it is."),
    ]
    tools = [
        {
            "name": "pick_color",
            "description": "Ask the user to pick a color",
            "parameters": {"type": "object", "properties": {"of": {"type": "string"}}},
        }
    ]
    plan = [{"send": "Pick a color", "tools": tools}, {"toolResult": "red"}]
    async with consumed(AGUI, node_modules, "openai_responses", script, plan) as run:
        out, server, factory, _ = run
        first_request = server.requests[0].body.decode()
        second = decode_request("openai_responses", json.loads(server.requests[1].body))
    assert "pick_color" in first_request
    assert out["finished"][0]["outcome"] == {"type": "success", "pendingToolCallIds": ["call_0"]}
    results = [r for m in second.messages for r in m.tool_results]
    assert [(r.tool_use_id, r.content) for r in results] == [("call_0", "red")]
    assert out["finished"][1]["outcome"] == {"type": "success"}
    assert messages_from_agui(out["messages"]) == factory.workers[1].history
