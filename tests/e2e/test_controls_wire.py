"""The run's controls over every real wire format: tool context, steering, guardrails, enabled."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from llm_worker import (
    BlockDelta,
    GuardrailTripped,
    InputGuardrailContext,
    OutputGuardrailContext,
    TextDelta,
    ToolContext,
    ToolUsePart,
    Trip,
    Worker,
    input_guardrail,
    output_guardrail,
    tool,
)
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


async def read_text(worker: Worker[Any], prompt: str, shown: list[str]) -> None:
    """Stream a run, keeping the text its reader was shown."""
    async with worker.stream(prompt) as stream:
        async for event in stream:
            if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                shown.append(event.delta.text)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_guardrails_trip_on_the_wire_and_the_history_goes_on(provider: str) -> None:
    ran: list[str] = []

    @tool
    def transfer(amount: int) -> str:
        """Move money."""
        ran.append(str(amount))
        return "moved"

    wires: list[Any] = []

    @input_guardrail
    async def no_transfers(ctx: InputGuardrailContext) -> Trip | None:
        if "transfer" not in ctx.text:
            return None
        # Not before the server has the run's request: a trip before it was sent left the
        # script's call to the next run, whose input passes (under load it did: the call ran
        # there). Then slower than the answer: the call has arrived meanwhile.
        with anyio.fail_after(TIMEOUT):
            while not wires[0].server.requests:
                await anyio.lowlevel.checkpoint()
        for _ in range(50):
            await anyio.lowlevel.checkpoint()
        return Trip("no transfers today")

    @output_guardrail(hold=8)
    def no_codes(ctx: OutputGuardrailContext) -> Trip | None:
        return Trip("a code") if "1234" in ctx.text else None

    script = [
        ScriptedResponse([ToolUsePart("call_1", "transfer", {"amount": 5})]),
        ScriptedResponse.text("The code is 1234."),
        ScriptedResponse.text("Hello again."),
    ]
    async with serve(provider, script) as wire:
        wires.append(wire)
        worker = Worker(
            wire.client(),
            tools=[transfer],
            guardrails=[no_transfers, no_codes],
            early_tool_start=True,
            **worker_options(provider),
        )
        with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped, match="no transfers"):
            await worker.run("Please transfer 5.")
        shown: list[str] = []
        with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped, match="a code"):
            await read_text(worker, "What is the code?", shown)
        with anyio.fail_after(TIMEOUT):
            again = await worker.run("Hi.")
        body = wire.body(2)
    assert ran == [] and "1234" not in "".join(shown)
    assert again.text == "Hello again."
    assert_valid(provider, body)  # the histories the trips left are sendable
