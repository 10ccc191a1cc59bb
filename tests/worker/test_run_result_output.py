"""`RunResult.output` when a run has none, and `OutputRejected` for an answer that did not fit."""

from __future__ import annotations

import pickle
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import (
    NoOutputError,
    OutputPartial,
    OutputRejected,
    OutputValidationError,
    PauseState,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStatus,
    StopReason,
    Worker,
)
from llm_worker.hooks import Pause, Skip, ToolCallContext, TurnEndContext
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedResponse,
    decode_request,
)

pytestmark = pytest.mark.anyio

TOOL = "final_result"


class Invoice(BaseModel):
    number: str
    total: float


def _pause_once() -> Any:
    seen: list[int] = []

    def hook(ctx: TurnEndContext) -> Pause | None:
        seen.append(1)
        return Pause("review") if len(seen) == 1 else None

    return hook


async def _events(worker: Worker[Invoice], prompt: str) -> list[RunEvent[Invoice]]:
    events: list[RunEvent[Invoice]] = []
    with anyio.fail_after(10):
        async with worker.stream(prompt) as stream:
            events.extend([event async for event in stream])
    return events


async def test_a_paused_runs_output_raises_a_typed_error_then_the_resume_has_it() -> None:
    client = ScriptedClient([ScriptedResponse.output(Invoice(number="A", total=1))])
    worker = Worker(client, output_type=Invoice)
    worker.add_on_turn_end_hook(_pause_once())
    with anyio.fail_after(5):
        paused = await worker.run("Go.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    assert paused.output_or_none is None and not paused.has_output
    with pytest.raises(NoOutputError, match="paused") as caught:
        paused.output.total  # noqa: B018
    assert caught.value.status == "paused" and not caught.value.refused
    state = PauseState.from_json(paused.state.to_json())
    with anyio.fail_after(5):
        resumed = await Worker(client, output_type=Invoice).resume(state)
    assert resumed.output == resumed.output_or_none == Invoice(number="A", total=1)


async def test_a_refusal_and_a_cancel_have_no_output() -> None:
    refusing = ScriptedClient([ScriptedResponse.text("No.", stop_reason=StopReason.REFUSAL)])
    with anyio.fail_after(5):
        refused = await Worker(refusing, output_type=Invoice).run("Go.")
    assert refused.status is RunStatus.FINISHED and refused.refusal == "No."
    with pytest.raises(NoOutputError, match="refused") as caught:
        refused.output  # noqa: B018
    assert caught.value.refused and "No." not in str(caught.value)  # no content in errors
    cancelled: RunResult[Invoice] = RunResult(RunStatus.CANCELLED, reason="stop")
    with pytest.raises(NoOutputError, match="cancelled"):
        cancelled.output  # noqa: B018


def test_an_output_of_none_that_the_type_admits_is_read_as_it_is() -> None:
    finished: RunResult[int | None] = RunResult(RunStatus.FINISHED, output=None)
    assert finished.output is None and finished.has_output


def test_the_error_and_the_result_survive_pickling() -> None:
    result = RunResult(RunStatus.FINISHED, text="x", output=Invoice(number="A", total=1))
    again = pickle.loads(pickle.dumps(result))
    assert again == result and again.output == Invoice(number="A", total=1)
    error = NoOutputError("none", status="paused", refused=False)
    loaded = pickle.loads(pickle.dumps(error))
    assert loaded.status == "paused" and str(loaded) == "none"


async def test_a_rejected_native_answer_is_an_event_with_what_the_model_reads() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse.output('{"number": "A", "total": "lots"}'),
            ScriptedResponse.output(Invoice(number="A", total=3)),
        ]
    )
    worker = Worker(client, output_type=Invoice)
    events = await _events(worker, "Go.")
    [rejected] = [e for e in events if isinstance(e, OutputRejected)]
    assert rejected.errors == [
        "total: Input should be a valid number, unable to parse string as a number (got 'lots')"
    ]
    assert rejected.attempt == 1 and rejected.retries_left == 1
    assert rejected.message == client.requests[1].messages[-1].text  # sent as it is
    # The rejected answer's partials come before the event, the accepted answer's after it.
    at = events.index(rejected)
    after = [e.value for e in events[at:] if isinstance(e, OutputPartial)]
    assert after[-1] == Invoice(number="A", total=3)


async def test_the_last_rejection_is_sent_before_the_run_fails() -> None:
    bad = ScriptedResponse.output('{"number": "A"}')
    worker = Worker(ScriptedClient([bad, bad]), output_type=Invoice, output_retries=1)
    seen: list[OutputRejected] = []

    async def read() -> None:
        async with worker.stream("Go.") as stream:
            async for event in stream:
                if isinstance(event, OutputRejected):
                    seen.append(event)

    with anyio.fail_after(5), pytest.raises(OutputValidationError):
        await read()
    assert [(r.attempt, r.retries_left) for r in seen] == [(1, 1), (2, 0)]
    assert all(r.errors == ["total: required, but missing"] for r in seen)


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
async def test_a_rejected_output_call_carries_its_problems_one_a_line(provider: str) -> None:
    script = [
        ScriptedResponse.output({"number": 5}, tool=TOOL),
        ScriptedResponse.output({"number": "B", "total": 2}, tool=TOOL),
    ]
    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        events = await _events(worker, "Go.")
        await client.aclose()
    [rejected] = [e for e in events if isinstance(e, OutputRejected)]
    assert sorted(rejected.errors) == [
        "number: Input should be a valid string (got 5)",
        "total: required, but missing",
    ]
    # What the model read: the output tool's error result, as the next request carries it.
    sent = decode_request(provider, server.requests[1].json())
    [result] = sent.messages[-1].tool_results
    assert rejected.message == result.content  # (is_error: not on the Responses wire)
    last = events[-1]
    assert isinstance(last, RunCompleted) and last.result.output == Invoice(number="B", total=2)


async def test_a_skipped_output_call_is_rejected_with_the_result_as_its_error() -> None:
    def skip_first(ctx: ToolCallContext) -> Skip | None:
        return Skip("not yet") if ctx.call.input.get("number") == "A" else None

    script = [
        ScriptedResponse.output({"number": "A", "total": 1}, tool=TOOL),
        ScriptedResponse.output({"number": "B", "total": 2}, tool=TOOL),
    ]
    worker = Worker(ScriptedClient(script), output_type=Invoice, output_mode="tool")
    worker.add_before_tool_call_hook(skip_first)
    events = await _events(worker, "Go.")
    [rejected] = [e for e in events if isinstance(e, OutputRejected)]
    assert rejected.errors == [rejected.message] and "not yet" in rejected.message
