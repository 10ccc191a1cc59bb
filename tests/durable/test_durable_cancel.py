"""Cancelling a durable run: through llm-worker (running, paused, queued) and through DBOS."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.errors import ConfigurationError
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)


class Slow:
    """A read-only tool that waits until released, and records what ran."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.ran: list[str] = []
        self.finished: list[str] = []

        @tool(effect="read_only")
        async def slow(city: str) -> str:
            """Wait."""
            self.ran.append(city)
            self.started.set()
            await self.release.wait()
            self.finished.append(city)
            return city

        self.tool = slow


def _script(city: str = "Kyoto") -> list[ScriptedResponse]:
    return [
        ScriptedResponse([ToolUsePart("s1", "slow", {"city": city})], usage=USAGE),
        ScriptedResponse.text("done", usage=USAGE),
    ]


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
async def test_cancel_ends_a_running_run_cancelled_with_its_messages(
    provider: str, database_url: str
) -> None:
    slow = Slow()
    async with ScriptedModelServer(provider, _script()) as server, server.client() as c:
        durable = DurableWorker(Worker(c, tools=[slow.tool]), name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Go", run_id="cancel-running")
                await slow.started.wait()
                await durable.cancel(run_id, "the user stopped it")
                result = await durable.result(run_id)
                status = await durable.status(run_id)
                await durable.cancel(run_id)  # an ended run stays as it ended
                again = await durable.result(run_id)
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "the user stopped it"
    [cut] = result.messages[-1].tool_results
    assert cut.is_error and cut.tool_use_id == "s1"
    assert slow.finished == []
    assert status == "cancelled"
    assert again.status is RunStatus.CANCELLED
    assert len(server.requests) == 1  # nothing asked after the cancel


async def test_cancel_ends_a_paused_run_and_its_call_never_runs(database_url: str) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    async with ScriptedModelServer("gemini", script) as server, server.client() as c:
        durable = DurableWorker(Worker(c, tools=[pay]), name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="cancel-paused")
                state = await durable.paused(run_id)
                assert state is not None
                await durable.decide(run_id, {"p9": Decision.approve()})  # refused: it waits on
                async for entry in durable.follow(run_id):
                    if entry["kind"] == "refused":
                        break
                await durable.cancel(run_id, "not today")
                result = await durable.result(run_id)
                assert await durable.paused(run_id, wait=0) is None
                with pytest.raises(ConfigurationError, match="not waiting"):
                    await durable.decide(run_id, {"p1": Decision.approve()})
                status = await durable.status(run_id)
    assert result.status is RunStatus.CANCELLED and result.reason == "not today"
    [never] = result.messages[-1].tool_results
    assert never.is_error and "not today" in never.content
    assert ran == []
    assert status == "cancelled"
    assert result.usage.input_tokens == 10  # the request before the pause counts
    assert len(server.requests) == 1


async def test_a_run_cancelled_through_dbos_gives_a_cancelled_result(database_url: str) -> None:
    slow = Slow()
    async with ScriptedModelServer("anthropic", _script()) as server, server.client() as c:
        durable = DurableWorker(Worker(c, tools=[slow.tool]), name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                from dbos import DBOS

                run_id = await durable.start("Go", run_id="cancel-dbos")
                await slow.started.wait()
                await DBOS.cancel_workflow_async(run_id)
                slow.release.set()  # its next step sees the cancellation
                result = await durable.result(run_id)
                status = await durable.status(run_id)
    assert result.status is RunStatus.CANCELLED
    assert result.reason is not None and "DBOS" in result.reason
    assert result.messages == []
    assert status == "cancelled"
    assert len(server.requests) == 1


async def test_cancel_of_a_queued_run_means_it_never_starts(tmp_path: Path) -> None:
    slow = Slow()
    script = [*_script("first"), *_script("second")]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = DurableWorker(
            Worker(c, tools=[slow.tool]),
            name="t",
            database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}",
            worker_concurrency=1,
        )
        with anyio.fail_after(TIMEOUT):
            async with durable:
                first = await durable.start("Go", run_id="first")
                await slow.started.wait()
                second = await durable.start("Go too", run_id="second")
                await durable.cancel(second)
                slow.release.set()
                done = await durable.result(first)
                cancelled = await durable.result(second)
    assert done.status is RunStatus.FINISHED and done.text == "done"
    assert cancelled.status is RunStatus.CANCELLED
    assert slow.ran == ["first"]
    assert len(server.requests) == 2


async def test_cancel_of_an_unknown_run_is_a_typed_error(tmp_path: Path) -> None:
    async with ScriptedModelServer("anthropic", []) as server, server.client() as c:
        durable = DurableWorker(
            Worker(c), name="t", database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}"
        )
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(ConfigurationError, match="no-such-run"):
                    await durable.cancel("no-such-run")
