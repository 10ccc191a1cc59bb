"""The `ai` package's own client consuming VercelAIAdapter, over the four wire formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_worker import TextPart, ToolUsePart
from llm_worker.errors import InvalidRequestError
from llm_worker.messages import ToolSpec
from llm_worker.testing import ScriptedResponse, decode_request
from llm_worker.ui import VercelAIAdapter, messages_from_ui

from .conftest import (
    PROVIDERS,
    VERCEL,
    booking,
    consumed,
    first_turn,
    run_node,
    scripted,
    serve,
)
from .vercel_chunks import check_chunk_fields

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_thinking_and_parallel_tool_calls_assemble_into_the_workers_history(
    provider: str, node_modules: Path
) -> None:
    out, history = await first_turn(VERCEL, node_modules, provider)
    assert messages_from_ui(out["assembled"][:1]) == history[1:]
    assistant = out["messages"][1]
    kinds = [p["type"] for p in assistant["parts"]]
    assert kinds == [
        "step-start",
        "reasoning",
        "text",
        "tool-weather",
        "tool-weather",
        "step-start",
        "text",
    ]
    tools = [p for p in assistant["parts"] if p["type"] == "tool-weather"]
    assert [(t["state"], t["output"]) for t in tools] == [
        ("output-available", "Kyoto: sunny"),
        ("output-available", "Oslo: sunny"),
    ]
    assert assistant["parts"][1]["text"] == "I should check both cities."
    assert "sig-turn-1" not in json.dumps([p.get("text") for p in assistant["parts"]])
    usage = assistant["metadata"]["llmWorker"]["usage"]
    assert usage["output_tokens"] > 0
    assert out["status"] == "ready"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_mid_stream_reaches_the_client_and_the_history_stays_valid(
    provider: str, node_modules: Path
) -> None:
    broken = ScriptedResponse(
        [TextPart("Half an ans"), TextPart("wer")],
        fail_with=InvalidRequestError("slow down", error_type="invalid_request_error"),
    )
    async with (
        scripted(provider, [broken] * 4) as (_, factory),
        serve(VercelAIAdapter(factory)) as url,
    ):
        out: dict[str, Any] = await run_node(
            node_modules, "vercel_consumer.mjs", url, json.dumps([{"send": "Hi"}])
        )
    assert out["status"] == "error"
    assert any("slow down" in e for e in out["errors"])
    errors = [c for c in out["chunks"] if c["type"] == "error"]
    assert len(errors) == 1
    assert out["chunks"][-1] == {"type": "finish", "finishReason": "error"}
    # The half answer the provider broke off is not history, on either side.
    assert messages_from_ui(out["messages"]) == factory.workers[0].history
    for chunk in out["chunks"]:
        check_chunk_fields(chunk)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_approval_pauses_and_the_decision_continues_the_same_message(
    provider: str, node_modules: Path
) -> None:
    plan = [{"send": "Book Kyoto if sunny"}, {"approve": True}]
    async with consumed(VERCEL, node_modules, provider, booking("Booked."), plan) as run:
        out, _, factory, adapter = run
    approvals = [c for c in out["chunks"] if c["type"] == "tool-approval-request"]
    assert [a["toolCallId"][-6:] for a in approvals] == ["call_1"]  # gemini_call_1 on Gemini
    first, second = out["requests"]
    assistant = out["messages"][1]
    assert second["trigger"] == "submit-message"
    assert second["messageId"] == assistant["id"]
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert len(out["messages"]) == 2  # the answer continued the paused message
    book_part = next(p for p in assistant["parts"] if p["type"] == "tool-book")
    assert book_part["state"] == "output-available"
    assert book_part["output"] == "booked Kyoto"
    assert book_part["approval"]["approved"] is True
    assert (assistant["parts"][-1]["text"], assistant["parts"][-1]["state"]) == ("Booked.", "done")
    assert messages_from_ui(out["messages"]) == factory.workers[1].history
    assert len(adapter.store) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
async def test_a_denial_shows_as_output_denied_and_the_model_reads_the_reason(
    provider: str, node_modules: Path
) -> None:
    plan = [{"send": "Book Kyoto"}, {"approve": False, "reason": "too expensive"}]
    async with consumed(VERCEL, node_modules, provider, booking("Not booked."), plan) as run:
        out, server, factory, _ = run
        last_request = server.requests[-1].body.decode()
    assert "Denied: too expensive" in last_request
    denied = [c for c in out["chunks"] if c["type"] == "tool-output-denied"]
    assert [(c["toolCallId"][-6:], len(c)) for c in denied] == [("call_1", 2)]
    book_part = next(p for p in out["messages"][1]["parts"] if p["type"] == "tool-book")
    assert book_part["state"] == "output-denied"
    assert messages_from_ui(out["messages"]) == factory.workers[1].history


async def test_a_front_end_tool_is_run_by_the_browser_and_its_output_continues_the_run(
    node_modules: Path,
) -> None:
    script = [
        ScriptedResponse([TextPart("Let me ask."), ToolUsePart("", "pick_color", {"of": "car"})]),
        ScriptedResponse.text("Red it is."),
    ]
    schema = {"type": "object", "properties": {"of": {"type": "string"}}}
    spec = ToolSpec("pick_color", "Ask the user to pick a color", schema)
    plan = [{"send": "Pick a color"}, {"clientTool": "red"}]
    async with consumed(VERCEL, node_modules, "gemini", script, plan, frontend_tools=[spec]) as run:
        out, server, factory, _ = run
        second = decode_request("gemini", json.loads(server.requests[1].body))
    assert not [c for c in out["chunks"] if c["type"] == "tool-approval-request"]
    results = [r for m in second.messages for r in m.tool_results]
    assert [(r.tool_use_id[-6:], r.content) for r in results] == [("call_0", "red")]
    tool_part = next(p for p in out["messages"][1]["parts"] if p["type"] == "tool-pick_color")
    assert (tool_part["state"], tool_part["output"]) == ("output-available", "red")
    assert out["messages"][1]["parts"][-1]["text"] == "Red it is."
    assert messages_from_ui(out["messages"]) == factory.workers[1].history
