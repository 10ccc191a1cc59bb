"""The run's controls over every real wire format: tool context, steering, guardrails, enabled."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ToolContext, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT, serve, worker_options
from support.wire_bodies import assert_valid

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_tool_context_carries_the_wire_call_id(provider: str) -> None:
    seen: list[str] = []

    @tool(effect="read_only")
    def lookup(city: str, ctx: ToolContext) -> str:
        """Look up a city."""
        seen.append(ctx.call_id)
        return city

    script = [
        ScriptedResponse([ToolUsePart("call_1", "lookup", {"city": "Kyoto"})]),
        ScriptedResponse.text("Clear."),
    ]
    async with serve(provider, script) as wire:
        worker = Worker(wire.client(), tools=[lookup], **worker_options(provider))
        with anyio.fail_after(TIMEOUT):
            await worker.run("Weather?")
        tools = wire.body(0).get("tools") or []
    (call,) = [p for m in worker.history for p in m.tool_uses]
    assert seen == [call.id] and call.id
    assert "ctx" not in str(tools)  # the model is never offered the context


def offered_names(provider: str, body: dict[str, Any]) -> list[str]:
    tools: list[dict[str, Any]] = body.get("tools") or []
    if provider == "gemini":
        return [f["name"] for t in tools for f in t.get("functionDeclarations", [])]
    if provider == "openai_chat":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tools_come_and_go_on_the_wire(provider: str) -> None:
    @tool(effect="read_only")
    def schema() -> str:
        """The schema."""
        return "orders(id)"

    @tool(effect="read_only", enabled=lambda ctx: ctx.called("schema"))
    def query(sql: str) -> str:
        """A query."""
        return "1"

    script = [
        ScriptedResponse([ToolUsePart("call_1", "query", {"sql": "x"})]),
        ScriptedResponse([ToolUsePart("call_2", "schema", {})]),
        ScriptedResponse.text("Done."),
    ]
    async with serve(provider, script) as wire:
        worker = Worker(wire.client(), tools=[query, schema], **worker_options(provider))
        with anyio.fail_after(TIMEOUT):
            await worker.run("Count orders")
        bodies = [wire.body(n) for n in range(wire.count)]
    assert [offered_names(provider, b) for b in bodies] == [
        ["schema"],
        ["schema"],
        ["query", "schema"],
    ]
    refused = assert_valid(provider, bodies[1])[0].results[0]
    assert "'query' is not enabled" in str(refused.output)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_steer_goes_after_the_skipped_results_on_the_wire(provider: str) -> None:
    ran: list[str] = []

    @tool
    def book(city: str) -> str:
        """Book a hotel."""
        ran.append(city)
        return "booked"

    def first(call: Any) -> ScriptedResponse:
        worker.steer("Osaka instead.")
        return ScriptedResponse([ToolUsePart("call_1", "book", {"city": "Kyoto"})])

    async with serve(provider, [first, ScriptedResponse.text("Osaka.")]) as wire:
        worker = Worker(wire.client(), tools=[book], **worker_options(provider))
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Book Kyoto.")
        body = wire.body(1)
    assert ran == [] and result.text == "Osaka."
    (step,) = assert_valid(provider, body)
    assert "new instruction" in str(step.results[0].output)
    assert "Osaka instead." in str(body)
