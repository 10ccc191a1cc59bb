"""Review probes for budgets (issue 34): spending a pause carries, limits under threads."""

from __future__ import annotations

import contextlib

import anyio
import orjson
import pytest

from limits.test_limits import call, done, echo, pause_script, pausing_worker, ran
from llm_worker import LimitExceededError, Limits, PauseState, RunStatus, Worker
from llm_worker.testing import ScriptedClient

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def test_tool_calls_before_a_pause_count_after_a_resume_with_fresh_limits() -> None:
    # The first run runs echo("a") and pauses before echo("pause"): one call spent.
    with anyio.fail_after(10):
        paused = await pausing_worker(ScriptedClient(pause_script())).run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    assert paused.state.tool_calls == 1
    state = PauseState.from_json(paused.state.to_json())
    assert state.tool_calls == 1
    fresh = Limits(tool_calls=2)  # another process: it never saw echo("a")
    client = ScriptedClient(pause_script()[2:])
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await pausing_worker(client).resume(state, limits=fresh)
    # echo("pause") is the second call; the next answer's echo("t0") the third: refused.
    assert ran == ["a", "pause"]
    assert (info.value.limit, info.value.value, info.value.used) == ("tool_calls", 2, 3)


async def test_the_same_limits_across_a_pause_counts_its_tool_calls_once() -> None:
    budget = Limits(tool_calls=10)
    worker = pausing_worker(ScriptedClient(pause_script()))
    with anyio.fail_after(10):
        paused = await worker.run("go", limits=budget)
        assert paused.state is not None
        state = PauseState.from_json(paused.state.to_json())
        result = await worker.resume(state, limits=budget)
    assert result.status is RunStatus.FINISHED
    assert budget.spent.tool_calls == len(ran) == 4  # a, pause, t0, t0: never a twice


async def test_a_state_saved_before_tool_calls_were_kept_loads_with_none() -> None:
    with anyio.fail_after(10):
        paused = await pausing_worker(ScriptedClient(pause_script())).run("go")
    assert paused.state is not None
    old = orjson.loads(paused.state.to_json())
    del old["tool_calls"]
    assert PauseState.from_dict(old).tool_calls == 0
    old["tool_calls"] = -5  # a forged count is no count
    assert PauseState.from_dict(old).tool_calls == 0


async def test_limits_shared_by_workers_in_threads_with_parallel_calls_count_exactly() -> None:
    # Four Workers, each in its own thread and event loop, each answer three parallel calls:
    # 12 calls asked for, 7 allowed, whichever thread asks.
    budget = Limits(tool_calls=7)

    def one() -> None:
        worker = Worker(ScriptedClient([call(3), done()]), tools=[echo], limits=budget)
        with contextlib.suppress(LimitExceededError):
            worker.run_sync("go")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(anyio.to_thread.run_sync, one)
    assert budget.spent.tool_calls == len(ran) == 7


async def test_a_tool_call_limit_of_zero_refuses_the_first_call_and_the_history_stays_valid() -> (
    None
):
    worker = Worker(ScriptedClient([call(2), done()]), tools=[echo])
    with anyio.fail_after(10), pytest.raises(LimitExceededError):
        await worker.run("go", limits=Limits(tool_calls=0))
    assert ran == []
    uses = {u.id for u in worker.history[1].tool_uses}
    assert {r.tool_use_id for r in worker.history[2].tool_results} == uses
