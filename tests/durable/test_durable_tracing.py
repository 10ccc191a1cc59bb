"""A traced DurableWorker: a recovered run's replayed answers are not counted as new requests."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import Decision, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from support.telemetry import Telemetry

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


async def test_a_recovered_runs_replayed_answer_is_not_counted_again(tmp_path: Path) -> None:
    t = Telemetry()
    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("ok", usage=USAGE),
    ]
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        with anyio.fail_after(30):
            first = Worker(c, tools=[pay], instrument=t.instrumentation())
            async with DurableWorker(first, name="t", database_url=db) as d:
                await d.start("Pay", run_id="pay-1")
                assert await d.paused("pay-1") is not None
            second = Worker(c, tools=[pay], instrument=t.instrumentation())
            async with DurableWorker(second, name="t", database_url=db) as d:
                assert await d.paused("pay-1") is not None
                await d.decide("pay-1", {"p1": Decision.approve()})
                await d.result("pay-1")
        sent = len(server.requests)
    assert sent == 2
    counted = sum(p.sum for p in t.points("gen_ai.client.token.usage"))
    assert counted == sent * 15  # input and output tokens of the requests really sent
    durations = t.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == sent
    replayed = [s for s in t.spans() if (s.attributes or {}).get("llm_worker.request.replayed")]
    assert len(replayed) == 1  # the recovered run's first answer, given back from its record
