"""The run's controls over every real wire format: tool context, steering, guardrails, enabled."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import ToolContext, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT, serve, worker_options

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
