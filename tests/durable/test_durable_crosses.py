"""DurableWorker crossed with failing hooks, cancellation, structured output and early start."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import Decision, OutputValidationError, RunStatus, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.errors import Aborted, HookError
from llm_worker.events import UsageEvent
from llm_worker.hooks import Abort, ToolCallContext
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 30.0
Engine = Callable[..., Any]  # conftest's `engine`: (worker, name=...) -> DBOS's or Temporal's
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)
RAN: list[str] = []


@tool(effect="read_only")
def weather(city: str) -> str:
    """Read the weather."""
    RAN.append(city)
    return f"sunny in {city}"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(f"pay {amount}")
    return f"paid {amount}"


class Invoice(BaseModel):
    """An invoice."""

    number: str
    total: float


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"


def script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse([ToolUsePart("c1", "weather", {"city": "Kyoto"})], usage=USAGE),
        ScriptedResponse.text("Sunny.", usage=USAGE),
    ]


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_structured_durable_run_returns_its_typed_output(
    engine: Engine, mode: Literal["native", "tool"]
) -> None:
    fields = {"number": "A-1", "total": 12.5}
    answer = (
        ScriptedResponse.text(json.dumps(fields), usage=USAGE)
        if mode == "native"
        else ScriptedResponse([ToolUsePart("o1", "final_result", fields)], usage=USAGE)
    )
    async with ScriptedModelServer("anthropic", [answer]) as server, server.client() as c:
        worker = Worker(c, output_type=Invoice, output_mode=mode, output_tool_name="final_result")
        durable = engine(worker, name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                first = await durable.run("Read it", run_id="inv-1")
                again = await durable.result("inv-1")
    assert first.output == again.output == Invoice(number="A-1", total=12.5)


async def test_a_plain_durable_runs_output_is_its_text(engine: Engine) -> None:
    async with ScriptedModelServer("anthropic", script()) as server, server.client() as c:
        durable = engine(Worker(c, tools=[weather]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                result = await durable.run("Weather?")
    assert result.output == result.text == "Sunny."


async def test_a_durable_run_whose_output_never_fits_raises_the_output_error(
    engine: Engine,
) -> None:
    bad = ScriptedResponse.text('{"number": 1}', usage=USAGE)
    async with ScriptedModelServer("anthropic", [bad]) as server, server.client() as c:
        worker = Worker(c, output_type=Invoice, output_retries=0)
        durable = engine(worker, name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(OutputValidationError) as raised:
                    await durable.run("Read it", run_id="inv-2")
                with pytest.raises(OutputValidationError):
                    await durable.result("inv-2")
    assert raised.value.attempts == 1


async def test_a_raising_hook_fails_the_durable_run_with_a_hook_error(engine: Engine) -> None:
    async def before(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook broke")

    async with ScriptedModelServer("anthropic", script()) as server, server.client() as c:
        worker = Worker(c, tools=[weather])
        worker.add_before_tool_call_hook(before)
        durable = engine(worker, name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(HookError, match="hook broke"):
                    await durable.run("Weather?", run_id="h-1")
                with pytest.raises(HookError):
                    await durable.result("h-1")
    assert RAN == []


async def test_an_aborting_hook_ends_the_durable_run_aborted(engine: Engine) -> None:
    async def before(ctx: ToolCallContext) -> Abort:
        return Abort("not today")

    async with ScriptedModelServer("anthropic", script()) as server, server.client() as c:
        worker = Worker(c, tools=[weather])
        worker.add_before_tool_call_hook(before)
        durable = engine(worker, name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(Aborted, match="not today"):
                    await durable.run("Weather?", run_id="a-1")
                with pytest.raises(Aborted):
                    await durable.result("a-1")
    assert RAN == []


async def test_cancelling_the_caller_leaves_the_run_going(engine: Engine) -> None:
    script_ = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script_) as server, server.client() as c:
        durable = engine(Worker(c, tools=[pay]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(lambda: durable.run("Pay", run_id="pay-c"))
                        assert await durable.paused("pay-c") is not None
                        scope.cancel()
                await durable.decide("pay-c", {"p1": Decision.approve()})
                result = await durable.result("pay-c")
    assert result.status is RunStatus.FINISHED
    assert RAN == ["pay 5"]


async def test_early_started_tools_are_recorded_steps_of_a_durable_run(tmp_path: Path) -> None:
    async with ScriptedModelServer("anthropic", script()) as server, server.client() as c:
        worker = Worker(c, tools=[weather], early_tool_start=True)
        durable = DurableWorker(worker, name="t", database_url=url(tmp_path))
        with anyio.fail_after(TIMEOUT):
            async with durable:
                result = await durable.run("Weather?", run_id="e-1")
                from dbos import DBOS

                steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("e-1")]
    assert result.text == "Sunny."
    assert RAN == ["Kyoto"]
    assert "llm-worker tool weather c1" in steps


def test_every_error_a_run_raises_survives_pickling() -> None:
    import pickle

    from llm_worker.errors import MCPConnectionError, MissingExtraError, ProviderError

    errors = [
        OutputValidationError("no fit", raw="{}", errors=["a: missing"], attempts=2),
        MissingExtraError("dbos", "DurableWorker"),
        MCPConnectionError("down", server="srv"),
        ProviderError("boom", provider="anthropic", status_code=529),
    ]
    for error in errors:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error)
        assert back.__dict__ == error.__dict__


async def test_worker_cancel_ends_a_durable_run_cancelled(engine: Engine) -> None:
    started, release = anyio.Event(), anyio.Event()

    @tool(effect="read_only")
    async def slow(city: str) -> str:
        """Wait."""
        started.set()
        await release.wait()
        return city

    first = [ScriptedResponse([ToolUsePart("s1", "slow", {"city": "Kyoto"})], usage=USAGE)]
    script_ = [*first, ScriptedResponse.text("done", usage=USAGE)]
    async with ScriptedModelServer("anthropic", script_) as server, server.client() as c:
        worker = Worker(c, tools=[slow])
        durable = engine(worker, name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Go", run_id="cx-1")
                await started.wait()
                worker.cancel()
                release.set()  # a cancel that did not land lets the run finish
                result = await durable.result(run_id)
    assert result.status is RunStatus.CANCELLED


async def test_a_decision_of_the_wrong_shape_is_refused_by_decide(engine: Engine) -> None:
    from llm_worker.errors import PauseStateError

    script_ = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    tampered: list[Any] = [
        Decision(True, input=cast(Any, "amount=500"), merge=True),  # merged as {}: approved as-is
        {"allow": True},
    ]
    async with ScriptedModelServer("anthropic", script_) as server, server.client() as c:
        durable = engine(Worker(c, tools=[pay]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="pay-t")
                assert await durable.paused(run_id) is not None
                for decision in tampered:
                    with pytest.raises(PauseStateError, match="p1"):
                        await durable.decide(run_id, {"p1": decision})
                assert RAN == []
                await durable.decide(run_id, {"p1": Decision.deny("no")})
                result = await durable.result(run_id)
    assert result.status is RunStatus.FINISHED
    assert RAN == []
