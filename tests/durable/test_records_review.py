"""Review probes: a durable run's recorded structured output reads back as the accepted one."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from llm_worker import Message, RunResult, RunStatus, ToolUsePart
from llm_worker.durable._records import run_from, run_record
from llm_worker.messages import ToolResultPart
from llm_worker.worker._output import output_plan

TOOL = "final_result"


class Aliased(BaseModel):
    model_config = ConfigDict(frozen=True)
    invoice_number: str = Field(alias="invoiceNumber")
    total: float


class Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")
    number: str

    @computed_field
    @property
    def upper(self) -> str:
        return self.number.upper()


def _finished(output: Any, call_input: dict[str, Any]) -> RunResult[Any]:
    answer = Message("assistant", [ToolUsePart("o1", TOOL, call_input)])
    done = Message("user", [ToolResultPart("o1", "accepted", name=TOOL)])
    messages = [Message.user("Read it"), answer, done]
    return RunResult(RunStatus.FINISHED, messages=messages, output=output)


def test_a_recorded_output_with_aliases_reads_back_as_the_accepted_one() -> None:
    # The model writes the alias; a hook rewrote the number; the record must keep the rewrite.
    plan = output_plan(Aliased, "tool", 1, TOOL)
    accepted = Aliased.model_validate({"invoiceNumber": "A-1", "total": 4})
    result = _finished(accepted, {"invoiceNumber": "a-1", "total": 4})
    assert run_from(run_record(result, plan), plan).output == accepted


def test_a_recorded_output_with_a_computed_field_reads_back_as_the_accepted_one() -> None:
    plan = output_plan(Forbid, "tool", 1, TOOL)
    accepted = Forbid(number="B-2")
    result = _finished(accepted, {"number": "b-2"})
    assert run_from(run_record(result, plan), plan).output == accepted
