"""TemporalWorker's own: cancel, one answer per pause, payload limits, replay.

The behaviour both engines share is tested over both (the `engine` fixture in
test_durable.py and test_durable_crosses.py); this file holds what is Temporal's: its
cancellation, its update, its payload limit, its visibility listing, its replayer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.blobs import MemoryBlobStore
from llm_worker.durable import DecisionConflictError
from llm_worker.durable.temporal import TemporalWorker
from llm_worker.errors import ConfigurationError, MissingExtraError
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 30.0
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)
HISTORY = Path(__file__).parent.parent / "fixtures" / "temporal" / "paused_run_history.json"
RAN: list[str] = []


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(f"pay {amount}")
    return f"paid {amount}"


@tool(effect="read_only")
def fetch(size: int) -> str:
    """Fetch a page of `size` characters."""
    return "x" * size


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def pay_script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]


async def test_cancel_ends_a_running_run_cancelled_with_its_messages(
    temporal_client: Any,
) -> None:
    started, release = anyio.Event(), anyio.Event()

    @tool(effect="read_only")
    async def slow(city: str) -> str:
        """Wait until released."""
        started.set()
        await release.wait()
        RAN.append(city)
        return city

    script = [
        ScriptedResponse([ToolUsePart("s1", "slow", {"city": "Kyoto"})], usage=USAGE),
        ScriptedResponse.text("done", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[slow]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Go", run_id="cancel-running")
                await started.wait()
                await durable.cancel(run_id, "the user stopped it")
                result = await durable.result(run_id)
                assert await durable.status(run_id) == "cancelled"
                await durable.cancel(run_id)  # an ended run stays as it ended
                assert (await durable.result(run_id)).reason == "the user stopped it"
        release.set()
        assert len(server.requests) == 1  # nothing asked after the cancel
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "the user stopped it"
    [cut] = result.messages[-1].tool_results
    assert cut.is_error and cut.tool_use_id == "s1"
    assert RAN == []


async def test_cancel_ends_a_paused_run_and_its_call_never_runs(temporal_client: Any) -> None:
    async with ScriptedModelServer("anthropic", pay_script()) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[pay]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="cancel-paused")
                assert await durable.paused(run_id) is not None
                await durable.cancel(run_id, "not today")
                result = await durable.result(run_id)
                with pytest.raises(ConfigurationError, match="ended"):
                    await durable.decide(run_id, {"p1": Decision.approve()})
                with pytest.raises(ConfigurationError, match="no durable run"):
                    await durable.cancel("no-such-run")
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "not today"
    [skipped] = result.messages[-1].tool_results
    assert skipped.is_error and "not today" in skipped.content
    assert RAN == []


async def test_a_run_cancelled_while_queued_ends_cancelled_as_it_starts(
    temporal_client: Any,
) -> None:
    async with ScriptedModelServer("anthropic", pay_script()) as server, server.client() as c:
        client = TemporalWorker(
            Worker(c, tools=[pay]), name="t", client=temporal_client, serve=False
        )
        serving = TemporalWorker(Worker(c, tools=[pay]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with client:
                await client.start("Pay", run_id="queued")
                assert await client.status("queued") == "queued"  # no process serves "t" yet
                await client.cancel("queued", "changed my mind")
                async with serving:
                    result = await serving.result("queued")
        assert server.requests == []  # no request was made
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "changed my mind"
    assert RAN == []


async def test_of_two_decisions_on_one_pause_one_is_taken_the_other_refused(
    temporal_client: Any,
) -> None:
    async with ScriptedModelServer("anthropic", pay_script()) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[pay]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="race")
                assert await durable.paused(run_id) is not None
                outcomes: list[str] = []

                async def decide(decision: Decision) -> None:
                    try:
                        await durable.decide(run_id, {"p1": decision})
                    except DecisionConflictError:
                        outcomes.append("refused")
                    else:
                        outcomes.append("taken")

                async with anyio.create_task_group() as group:
                    group.start_soon(decide, Decision.approve())
                    group.start_soon(decide, Decision.deny("no"))
                result = await durable.result(run_id)
    assert sorted(outcomes) == ["refused", "taken"]
    assert result.status is RunStatus.FINISHED
    assert len(RAN) in (0, 1)  # the one taken: approved (ran once) or denied (never ran)


async def test_a_hostile_update_of_the_wrong_shape_is_refused_and_the_run_waits_on(
    temporal_client: Any,
) -> None:
    from temporalio.client import WorkflowUpdateFailedError

    async with ScriptedModelServer("anthropic", pay_script()) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[pay]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="hostile")
                assert await durable.paused(run_id) is not None
                handle = temporal_client.get_workflow_handle(run_id)
                for forged in (
                    {"wait": 0, "decisions": "all"},
                    {"wait": 0, "decisions": {"p1": 1}},
                ):
                    with pytest.raises(WorkflowUpdateFailedError):
                        await handle.execute_update("llm-worker.decide", forged)
                assert await durable.status(run_id) == "paused"
                await durable.decide(run_id, {"p1": Decision.approve()})
                result = await durable.result(run_id)
    assert result.text == "Paid."
    assert RAN == ["pay 5"]


async def test_an_output_over_the_payload_limit_is_an_error_result_naming_the_blob_store(
    temporal_client: Any,
) -> None:
    script = [
        ScriptedResponse([ToolUsePart("f1", "fetch", {"size": 300_000})], usage=USAGE),
        ScriptedResponse.text("Too big.", usage=USAGE),
        ScriptedResponse([ToolUsePart("f2", "fetch", {"size": 300_000})], usage=USAGE),
        ScriptedResponse.text("Kept.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        bare = TemporalWorker(
            Worker(c, tools=[fetch]), name="bare", client=temporal_client, payload_limit=100_000
        )
        store = MemoryBlobStore()
        kept = TemporalWorker(
            Worker(c, tools=[fetch], blob_store=store),
            name="kept",
            client=temporal_client,
            payload_limit=100_000,
        )
        with anyio.fail_after(TIMEOUT):
            async with bare, kept:
                refused = await bare.run("Fetch", run_id="big-1")
                stored = await kept.run("Fetch", run_id="big-2")
    [error] = refused.messages[2].tool_results
    assert error.is_error
    assert "payload limit" in error.content and "blob store" in error.content
    [summary] = stored.messages[2].tool_results
    assert not summary.is_error
    assert len(summary.content) < 100_000  # the history has a summary, the store the output
    assert stored.text == "Kept."


async def test_a_hooks_durable_step_is_refused_on_temporal_naming_the_way(
    temporal_client: Any,
) -> None:
    from llm_worker.durable import step
    from llm_worker.errors import HookError
    from llm_worker.hooks import ToolCallContext

    called: list[int] = []

    async def before(ctx: ToolCallContext) -> None:
        await step(lambda: called.append(1), name="stamp")

    async with ScriptedModelServer("anthropic", pay_script()) as server, server.client() as c:
        worker = Worker(c, tools=[pay])
        worker.add_before_tool_call_hook(before)
        durable = TemporalWorker(worker, name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(HookError, match=r"make it a tool"):
                    await durable.run("Pay", run_id="stepped")
    assert called == []


async def test_a_recorded_history_replays_with_the_current_code() -> None:
    """A deploy must not break running workflows: Temporal's replayer checks the commands.

    The history (a run that paused, took a decision, ran the tool and finished) was
    recorded by `record_history()` below; re-record it only for a deliberate break.
    """
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from llm_worker.durable.temporal import PASSTHROUGH
    from llm_worker.durable.temporal._registry import Served, serve, unserve
    from llm_worker.durable.temporal._steps import TemporalInterceptor
    from llm_worker.durable.temporal._workflow import RunWorkflow
    from llm_worker.testing import ScriptedClient

    worker = Worker(ScriptedClient([]), tools=[pay])
    worker._cfg.interceptors.append(TemporalInterceptor())  # pyright: ignore[reportPrivateUsage]
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    replayer = Replayer(
        workflows=[RunWorkflow],
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
    )
    history = WorkflowHistory.from_json("replayed", HISTORY.read_text())
    serve("replay", Served(worker, 10.0, 60.0, 60.0, 2_000_000))
    try:
        with anyio.fail_after(TIMEOUT):
            result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        unserve("replay")
    assert result.replay_failure is None
    assert RAN == []  # activities are never run by a replay


async def record_history(temporal_client: Any) -> None:  # pragma: no cover - a tool
    """Record HISTORY again: `uv run python tests/durable/test_temporal.py HOST:PORT`."""
    async with ScriptedModelServer("anthropic", pay_script()) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[pay]), name="replay", client=temporal_client)
        async with durable:
            await durable.start("Pay", run_id="replayed")
            assert await durable.paused("replayed") is not None
            await durable.decide("replayed", {"p1": Decision.approve()})
            await durable.result("replayed")
            history = await temporal_client.get_workflow_handle("replayed").fetch_history()
    HISTORY.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")


async def test_one_name_is_served_once_per_process(temporal_client: Any) -> None:
    async with ScriptedModelServer("anthropic", []) as server, server.client() as c:
        one = TemporalWorker(Worker(c), name="t", client=temporal_client)
        two = TemporalWorker(Worker(c), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with one:
                with pytest.raises(ConfigurationError, match="already serving"):
                    await two.__aenter__()
            async with two:  # the name is free again once the first left
                assert await two.status("none") is None


def test_a_missing_temporal_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("llm_worker.durable.temporal")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "temporalio", None)
    with pytest.raises(MissingExtraError, match=r"llm-worker\[temporal\]"):
        import llm_worker.durable.temporal  # noqa: F401


if __name__ == "__main__":  # pragma: no cover

    async def _main(target: str) -> None:
        from temporalio.client import Client

        await record_history(await Client.connect(target))

    anyio.run(_main, sys.argv[1])
