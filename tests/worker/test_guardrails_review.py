"""Review probes of issue 35's guardrails: sub-agents, hanging and failing checks."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from llm_worker import (
    GuardrailTripped,
    HookError,
    InputGuardrailContext,
    ToolUsePart,
    Trip,
    Worker,
    input_guardrail,
    tool,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0


def _child(log: Path) -> tuple[Worker[Any], Any]:
    """A sub-agent that books a transfer (a side effect written to `log`), and its tool."""

    @tool(effect="side_effect")
    def transfer(amount: int) -> str:
        """Move money."""
        with log.open("a") as f:
            f.write(f"transfer {amount}\n")
        return "moved"

    child = Worker(
        ScriptedClient(
            lambda request: (
                ScriptedResponse.text("done")
                if request.tool_results
                else ScriptedResponse([ToolUsePart("t", "transfer", {"amount": 5})])
            )
        ),
        name="payer",
    )
    return child, transfer


@pytest.mark.parametrize("declared", ["late_tool", "read_only"])
async def test_a_childs_side_effect_waits_for_the_parents_input_guardrail(
    tmp_path: Path, declared: str
) -> None:
    # The sub-agent tool itself may read as read-only (its Worker had no tools yet when
    # as_tool was called, or the application said so), so it starts early beside the
    # parent's pending guardrail; the child's own side-effecting tool must still wait.
    log = tmp_path / "effects.log"
    for seed in range(20):
        rng = random.Random(seed)
        child, transfer = _child(log)
        if declared == "late_tool":
            agent = child.as_tool(name="pay", description="Pays.")
            child.add_tool(transfer)  # after as_tool: the agent tool reads as read-only
        else:
            child.add_tool(transfer)
            agent = child.as_tool(name="pay", description="Pays.", effect="read_only")
        wait = rng.randrange(200)

        @input_guardrail
        async def slow_refusal(ctx: InputGuardrailContext) -> Trip | None:
            for _ in range(wait):  # noqa: B023
                await anyio.lowlevel.checkpoint()
            return Trip("not allowed")

        parent = Worker(
            ScriptedClient(
                [
                    ScriptedResponse([ToolUsePart("p", "pay", {"input": "pay 5"})]),
                    ScriptedResponse.text("ok"),
                ]
            ),
            tools=[agent],
            guardrails=[slow_refusal],
            early_tool_start=True,
        )
        with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped):
            await parent.run("pay 5")
    assert not log.exists() or log.read_text() == ""


async def test_a_guardrail_raising_cancelled_error_fails_closed(tmp_path: Path) -> None:
    # A check whose own inner timeout leaks asyncio.CancelledError (not a cancel of the run).
    log = tmp_path / "effects.log"

    @tool(effect="side_effect")
    def transfer(amount: int) -> str:
        """Move money."""
        log.write_text("moved")
        return "moved"

    @input_guardrail
    async def leaky(ctx: InputGuardrailContext) -> Trip | None:
        await anyio.lowlevel.checkpoint()
        raise asyncio.CancelledError

    worker = Worker(
        ScriptedClient(
            [
                ScriptedResponse([ToolUsePart("c", "transfer", {"amount": 5})]),
                ScriptedResponse.text("ok"),
            ]
        ),
        tools=[transfer],
        guardrails=[leaky],
    )
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError):
        await worker.run("pay")
    assert not log.exists()


async def test_a_cancel_does_not_wait_for_a_sync_guardrail_stuck_in_its_thread() -> None:
    import threading

    stuck = threading.Event()
    entered = threading.Event()

    @input_guardrail
    def blocking(ctx: InputGuardrailContext) -> Trip | None:
        entered.set()
        stuck.wait(30)  # a classifier call that never answers
        return None

    worker = Worker(ScriptedClient([ScriptedResponse.text("ok")]), guardrails=[blocking])
    started = 0.0
    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(worker.run, "hi")
                await anyio.to_thread.run_sync(entered.wait, 5.0)
                started = anyio.current_time()
                group.cancel_scope.cancel()
        assert anyio.current_time() - started < 2.0
    finally:
        stuck.set()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_hung_guardrail_with_a_timeout_fails_closed(tmp_path: Path, kind: str) -> None:
    import threading

    log = tmp_path / "effects.log"
    never = threading.Event()

    @tool(effect="side_effect")
    def transfer(amount: int) -> str:
        """Move money."""
        log.write_text("moved")
        return "moved"

    async def hangs(ctx: InputGuardrailContext) -> Trip | None:
        await anyio.sleep_forever()

    def blocks(ctx: InputGuardrailContext) -> Trip | None:
        never.wait(30)
        return None

    guard = input_guardrail(hangs if kind == "async" else blocks, name="slow", timeout=0.2)
    worker = Worker(
        ScriptedClient(
            [
                ScriptedResponse([ToolUsePart("c", "transfer", {"amount": 5})]),
                ScriptedResponse.text("ok"),
            ]
        ),
        tools=[transfer],
        guardrails=[guard],
        early_tool_start=True,
    )
    try:
        with anyio.fail_after(TIMEOUT), pytest.raises(HookError) as caught:
            await worker.run("pay")
    finally:
        never.set()
    assert "timeout of 0.2 s" in str(caught.value)
    assert caught.value.hook == "slow"
    assert not log.exists()


@pytest.mark.parametrize("timeout", [0, -1, True, "1", float("nan")])
def test_a_guardrail_timeout_must_be_positive_seconds(timeout: Any) -> None:
    from llm_worker import ConfigurationError, output_guardrail

    with pytest.raises(ConfigurationError):
        input_guardrail(lambda ctx: None, timeout=timeout)
    with pytest.raises(ConfigurationError):
        output_guardrail(lambda ctx: None, timeout=timeout)


async def test_a_handed_over_workers_side_effect_waits_for_the_input_guardrail(
    tmp_path: Path,
) -> None:
    # handoff() is read-only itself; the Worker it hands over to books a transfer at once.
    from llm_worker import handoff

    log = tmp_path / "effects.log"
    for seed in range(10):
        rng = random.Random(seed)
        wait = rng.randrange(200)
        billing, transfer = _child(log)
        billing.add_tool(transfer)

        @input_guardrail
        async def slow_refusal(ctx: InputGuardrailContext) -> Trip | None:
            for _ in range(wait):  # noqa: B023
                await anyio.lowlevel.checkpoint()
            return Trip("not allowed")

        front = Worker(
            ScriptedClient([ScriptedResponse([ToolUsePart("h", "transfer_to_payer", {})])]),
            tools=[handoff(billing, name="transfer_to_payer")],
            guardrails=[slow_refusal],
            early_tool_start=True,
        )
        with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped):
            await front.run("pay 5")
    assert not log.exists() or log.read_text() == ""
