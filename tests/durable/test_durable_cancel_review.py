"""Review probes: cancelling a durable run at awkward points, and a hostile call id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import pytest

from llm_worker import (
    Decision,
    Message,
    PauseState,
    RunResult,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.durable import DurableWorker
from llm_worker.errors import ConfigurationError
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)


class Gated(Worker[Any]):
    """A Worker whose run and resume wait at a gate before they start: the moment between a
    durable run taking its run (or its decisions) and its Worker run starting."""

    entered: anyio.Event
    gate: anyio.Event
    gated: str

    async def run(self, input: str | Message | Iterable[Message], **options: Any) -> RunResult[Any]:
        if self.gated == "run":
            self.entered.set()
            await self.gate.wait()
        return await super().run(input, **options)

    async def resume(
        self,
        state: PauseState | None = None,
        *,
        decisions: Mapping[str, Decision] | None = None,
        **options: Any,
    ) -> RunResult[Any]:
        if self.gated == "resume":
            self.entered.set()
            await self.gate.wait()
        return await super().resume(state, decisions=decisions, **options)


def _gated(client: Any, at: str, tools: list[Any]) -> Gated:
    worker = Gated(client, tools=tools)
    worker.entered, worker.gate, worker.gated = anyio.Event(), anyio.Event(), at
    return worker


@pytest.mark.parametrize("how", ["durable", "worker"])
async def test_a_cancel_just_before_the_worker_run_starts_ends_it_cancelled(
    how: str, database_url: str
) -> None:
    script = [ScriptedResponse.text("done", usage=USAGE)]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        worker = _gated(c, "run", [])
        durable = DurableWorker(worker, name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Go", run_id="early")
                await worker.entered.wait()
                if how == "durable":
                    await durable.cancel(run_id, "changed my mind")
                else:
                    worker.cancel()  # it reaches the durable runs over this Worker
                worker.gate.set()
                result = await durable.result(run_id)
    assert result.status is RunStatus.CANCELLED
    why = "changed my mind" if how == "durable" else "cancelled by worker.cancel()"
    assert result.reason == why
    assert server.requests == []


def _pay(ran: list[int]) -> Any:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    return pay


async def test_a_cancel_right_after_a_decision_stops_the_resume(database_url: str) -> None:
    ran: list[int] = []
    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    async with ScriptedModelServer("gemini", script) as server, server.client() as c:
        worker = _gated(c, "resume", [_pay(ran)])
        durable = DurableWorker(worker, name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="decided-then-cancelled")
                state = await durable.paused(run_id)
                assert state is not None
                await durable.decide(run_id, {state.pending[0].call.id: Decision.approve()})
                await worker.entered.wait()
                await durable.cancel(run_id, "stop")
                worker.gate.set()
                result = await durable.result(run_id)
    assert result.status is RunStatus.CANCELLED and result.reason == "stop"
    assert ran == []
    assert len(server.requests) == 1


async def test_a_call_id_named_like_the_cancel_key_is_decided_not_cancelled(
    database_url: str,
) -> None:
    ran: list[int] = []
    call_id = "llm-worker.cancel"  # the model chooses call ids (Anthropic/OpenAI echo them)
    script = [
        ScriptedResponse([ToolUsePart(call_id, "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = DurableWorker(Worker(c, tools=[_pay(ran)]), name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="hostile-id")
                state = await durable.paused(run_id)
                assert state is not None and state.pending[0].call.id == call_id
                await durable.decide(run_id, {call_id: Decision.approve()})
                result = await durable.result(run_id)
    assert result.status is RunStatus.FINISHED and result.text == "Paid."
    assert ran == [5]
    assert len(server.requests) == 2


async def test_cancel_twice_and_after_the_end_of_a_paused_run(database_url: str) -> None:
    """And a reason that is not a string first: a typed error, the run left as it was."""
    ran: list[int] = []
    script = [ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE)]
    async with ScriptedModelServer("openai_chat", script) as server, server.client() as c:
        durable = DurableWorker(Worker(c, tools=[_pay(ran)]), name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="twice")
                assert await durable.paused(run_id) is not None
                bad: Any = {"why": "no"}  # would read as decisions on the run's topic
                with pytest.raises(ConfigurationError, match="string"):
                    await durable.cancel(run_id, bad)
                await durable.cancel(run_id, "first")
                await durable.cancel(run_id, "second")
                result = await durable.result(run_id)
                await durable.cancel(run_id, "third")
                again = await durable.result(run_id)
                status = await durable.status(run_id)
    assert result.status is RunStatus.CANCELLED and result.reason == "first"
    assert again.reason == "first" and status == "cancelled"
    assert ran == []
    assert len(server.requests) == 1


async def test_worker_cancel_leaves_a_paused_durable_run_to_its_decision(
    database_url: str,
) -> None:
    ran: list[int] = []
    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    async with ScriptedModelServer("openai_responses", script) as server, server.client() as c:
        worker = Worker(c, tools=[_pay(ran)])
        durable = DurableWorker(worker, name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="paused-left")
                assert await durable.paused(run_id) is not None
                worker.cancel()  # documented: it reaches running runs, not waiting ones
                await durable.decide(run_id, {"p1": Decision.approve()})
                result = await durable.result(run_id)
    assert result.status is RunStatus.FINISHED and result.text == "Paid."
    assert ran == [5]
    assert len(server.requests) == 2
