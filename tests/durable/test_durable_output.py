"""A durable run's structured output is the one the run accepted, rewritten arguments included."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import Decision, RunStatus, ToolUsePart, Worker
from llm_worker.durable import DurableWorker
from llm_worker.durable._records import run_from, run_record
from llm_worker.hooks import Pause, ToolCallContext, TurnEndContext
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.worker._output import output_plan

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0


class Invoice(BaseModel):
    number: str
    total: float


class Strict(BaseModel):
    """Another type: the recorded output no longer fits it."""

    number: int


def _upper(ctx: ToolCallContext) -> None:
    if ctx.call.name == "final_result":
        ctx.call.input = {**ctx.call.input, "number": str(ctx.call.input["number"]).upper()}


def _answer() -> list[ScriptedResponse]:
    return [ScriptedResponse([ToolUsePart("o1", "final_result", {"number": "a-1", "total": 4})])]


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat"])
async def test_a_rewritten_output_is_the_durable_runs_output_in_any_process(
    provider: str, database_url: str
) -> None:
    async with ScriptedModelServer(provider, _answer()) as server, server.client() as c:
        worker = Worker(c, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(_upper)
        durable = DurableWorker(worker, name="t", database_url=database_url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                result = await durable.run("Read it", run_id="out-1")
                again = await durable.result("out-1")
    assert result.output == again.output == Invoice(number="A-1", total=4)
    # What another process reads: the record alone, validated again by its own plan.
    plan = output_plan(Invoice, "tool", 1, "final_result")
    assert run_from(run_record(result, plan), plan).output == Invoice(number="A-1", total=4)


async def test_a_turn_end_pause_of_a_durable_run_keeps_the_rewritten_output(
    tmp_path: Path,
) -> None:
    def review(ctx: TurnEndContext) -> Pause | None:
        return None if ctx.resumed else Pause("review the invoice")

    async with ScriptedModelServer("gemini", _answer()) as server, server.client() as c:
        worker = Worker(c, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(_upper)
        worker.add_on_turn_end_hook(review)
        url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
        durable = DurableWorker(worker, name="t", database_url=url)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Read it", run_id="out-2")
                state = await durable.paused(run_id)  # read back from its JSON form
                assert state is not None and state.output_call is not None
                assert state.output_call.input["number"] == "A-1"
                await durable.decide(run_id, dict[str, Decision]())
                result = await durable.result(run_id)
    assert result.status is RunStatus.FINISHED
    assert result.output == Invoice(number="A-1", total=4)


def test_a_record_without_an_output_or_with_one_that_no_longer_fits_reads_the_answer() -> None:
    from llm_worker import Message, RunResult

    answer = Message("assistant", [ToolUsePart("o1", "final_result", {"number": 7})])
    result = RunResult(RunStatus.FINISHED, messages=[Message.user("Read it"), answer])
    plan = output_plan(Strict, "tool", 1, "final_result")
    older = run_record(result)  # as an earlier version recorded it: no output
    assert older["output"] is None
    assert run_from(older, plan).output == Strict(number=7)
    changed = {**older, "output": {"number": "not a number"}}
    assert run_from(changed, plan).output == Strict(number=7)
