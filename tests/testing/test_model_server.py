"""ScriptedModelServer: a scripted model behind each real wire format."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import Message, Request, ToolUsePart
from llm_worker.events import BlockDelta, BlockStart, TextDelta, ToolUseMetadata
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_a_slow_response_arrives_event_by_event(provider: str) -> None:
    response = ScriptedResponse.text("one two three four five six", chunk_size=4, delay=0.02)
    async with ScriptedModelServer(provider, [response]) as server:
        client = server.client()
        arrivals: list[float] = []
        with anyio.fail_after(10):
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                    arrivals.append(anyio.current_time())
        await client.aclose()
    assert len(arrivals) >= 6
    # Deltas were written 20 ms apart, so they cannot all arrive in one read: the last is
    # written at least 100 ms after the first (a lower bound only, whatever the load).
    assert arrivals[-1] - arrivals[0] >= 0.04


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_call_ids_stay_unique_across_answers(provider: str) -> None:
    answers = [ScriptedResponse([ToolUsePart("", "f", {})]) for _ in range(2)]
    ids: list[str] = []
    async with ScriptedModelServer(provider, answers) as server:
        client = server.client()
        for _ in answers:
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockStart) and isinstance(event.metadata, ToolUseMetadata):
                    ids.append(event.metadata.id)
        await client.aclose()
    assert len(ids) == 2
    if provider != "gemini":  # Gemini sends no ids: the client synthesizes its own
        assert ids == ["call_0", "call_1"]
