"""Review: a tool-mode answer over `max_tool_arguments` survives pause -> JSON -> resume.

The output tool's arguments are bounded by the answer cap, not `max_tool_arguments`; a run
paused at its turn end holds that answer in its pause state, which a fresh Worker (its
assembler and its checks built anew) must resume whole, on every wire.
"""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import PauseState, RunStatus, Worker
from llm_worker.hooks import Pause, TurnEndContext
from llm_worker.providers import LLMClient
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

BIG = 1_200_000  # characters: over the default max_tool_arguments (1 MiB)


class Report(BaseModel):
    title: str
    body: str


def _worker(client: LLMClient, *, pause: bool) -> Worker[Report]:
    worker = Worker(client, output_type=Report, output_mode="tool")

    def review(ctx: TurnEndContext) -> Pause | None:
        return Pause("review") if pause else None

    worker.add_on_turn_end_hook(review)
    return worker


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_a_large_tool_mode_answer_resumes_whole_in_a_fresh_worker(provider: str) -> None:
    value = {"title": "t", "body": "\u00e9" * BIG}
    script = [ScriptedResponse.output(value, tool="final_result", chunk_size=65536)]
    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        with anyio.fail_after(60):
            first = await _worker(client, pause=True).run("write it")
            assert first.status is RunStatus.PAUSED and first.state is not None
            text = first.state.to_json()
            assert len(text) > BIG
            done = await _worker(client, pause=False).resume(PauseState.from_json(text))
        await client.aclose()
    assert done.status is RunStatus.FINISHED
    assert done.output == Report(**value)
    assert len(server.requests) == 1
