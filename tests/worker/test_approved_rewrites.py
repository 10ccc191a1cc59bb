"""An approved call keeps the rewrites of the hooks that ran before the pause (issue #28, 10).

Hooks `sanitize` (strips `--force`) then `approval` (pauses unless resumed): whichever way
the run goes on — resumed without a decision, with `Decision.approve()`, with
`skip_hooks=False`, merged edits — the tool runs the sanitized arguments, each rewrite applied
exactly once, through pause → JSON → resume in a fresh Worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from llm_worker import (
    Decision,
    HookError,
    PauseState,
    PauseStateError,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext, ToolResultContext
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
RAN: list[dict[str, Any]] = []


@tool(effect="side_effect")
def shell(cmd: str, cwd: str = "/") -> str:
    """Run a command."""
    RAN.append({"cmd": cmd, "cwd": cwd})
    return f"ran {cmd}"


@tool(requires_approval=True)
def guarded(cmd: str) -> str:
    """Run a command a person approves."""
    RAN.append({"cmd": cmd})
    return f"ran {cmd}"


def sanitize(ctx: ToolCallContext) -> None:
    ctx.call.input["cmd"] = ctx.call.input["cmd"].replace(" --force", "")


def tag(ctx: ToolCallContext) -> None:
    # Not idempotent: applied twice, it shows.
    ctx.call.input["cmd"] += " #audited"


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("approve?")


def calls(*cmds: str, tool: str = "shell") -> ScriptedClient:
    first = ScriptedResponse(
        [ToolUsePart(f"c{n}", tool, {"cmd": cmd}) for n, cmd in enumerate(cmds, 1)]
    )
    return ScriptedClient([first, ScriptedResponse.text("done")])


def configured(client: ScriptedClient, *hooks: Any, tools: Any = (shell,)) -> Worker:
    worker = Worker(client, tools=list(tools))
    for hook in hooks:
        worker.add_before_tool_call_hook(hook)
    return worker


async def saved_pause(worker: Worker) -> str:
    RAN.clear()
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("clean up")
    assert result.status is RunStatus.PAUSED, result
    assert result.state is not None
    assert RAN == []
    return result.state.to_json()


async def resume_fresh(
    saved: str, *hooks: Any, tools: Any = (shell,), **decisions: Decision
) -> Worker:
    fresh = configured(ScriptedClient([ScriptedResponse.text("done")]), *hooks, tools=tools)
    with anyio.fail_after(TIMEOUT):
        result = await fresh.resume(PauseState.from_json(saved), decisions=decisions)
    assert result.status is RunStatus.FINISHED, result
    return fresh


async def test_approve_runs_the_sanitized_arguments_in_a_fresh_worker() -> None:
    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    # The model's call stays as it was sent; what the hooks made of it travels beside it.
    pending = orjson.loads(saved)["pending"][0]
    assert pending["call"]["input"] == {"cmd": "rm -r x --force"}
    fresh = await resume_fresh(saved, sanitize, approval, c1=Decision.approve())
    assert RAN == [{"cmd": "rm -r x", "cwd": "/"}]
    assert fresh.history[1].tool_uses[0].input == {"cmd": "rm -r x --force"}
    assert fresh.history[2].tool_results[0].content == "ran rm -r x"


async def test_every_route_applies_each_rewrite_exactly_once() -> None:
    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, tag, approval))
    routes: dict[str, dict[str, Decision]] = {
        "no decision": {},
        "approve": {"c1": Decision.approve()},
        "hooks again": {"c1": Decision(True, skip_hooks=False)},
    }
    for route, decisions in routes.items():
        RAN.clear()
        await resume_fresh(saved, sanitize, tag, approval, **decisions)
        assert RAN == [{"cmd": "rm -r x #audited", "cwd": "/"}], route


async def test_merged_edits_are_laid_over_the_sanitized_arguments() -> None:
    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    await resume_fresh(
        saved, sanitize, approval, c1=Decision.approve(input={"cwd": "/tmp"}, merge=True)
    )
    assert RAN == [{"cmd": "rm -r x", "cwd": "/tmp"}]


async def test_replacing_edits_are_the_applications_own_arguments() -> None:
    # The person saw the call and wrote its whole argument object: it runs as written.
    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    await resume_fresh(saved, sanitize, approval, c1=Decision.approve(input={"cmd": "ls"}))
    assert RAN == [{"cmd": "ls", "cwd": "/"}]


async def test_an_approval_tool_runs_what_every_hook_left() -> None:
    # No hook paused: @tool(requires_approval=True) did, after the whole chain ran.
    worker = configured(calls("rm -r x --force", tool="guarded"), sanitize, tools=[guarded])
    saved = await saved_pause(worker)
    await resume_fresh(saved, sanitize, tools=[guarded], c1=Decision.approve())
    assert RAN == [{"cmd": "rm -r x"}]


async def test_a_batch_paused_twice_runs_every_call_sanitized_once() -> None:
    client = calls("rm -r a --force", "rm -r b --force")
    saved = await saved_pause(configured(client, sanitize, tag, approval))
    # c2 never reached the hooks before the first pause: on resume its chain runs, and the
    # approval hook sees it for the first time (resumed=False), so the run pauses again.
    second = configured(ScriptedClient([]), sanitize, tag, approval)
    with anyio.fail_after(TIMEOUT):
        again = await second.resume(
            PauseState.from_json(saved), decisions={"c1": Decision.approve()}
        )
    assert again.status is RunStatus.PAUSED
    assert again.state is not None
    assert RAN == []
    await resume_fresh(again.state.to_json(), sanitize, tag, approval, c2=Decision.approve())
    assert sorted(r["cmd"] for r in RAN) == ["rm -r a #audited", "rm -r b #audited"]


async def test_after_hooks_and_the_result_see_the_arguments_the_tool_ran() -> None:
    seen: list[dict[str, Any] | None] = []

    def audit(ctx: ToolResultContext) -> None:
        seen.extend([ctx.call.input, ctx.result.input])

    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    fresh = configured(ScriptedClient([ScriptedResponse.text("done")]), sanitize, approval)
    fresh.add_after_tool_call_hook(audit)
    with anyio.fail_after(TIMEOUT):
        await fresh.resume(PauseState.from_json(saved), decisions={"c1": Decision.approve()})
    assert seen == [{"cmd": "rm -r x"}, {"cmd": "rm -r x"}]


async def test_the_state_object_is_untouched_and_resumes_the_same_way_twice() -> None:
    worker = configured(calls("rm -r x --force"), sanitize, approval)
    RAN.clear()
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("clean up")
    state = paused.state
    assert state is not None
    for _ in range(2):  # the same value, resumed by two Workers
        await resume_fresh(state.to_json(), sanitize, approval, c1=Decision.approve())
    assert RAN == [{"cmd": "rm -r x", "cwd": "/"}] * 2
    assert state.pending[0].call.input == {"cmd": "rm -r x --force"}


async def test_a_cancelled_resume_leaves_the_state_resumable_with_its_rewrites() -> None:
    started = anyio.Event()

    @tool(effect="side_effect", name="shell")
    async def slow_shell(cmd: str) -> str:
        """Run a command slowly."""
        started.set()
        await anyio.sleep_forever()
        return cmd

    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    slow = configured(ScriptedClient([ScriptedResponse.text("done")]), sanitize, tools=[slow_shell])

    async def cancel_once_started() -> None:
        await started.wait()
        slow.cancel()

    cut = None
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_once_started)
            cut = await slow.resume(
                PauseState.from_json(saved), decisions={"c1": Decision.approve()}
            )
    assert cut is not None
    assert cut.status is RunStatus.CANCELLED
    await resume_fresh(saved, sanitize, approval, c1=Decision.approve())
    assert RAN == [{"cmd": "rm -r x", "cwd": "/"}]


async def test_a_rewrite_json_cannot_hold_is_refused_before_the_pause_keeps_it() -> None:
    def with_path(ctx: ToolCallContext) -> None:
        ctx.call.input["cwd"] = Path("/tmp")  # the state would hold it: to_json would fail

    worker = configured(calls("rm -r x --force"), with_path, approval)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match=r"with_path.*call\.input\.cwd"):
        await worker.run("clean up")


def hostile(saved: str, value: object) -> str:
    body = orjson.loads(saved)
    body["pending"][0]["rewritten_input"] = value
    return orjson.dumps(body).decode()


async def test_a_damaged_rewrite_in_the_json_is_a_typed_error() -> None:
    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    for value in ("rm -rf /", ["cmd"], 7):
        with pytest.raises(PauseStateError, match="rewritten"):
            PauseState.from_json(hostile(saved, value))
    body = orjson.loads(hostile(saved, {"cmd": "ls"}))
    body["pending"][0]["status"] = "skipped"
    body["pending"][0]["result"] = {
        "tool_use_id": "c1",
        "name": "shell",
        "content": "Skipped",
        "is_error": True,
    }
    with pytest.raises(PauseStateError, match="rewritten"):
        PauseState.from_json(orjson.dumps(body))


async def test_a_state_saved_before_the_field_existed_still_resumes() -> None:
    saved = await saved_pause(configured(calls("rm -r x --force"), sanitize, approval))
    body = orjson.loads(saved)
    del body["pending"][0]["rewritten_input"]
    # Without the hooks' record, an approval can only run the model's own arguments.
    await resume_fresh(orjson.dumps(body).decode(), c1=Decision.approve())
    assert RAN == [{"cmd": "rm -r x --force", "cwd": "/"}]
