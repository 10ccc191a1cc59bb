"""The `ai` package's own client consuming VercelAIAdapter, over the four wire formats."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from llm_worker import TextPart, ThinkingPart, ToolUsePart, Worker, tool
from llm_worker.errors import InvalidRequestError
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, decode_request
from llm_worker.ui import VercelAIAdapter, messages_from_ui

from .conftest import run_node, serve
from .vercel_chunks import check_chunk_fields

pytestmark = pytest.mark.anyio

PROVIDERS = ["anthropic", "openai_chat", "openai_responses", "gemini"]
SIGNED = ["anthropic", "openai_responses", "gemini"]  # carry a thinking signature back


@tool(effect="read_only")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip (a person approves each call)."""
    return f"booked {city}"


def thinking_and_tools() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [
                ThinkingPart("I should check both cities.", signature="sig-turn-1"),
                TextPart("Checking the weather."),
                ToolUsePart("", "weather", {"city": "Kyoto"}),
                ToolUsePart("", "weather", {"city": "Oslo"}),
            ]
        ),
        ScriptedResponse.text("Sunny in Kyoto and in Oslo."),
    ]


class Factory:
    """Makes one Worker per request against the scripted server; keeps them to inspect."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.workers: list[Worker] = []

    def __call__(self) -> Worker:
        worker = Worker(self.client, tools=[weather, book])
        self.workers.append(worker)
        return worker


@asynccontextmanager
async def scripted(
    provider: str, script: list[ScriptedResponse]
) -> AsyncIterator[tuple[ScriptedModelServer[Any], Factory]]:
    """A scripted model behind `provider`'s wire format, and a factory of Workers using it."""
    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        yield server, Factory(client)


async def consume(node_modules: Path, url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = await run_node(node_modules, "vercel_consumer.mjs", url, json.dumps(plan))
    assert out["errors"] == []
    for chunk in out["chunks"]:
        check_chunk_fields(chunk)
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_thinking_and_parallel_tool_calls_assemble_into_the_workers_history(
    provider: str, node_modules: Path
) -> None:
    async with (
        scripted(provider, thinking_and_tools()) as (_, factory),
        serve(VercelAIAdapter(factory)) as url,
    ):
        out = await consume(node_modules, url, [{"send": "Weather in Kyoto and Oslo?"}])
    history = factory.workers[0].history
    assert messages_from_ui(out["messages"]) == history
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


@pytest.mark.parametrize("provider", SIGNED)
async def test_the_second_turn_sends_the_first_turns_signature_back(
    provider: str, node_modules: Path
) -> None:
    script = [*thinking_and_tools(), ScriptedResponse.text("You are welcome.")]
    async with scripted(provider, script) as (server, factory):
        async with serve(VercelAIAdapter(factory)) as url:
            plan = [{"send": "Weather in Kyoto and Oslo?"}, {"send": "Thanks!"}]
            out = await consume(node_modules, url, plan)
        third = server.requests[2].body.decode()
    assert "sig-turn-1" in third
    assert messages_from_ui(out["messages"]) == factory.workers[1].history


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


def booking(answer: str) -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [
                TextPart("Let me check and book."),
                ToolUsePart("", "weather", {"city": "Kyoto"}),
                ToolUsePart("", "book", {"city": "Kyoto"}),
            ]
        ),
        ScriptedResponse.text(answer),
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_approval_pauses_and_the_decision_continues_the_same_message(
    provider: str, node_modules: Path
) -> None:
    async with scripted(provider, booking("Booked.")) as (_, factory):
        adapter = VercelAIAdapter(factory)
        async with serve(adapter) as url:
            plan = [{"send": "Book Kyoto if sunny"}, {"approve": True}]
            out = await consume(node_modules, url, plan)
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
    async with scripted(provider, booking("Not booked.")) as (server, factory):
        async with serve(VercelAIAdapter(factory)) as url:
            plan = [{"send": "Book Kyoto"}, {"approve": False, "reason": "too expensive"}]
            out = await consume(node_modules, url, plan)
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
    from llm_worker.messages import ToolSpec

    script = [
        ScriptedResponse([TextPart("Let me ask."), ToolUsePart("", "pick_color", {"of": "car"})]),
        ScriptedResponse.text("Red it is."),
    ]
    schema = {"type": "object", "properties": {"of": {"type": "string"}}}
    spec = ToolSpec("pick_color", "Ask the user to pick a color", schema)
    async with scripted("gemini", script) as (server, factory):
        adapter = VercelAIAdapter(factory, frontend_tools=[spec])
        async with serve(adapter) as url:
            plan = [{"send": "Pick a color"}, {"clientTool": "red"}]
            out = await consume(node_modules, url, plan)
        second = decode_request("gemini", json.loads(server.requests[1].body))
    assert not [c for c in out["chunks"] if c["type"] == "tool-approval-request"]
    results = [r for m in second.messages for r in m.tool_results]
    assert [(r.tool_use_id[-6:], r.content) for r in results] == [("call_0", "red")]
    tool_part = next(p for p in out["messages"][1]["parts"] if p["type"] == "tool-pick_color")
    assert (tool_part["state"], tool_part["output"]) == ("output-available", "red")
    assert out["messages"][1]["parts"][-1]["text"] == "Red it is."
    assert messages_from_ui(out["messages"]) == factory.workers[1].history
