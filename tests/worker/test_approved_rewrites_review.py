"""Review probes for approved rewrites (issue #28 item 10): the crossings the first tests left.

A decision on a call the hooks already allowed (a batch paused at a later call), a hook that
rewrites differently on resume, a hook before the pausing one that fails on resume, and a
state resumed twice — each through pause → JSON → resume in a fresh Worker.
"""

from __future__ import annotations

from itertools import count
from typing import Any

import anyio
import orjson
import pytest

from llm_worker import Decision, HookError, PauseState, RunStatus, ToolUsePart, Worker, tool
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import Part
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
RAN: list[str] = []


@tool(effect="side_effect")
def shell(cmd: str) -> str:
    """Run a command."""
    RAN.append(cmd)
    return f"ran {cmd}"


def tag(ctx: ToolCallContext) -> None:
    ctx.call.input["cmd"] += " #audited"  # not idempotent: twice, it shows


def sanitize_force(ctx: ToolCallContext) -> None:
    ctx.call.input["cmd"] = ctx.call.input["cmd"].replace(" --force", "")


def approve_rm(ctx: ToolCallContext) -> Pause | None:
    # Only the dangerous call waits: the batch's `ls` is allowed before the pause.
    return Pause("approve?") if "rm" in ctx.call.input["cmd"] and not ctx.resumed else None


def worker_with(*hooks: Any, client: ScriptedClient | None = None) -> Worker:
    worker = Worker(client or ScriptedClient([ScriptedResponse.text("done")]), tools=[shell])
    for hook in hooks:
        worker.add_before_tool_call_hook(hook)
    return worker


async def paused(*cmds: str, hooks: tuple[Any, ...]) -> str:
    calls: list[Part] = [ToolUsePart(f"c{n}", "shell", {"cmd": c}) for n, c in enumerate(cmds, 1)]
    client = ScriptedClient([ScriptedResponse(calls), ScriptedResponse.text("done")])
    RAN.clear()
    with anyio.fail_after(TIMEOUT):
        result = await worker_with(*hooks, client=client).run("go")
    assert result.status is RunStatus.PAUSED
    assert result.state is not None
    assert RAN == []
    return result.state.to_json()


async def resumed(saved: str, *hooks: Any, **decisions: Decision) -> list[str]:
    RAN.clear()
    with anyio.fail_after(TIMEOUT):
        result = await worker_with(*hooks).resume(PauseState.from_json(saved), decisions=decisions)
    assert result.status is RunStatus.FINISHED, result
    return sorted(RAN)


@pytest.mark.parametrize(
    "decision",
    [
        Decision.approve(),
        Decision(True, skip_hooks=False),
        Decision(True, {"cmd": "ls -l"}, skip_hooks=False, merge=True),
    ],
    ids=["approve", "hooks-again", "hooks-again-merged"],
)
async def test_a_decision_on_a_call_already_allowed_applies_its_rewrites_once(
    decision: Decision,
) -> None:
    # c1 went through the chain (tagged, allowed) before c2 paused the batch: a decision
    # given for it too (a UI that answers every call of the batch) must not tag it again.
    saved = await paused("ls", "rm x", hooks=(tag, approve_rm))
    ran = await resumed(saved, tag, approve_rm, c1=decision, c2=Decision.approve())
    first = "ls -l #audited" if decision.input else "ls #audited"
    assert ran == [first, "rm x #audited"]


async def test_a_hook_rewriting_differently_on_resume_approve_runs_what_was_shown() -> None:
    stamps = count()

    def stamp(ctx: ToolCallContext) -> None:  # a different rewrite every time it runs
        ctx.call.input["cmd"] += f" @{next(stamps)}"

    saved = await paused("rm x", hooks=(stamp, approve_rm))
    shown = orjson.loads(saved)["pending"][0]["rewritten_input"]
    assert shown == {"cmd": "rm x @0"}
    # The approval runs what the person saw (PendingCall.arguments), not a new rewrite.
    assert await resumed(saved, stamp, approve_rm, c1=Decision.approve()) == ["rm x @0"]
    # Through the hooks again, the chain starts from the model's arguments: one stamp.
    again = await resumed(saved, stamp, approve_rm, c1=Decision(True, skip_hooks=False))
    assert again == ["rm x @1"]


async def test_a_hook_before_the_pausing_one_failing_on_resume_leaves_the_state_usable() -> None:
    resumes = count()

    def flaky(ctx: ToolCallContext) -> None:
        if ctx.resumed and next(resumes) == 0:
            raise RuntimeError("audit service down")
        ctx.call.input["cmd"] += " #audited"

    saved = await paused("rm x", hooks=(flaky, approve_rm))
    fresh = worker_with(flaky, approve_rm)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="flaky"):
        await fresh.resume(
            PauseState.from_json(saved), decisions={"c1": Decision(True, skip_hooks=False)}
        )
    assert RAN == []
    # The same saved state: an approval skips the hooks and runs their first rewrite once.
    assert await resumed(saved, flaky, approve_rm, c1=Decision.approve()) == ["rm x #audited"]
    assert await resumed(saved, flaky, approve_rm, c1=Decision(True, skip_hooks=False)) == [
        "rm x #audited"
    ]


async def test_resuming_one_state_twice_rewrites_once_each_time() -> None:
    saved = await paused("ls", "rm x", hooks=(tag, approve_rm))
    state = PauseState.from_json(saved)
    for _ in range(2):
        RAN.clear()
        with anyio.fail_after(TIMEOUT):
            await worker_with(tag, approve_rm).resume(state, decisions={"c2": Decision.approve()})
        assert sorted(RAN) == ["ls #audited", "rm x #audited"]
    assert state.to_json() == saved


@pytest.mark.parametrize(
    "forged",
    [{"cmd": 5}, {"cmd": "ls", "extra": {"deep": [1, 2]}}, {}, {"cmd": "\u2028\U0001f600" * 1000}],
    ids=["wrong-type", "extra-key", "missing", "unicode"],
)
async def test_a_forged_rewrite_is_checked_as_any_call_is(forged: dict[str, Any]) -> None:
    # The state is the application's, but a rewrite read from JSON is still arguments: the
    # tool's schema check applies to it as to the model's own, and the model reads the fault.
    saved = await paused("rm x", hooks=(tag, approve_rm))
    body = orjson.loads(saved)
    body["pending"][0]["rewritten_input"] = forged
    RAN.clear()
    fresh = worker_with(tag, approve_rm)
    with anyio.fail_after(TIMEOUT):
        result = await fresh.resume(
            PauseState.from_json(orjson.dumps(body)), decisions={"c1": Decision.approve()}
        )
    assert result.status is RunStatus.FINISHED
    (outcome,) = fresh.history[2].tool_results
    if str(forged.get("cmd", "")).startswith("\u2028"):
        assert [forged["cmd"]] == RAN and not outcome.is_error
    else:  # the schema refuses it (an unknown key too), as it would the model's
        assert RAN == [] and outcome.is_error


async def test_approving_a_later_call_the_hooks_never_saw_still_sanitizes_it() -> None:
    # c1 paused the batch; c2 never reached the hooks. A UI shows a card for each pending call
    # and approves both: c2's approval must not skip a sanitizing rewrite it never had.
    saved = await paused("rm a --force", "rm b --force", hooks=(sanitize_force, tag, approve_rm))
    assert "rewritten_input" not in orjson.loads(saved)["pending"][1]
    ran = await resumed(
        saved, sanitize_force, tag, approve_rm, c1=Decision.approve(), c2=Decision.approve()
    )
    assert ran == ["rm a #audited", "rm b #audited"]
