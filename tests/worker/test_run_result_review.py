"""Review probes of `RunResult.output`: copies, a legitimately None output, durable records."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable

import anyio
import orjson
import pytest
from pydantic import BaseModel

from llm_worker import NoOutputError, RunResult, RunStatus, StopReason, Worker
from llm_worker.durable._records import run_from, run_record
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.worker._output import OutputPlan

pytestmark = pytest.mark.anyio


class Invoice(BaseModel):
    number: str


def test_dataclasses_replace_keeps_the_output() -> None:
    # Before: TypeError (RunResult.__init__() got an unexpected keyword argument '_output').
    done = RunResult(RunStatus.FINISHED, text="x", output=Invoice(number="1"))
    assert dataclasses.replace(done, text="y").output == Invoice(number="1")
    assert dataclasses.replace(done, output=Invoice(number="2")).output.number == "2"
    paused = dataclasses.replace(done, status=RunStatus.PAUSED)
    with pytest.raises(NoOutputError, match="paused"):
        paused.output  # noqa: B018


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))])
def test_a_copied_result_keeps_its_output_and_its_absence(
    how: Callable[[RunResult[Invoice]], RunResult[Invoice]],
) -> None:
    done = RunResult(RunStatus.FINISHED, output=Invoice(number="1"))
    assert how(done).output == Invoice(number="1") and how(done) == done
    refused: RunResult[Invoice] = RunResult(RunStatus.FINISHED, refusal="no")
    again = how(refused)
    assert not again.has_output
    with pytest.raises(NoOutputError) as raised:
        again.output  # noqa: B018
    assert raised.value.refused and raised.value.status == "finished"


async def test_an_output_type_that_admits_none_reads_none_as_an_output() -> None:
    answer = ScriptedResponse.output({"result": None})
    worker = Worker(ScriptedClient([answer]), output_type=Invoice | None)  # type: ignore[arg-type]
    with anyio.fail_after(5):
        result = await worker.run("Any invoice?")
    assert result.has_output and result.output is None and result.output_or_none is None
    # Its durable record reads back the same (JSON, a None output is no missing output).
    plan = OutputPlan(Invoice | None, "native", 1, "final_result")
    back = run_from(orjson.loads(orjson.dumps(run_record(result, plan))), plan)
    assert back.has_output and back.output is None


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (RunResult(RunStatus.PAUSED, reason="approve"), "paused"),
        (RunResult(RunStatus.CANCELLED), "cancelled"),
        (
            RunResult(RunStatus.FINISHED, refusal="I can't", stop_reason=StopReason.REFUSAL),
            "finished",
        ),
    ],
)
def test_a_record_of_a_run_without_output_reads_back_without_one(
    result: RunResult[Invoice], status: str
) -> None:
    plan = OutputPlan(Invoice, "native", 1, "final_result")
    record = run_record(result, plan)
    assert record["output"] is None
    back = run_from(orjson.loads(orjson.dumps(record)), plan)
    assert back.output_or_none is None
    with pytest.raises(NoOutputError) as raised:
        back.output  # noqa: B018
    assert raised.value.status == status
