"""@tool(requires_approval=True): the run pauses before the call until a person decides it."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import (
    Aborted,
    Decision,
    HookError,
    PauseState,
    RunResult,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.hooks import Abort, Pause, Skip, ToolCallContext
from llm_worker.messages import Part
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.tools import tool_meta

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
RAN: list[str] = []


@tool(requires_approval=True)
async def pay(invoice: str) -> str:
    """Pay an invoice."""
    RAN.append(invoice)
    return f"{invoice} paid"


@tool(effect="read_only")
async def balance() -> str:
    """Read the balance."""
    RAN.append("balance")
    return "100"


def pay_then(answer: str = "Done.", *calls: ToolUsePart) -> ScriptedClient:
    first: list[Part] = list(calls) or [ToolUsePart("c1", "pay", {"invoice": "INV-7"})]
    return ScriptedClient([ScriptedResponse(first), ScriptedResponse.text(answer)])


async def paused_run(worker: Worker) -> PauseState:
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("pay it")
    assert result.status is RunStatus.PAUSED, result
    assert result.state is not None
    return PauseState.from_json(result.state.to_json())


async def resumed(worker: Worker, state: PauseState, **decisions: Decision) -> RunResult:
    with anyio.fail_after(TIMEOUT):
        return await worker.resume(state, decisions=decisions)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_the_mark_is_tool_metadata_for_functions_and_hand_written_tools() -> None:
    class Wire:
        name = "wire"
        description = "Wire money."
        requires_approval = True

        def __init__(self) -> None:
            self.input_schema: dict[str, Any] = {"type": "object", "properties": {}}

        async def execute(self, input_json: str) -> str:
            return "wired"

    assert pay.meta.requires_approval
    assert not balance.meta.requires_approval
    assert tool_meta(Wire()).requires_approval


async def test_the_call_pauses_unrun_then_an_approval_runs_it_once_in_a_new_worker() -> None:
    worker = Worker(pay_then(), tools=[balance, pay])
    state = await paused_run(worker)
    assert RAN == []
    assert state.reason == "pay requires approval (call c1)"
    assert [(p.call.name, p.status) for p in state.pending] == [("pay", "pending")]

    fresh = Worker(ScriptedClient([ScriptedResponse.text("Paid.")]), tools=[balance, pay])
    result = await resumed(fresh, state, c1=Decision.approve())
    assert result.status is RunStatus.FINISHED
    assert RAN == ["INV-7"]
    assert fresh.history[-2].tool_results[0].content == "INV-7 paid"


async def test_a_denied_call_never_runs_and_the_model_reads_why() -> None:
    worker = Worker(pay_then("Not paid."), tools=[pay])
    state = await paused_run(worker)
    result = await resumed(worker, state, c1=Decision.deny("over budget"))
    assert result.text == "Not paid."
    assert RAN == []
    [denied] = worker.history[-2].tool_results
    assert denied.is_error
    assert "over budget" in denied.content


async def test_resumed_without_a_decision_the_call_pauses_again() -> None:
    worker = Worker(pay_then(), tools=[pay])
    state = await paused_run(worker)
    again = await resumed(worker, state)
    assert again.status is RunStatus.PAUSED
    assert again.reason == "pay requires approval (call c1)"
    assert RAN == []


async def test_hooks_run_first_and_their_skip_or_abort_wins() -> None:
    async def no_payments(ctx: ToolCallContext) -> Skip:
        return Skip("payments are off today")

    worker = Worker(pay_then("Skipped."), tools=[pay])
    worker.add_before_tool_call_hook(no_payments)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("pay it")
    assert result.status is RunStatus.FINISHED
    assert "payments are off today" in worker.history[-2].tool_results[0].content

    async def stop(ctx: ToolCallContext) -> Abort:
        return Abort("fraud suspected")

    aborting = Worker(pay_then(), tools=[pay])
    aborting.add_before_tool_call_hook(stop)
    with anyio.fail_after(TIMEOUT), pytest.raises(Aborted, match="fraud suspected"):
        await aborting.run("pay it")
    assert RAN == []


async def test_a_failing_neighbour_hook_fails_the_run_before_any_pause() -> None:
    async def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook bug")

    worker = Worker(pay_then(), tools=[pay])
    worker.add_before_tool_call_hook(broken)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="hook bug"):
        await worker.run("pay it")
    assert RAN == []


async def test_a_hook_approves_safe_calls_and_the_others_pause() -> None:
    async def small_ones(ctx: ToolCallContext) -> None:
        if ctx.call.input.get("invoice", "").startswith("SMALL-"):
            ctx.approved = True

    calls = [
        ToolUsePart("c1", "pay", {"invoice": "SMALL-1"}),
        ToolUsePart("c2", "pay", {"invoice": "BIG-2"}),
    ]
    worker = Worker(pay_then("Both paid.", *calls), tools=[pay])
    worker.add_before_tool_call_hook(small_ones)
    state = await paused_run(worker)
    assert [(p.call.id, p.status, p.approved) for p in state.pending] == [
        ("c1", "allowed", True),
        ("c2", "pending", False),
    ]
    assert RAN == []  # a paused batch runs nothing
    result = await resumed(worker, state, c2=Decision.approve())
    assert result.text == "Both paid."
    assert RAN == ["SMALL-1", "BIG-2"]


async def test_an_approval_that_reruns_the_hooks_is_not_asked_for_again() -> None:
    seen: list[tuple[bool, bool]] = []

    async def audit(ctx: ToolCallContext) -> None:
        seen.append((ctx.resumed, ctx.approved))

    worker = Worker(pay_then(), tools=[pay])
    worker.add_before_tool_call_hook(audit)
    state = await paused_run(worker)
    result = await resumed(worker, state, c1=Decision(True, skip_hooks=False))
    assert result.status is RunStatus.FINISHED
    assert seen == [(False, False), (True, True)]
    assert RAN == ["INV-7"]


async def test_a_pausing_neighbour_keeps_the_approval_through_json() -> None:
    async def approve_then_hold(ctx: ToolCallContext) -> Pause | None:
        ctx.approved = True
        return None if ctx.resumed else Pause("hold on")

    worker = Worker(pay_then(), tools=[pay])
    worker.add_before_tool_call_hook(approve_then_hold)
    state = await paused_run(worker)
    assert state.reason == "hold on"
    assert state.pending[0].approved
    result = await resumed(worker, state)
    assert result.status is RunStatus.FINISHED
    assert RAN == ["INV-7"]


async def test_with_early_start_the_call_still_waits_for_approval() -> None:
    worker = Worker(pay_then(), tools=[pay], early_tool_start=True)
    state = await paused_run(worker)
    assert RAN == []
    result = await resumed(worker, state, c1=Decision.approve())
    assert result.status is RunStatus.FINISHED
    assert RAN == ["INV-7"]


async def test_cancelling_the_approved_call_leaves_a_sendable_history() -> None:
    started = anyio.Event()

    @tool(requires_approval=True)
    async def slow_pay(invoice: str) -> str:
        """Pay, slowly."""
        started.set()
        await anyio.sleep_forever()
        return "unreachable"

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "slow_pay", {"invoice": "X"})])])
    worker = Worker(client, tools=[slow_pay])
    state = await paused_run(worker)
    outcome: list[RunResult] = []
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:

            async def go() -> None:
                outcome.append(await worker.resume(state, decisions={"c1": Decision.approve()}))

            group.start_soon(go)
            await started.wait()
            worker.cancel()
    assert outcome[0].status is RunStatus.CANCELLED
    [result] = worker.history[-1].tool_results
    assert result.is_error and result.tool_use_id == "c1"


@pytest.mark.parametrize("provider", ["gemini", "anthropic"])
async def test_approve_and_deny_over_a_real_wire(provider: str) -> None:
    script = [
        ScriptedResponse(
            [
                ToolUsePart("", "pay", {"invoice": "INV-1"}),
                ToolUsePart("", "pay", {"invoice": "INV-2"}),
            ]
        ),
        ScriptedResponse.text("One paid, one refused."),
    ]
    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        worker = Worker(client, tools=[pay])
        state = await paused_run(worker)
        first, second = (p.call.id for p in state.pending)
        decisions = {first: Decision.approve(), second: Decision.deny("duplicate")}
        with anyio.fail_after(TIMEOUT):
            result = await worker.resume(state, decisions=decisions)
    assert result.text == "One paid, one refused."
    assert RAN == ["INV-1"]
    body = server.requests[1].body
    assert b"INV-1 paid" in body
    assert b"duplicate" in body
