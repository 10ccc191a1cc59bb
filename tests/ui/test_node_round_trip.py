"""Both protocols' official clients sending their assembled messages back for a second turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_worker.testing import ScriptedResponse

from .conftest import CONSUMERS, SIGNED, consumed, thinking_and_tools

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("protocol", CONSUMERS)
@pytest.mark.parametrize("provider", SIGNED)
async def test_the_second_turn_sends_the_first_turns_signature_back(
    protocol: str, provider: str, node_modules: Path
) -> None:
    consumer = CONSUMERS[protocol]
    script = [*thinking_and_tools(), ScriptedResponse.text("You are welcome.")]
    plan = [{"send": "Weather in Kyoto and Oslo?"}, {"send": "Thanks!"}]
    async with consumed(consumer, node_modules, provider, script, plan) as run:
        out, server, factory, _ = run
        third = server.requests[2].body.decode()
    assert "sig-turn-1" in third
    assert consumer.history(out) == factory.workers[1].history
