"""Limits at their edge over each of the four wire formats (real clients, 127.0.0.1)."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import LimitExceededError, Limits, ToolUsePart, Worker, tool
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio

WIRES = ["anthropic", "openai_chat", "openai_responses", "gemini"]


def answered(server: ScriptedModelServer) -> list[object]:
    """The model requests the server answered (not the token-counting ones)."""
    counting = ("count_tokens", ":countTokens", "/input_tokens")
    return [r for r in server.requests if not r.path.endswith(counting)]


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return text


@pytest.mark.parametrize("provider", WIRES)
async def test_requests_and_output_tokens_at_their_edge_on_each_wire(provider: str) -> None:
    caps: list[int | None] = []

    def answer(call: ScriptedRequest) -> ScriptedResponse:
        caps.append(call.request.max_tokens)
        usage = UsageEvent(input_tokens=100, output_tokens=10, total_tokens=110)
        return ScriptedResponse([ToolUsePart("", "echo", {"text": "a"})], usage=usage)

    budget = Limits(requests=2, output_tokens=500)
    async with ScriptedModelServer(provider, answer) as server, server.client() as client:
        worker = Worker(client, tools=[echo])
        with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
            await worker.run("go", limits=budget)
    assert len(answered(server)) == 2  # the third was never sent
    assert (info.value.limit, info.value.used) == ("requests", 3)
    assert caps == [500, 490]  # max_tokens lowered to the output tokens left
    spent = budget.spent
    assert (spent.input_tokens, spent.output_tokens) == (200, 20)  # the wire's usage counted


@pytest.mark.parametrize("provider", WIRES)
async def test_input_tokens_reported_past_the_limit_stop_the_calls_on_each_wire(
    provider: str,
) -> None:
    ran: list[str] = []

    @tool
    async def record(text: str) -> str:
        """Record it."""
        ran.append(text)
        return text

    usage = UsageEvent(input_tokens=5000, output_tokens=10, total_tokens=5010)
    step = ScriptedResponse([ToolUsePart("", "record", {"text": "a"})], usage=usage)
    async with ScriptedModelServer(provider, step) as server, server.client() as client:
        worker = Worker(client, tools=[record])
        with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
            await worker.run("go", limits=Limits(input_tokens=4999))
    assert (info.value.limit, info.value.used) == ("input_tokens", 5000)
    assert ran == [] and len(answered(server)) == 1
