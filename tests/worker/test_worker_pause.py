"""Pause and resume: in the same process, from JSON, in a new process, with decisions."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Message, PauseState, PauseStateError, TextPart, ToolUsePart, Worker, tool
from llm_worker.hooks import Pause, Skip, ToolCallContext, TurnEndContext
from llm_worker.state import Decision, RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

RUNS: list[str] = []


@tool(effect="side_effect")
def transfer(amount: int) -> str:
    """Move money (a side effect: must never run twice)."""
    RUNS.append(f"transfer:{amount}")
    return f"moved {amount}"


@tool(effect="read_only")
def balance() -> str:
    """Read the balance."""
    RUNS.append("balance")
    return "100"


def scripted() -> ScriptedClient:
    return ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("c1", "balance", {}),
                    ToolUsePart("c2", "transfer", {"amount": 5}),
                    ToolUsePart("c3", "transfer", {"amount": 7}),
                ]
            ),
            ScriptedResponse.text("All done."),
        ]
    )


async def approval(ctx: ToolCallContext) -> Pause | None:
    """Pause for a person unless the call is read-only or was approved on resume."""
    if ctx.meta is not None and ctx.meta.effect == "read_only":
        return None
    if ctx.resumed:
        return None
    return Pause("needs approval")


async def test_pause_before_any_call_runs_then_resume_from_json() -> None:
    RUNS.clear()
    worker = Worker(scripted(), tools=[balance, transfer])
    worker.add_before_tool_call_hook(approval)
    result = await worker.run("pay")
    assert result.status is RunStatus.PAUSED
    assert result.reason == "needs approval"
    assert RUNS == []  # nothing of the batch ran
    assert result.state is not None
    state = PauseState.from_json(result.state.to_json())
    assert [p.status for p in state.pending] == ["allowed", "pending", "pending"]

    client = ScriptedClient([ScriptedResponse.text("All done.")])
    fresh = Worker(client, tools=[balance, transfer])
    fresh.add_before_tool_call_hook(approval)
    # Only the call whose hook paused counts as seen; the second transfer is asked about.
    again = await fresh.resume(state)
    assert again.status is RunStatus.PAUSED and again.state is not None
    assert [p.status for p in again.state.pending] == ["allowed", "allowed", "pending"]
    assert RUNS == []
    resumed = await fresh.resume(PauseState.from_json(again.state.to_json()))
    assert resumed.status is RunStatus.FINISHED
    assert resumed.text == "All done."
    assert sorted(RUNS) == ["balance", "transfer:5", "transfer:7"]
    results = client.requests[0].messages[-1].tool_results
    assert [r.content for r in results] == ["100", "moved 5", "moved 7"]


async def test_resume_with_decisions_approve_edit_and_deny() -> None:
    RUNS.clear()
    worker = Worker(scripted(), tools=[balance, transfer])
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.state is not None
    client = ScriptedClient([ScriptedResponse.text("ok")])
    fresh = Worker(client, tools=[balance, transfer])
    fresh.add_before_tool_call_hook(approval)
    result = await fresh.resume(
        paused.state,
        decisions={"c2": Decision.approve(input={"amount": 1}), "c3": Decision.deny("too much")},
    )
    assert result.status is RunStatus.FINISHED
    results = client.requests[0].messages[-1].tool_results
    assert [r.content for r in results] == ["100", "moved 1", "Denied: too much"]
    assert results[2].is_error
    assert sorted(RUNS) == ["balance", "transfer:1"]


async def test_finished_results_are_kept_never_recomputed_on_resume() -> None:
    RUNS.clear()
    worker = Worker(scripted(), tools=[balance, transfer], early_tool_start=True)
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.state is not None
    assert RUNS == ["balance"]  # started early, while the answer streamed
    done = [p for p in paused.state.pending if p.status == "done"]
    assert [p.result.content for p in done if p.result] == ["100"]
    state = PauseState.from_json(paused.state.to_json())
    fresh = Worker(ScriptedClient([ScriptedResponse.text("ok")]), tools=[balance, transfer])
    fresh.add_before_tool_call_hook(approval)
    await fresh.resume(state)
    assert RUNS.count("balance") == 1


async def test_pause_on_turn_end_and_resume() -> None:
    async def review(ctx: TurnEndContext) -> Pause | None:
        return None if ctx.resumed else Pause("review the answer")

    worker = Worker(ScriptedClient([ScriptedResponse.text("draft")]))
    worker.add_on_turn_end_hook(review)
    paused = await worker.run("write")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    fresh = Worker(ScriptedClient([]))
    fresh.add_on_turn_end_hook(review)
    done = await fresh.resume(PauseState.from_json(paused.state.to_json()))
    assert done.status is RunStatus.FINISHED
    assert done.text == "draft"


async def test_bad_states_are_refused_clearly() -> None:
    with pytest.raises(PauseStateError, match="not valid JSON"):
        PauseState.from_json("{nope")
    with pytest.raises(PauseStateError, match="version"):
        PauseState.from_json('{"version": 99}')
    worker = Worker(scripted(), tools=[balance, transfer])
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.state is not None
    without_tools = Worker(ScriptedClient([]))
    with pytest.raises(PauseStateError, match="transfer"):
        await without_tools.resume(paused.state)
    with pytest.raises(PauseStateError, match="zzz"):
        await Worker(ScriptedClient([]), tools=[balance, transfer]).resume(
            paused.state, decisions={"zzz": Decision.deny()}
        )


SCRIPT = textwrap.dedent(
    """
    import sys, anyio
    from llm_worker import PauseState, Worker, tool
    from llm_worker.testing import ScriptedClient, ScriptedResponse

    @tool
    def transfer(amount: int) -> str:
        "Move money."
        return f"moved {amount}"

    @tool(effect="read_only")
    def balance() -> str:
        "Read the balance."
        return "100"

    async def main():
        state = PauseState.from_json(open(sys.argv[1]).read())
        client = ScriptedClient([ScriptedResponse.text("Paid.")])
        worker = Worker(client, tools=[balance, transfer])
        result = await worker.resume(state)
        sent = client.requests[0].messages
        print(result.status.value, result.text, [r.content for r in sent[-1].tool_results])

    anyio.run(main)
    """
)


async def test_resume_in_a_new_process(tmp_path: Path) -> None:
    worker = Worker(scripted(), tools=[balance, transfer])
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.state is not None
    state_file = tmp_path / "state.json"
    state_file.write_text(paused.state.to_json())
    script = tmp_path / "resume.py"
    script.write_text(SCRIPT)

    def child() -> Any:
        return subprocess.run(
            [sys.executable, str(script), str(state_file)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = await anyio.to_thread.run_sync(child)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished Paid. ['100', 'moved 5', 'moved 7']"


def test_pause_state_round_trips_messages_exactly() -> None:
    state = PauseState([Message.user("a"), Message.assistant("b")], reason="r", requests=3)
    again = PauseState.from_json(state.to_json())
    assert again == state


async def test_results_before_the_pause_survive_the_json_round_trip() -> None:
    # A finished call (started early) and a skipped one keep their results through JSON: on
    # resume they are sent as they were, neither re-run nor replaced by "no result".
    RUNS.clear()

    async def skip_seven(ctx: ToolCallContext) -> Pause | Skip | None:
        if ctx.call.input.get("amount") == 7:
            return Skip("over the limit")
        return await approval(ctx)

    client = ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("c1", "balance", {}),
                    ToolUsePart("c3", "transfer", {"amount": 7}),
                    ToolUsePart("c2", "transfer", {"amount": 5}),
                ]
            )
        ]
    )
    worker = Worker(client, tools=[balance, transfer], early_tool_start=True)
    worker.add_before_tool_call_hook(skip_seven)
    paused = await worker.run("pay")
    assert paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    assert [p.status for p in state.pending] == ["done", "skipped", "pending"]

    fresh_client = ScriptedClient([ScriptedResponse.text("ok")])
    fresh = Worker(fresh_client, tools=[balance, transfer])
    fresh.add_before_tool_call_hook(skip_seven)
    with anyio.fail_after(5):
        await fresh.resume(state)
    results = fresh_client.requests[0].messages[-1].tool_results
    assert [r.content for r in results] == [
        "100",
        "Skipped: a before_tool_call hook did not let this call run: over the limit.",
        "moved 5",
    ]
    assert [r.is_error for r in results] == [False, True, False]
    assert RUNS == ["balance", "transfer:5"]


async def _paused_state() -> dict[str, Any]:
    worker = Worker(scripted(), tools=[balance, transfer])
    worker.add_before_tool_call_hook(approval)
    paused = await worker.run("pay")
    assert paused.state is not None
    return paused.state.to_dict()


async def test_a_tampered_but_well_formed_state_is_refused_saying_what_is_wrong() -> None:
    good = await _paused_state()
    PauseState.from_dict(good)  # the untouched state loads

    def tampered(change: Any) -> dict[str, Any]:
        data = PauseState.from_dict(good).to_dict()
        change(data)
        return data

    def at_turn_end(d: dict[str, Any]) -> None:
        d["at"], d["pending"] = "on_turn_end", []

    def drop_a_call(d: dict[str, Any]) -> None:
        d["pending"].pop(1)

    def swap_calls(d: dict[str, Any]) -> None:
        d["pending"][1], d["pending"][2] = d["pending"][2], d["pending"][1]

    def rename(d: dict[str, Any]) -> None:
        d["pending"][1]["call"]["name"] = "balance"

    def empty_user_text(d: dict[str, Any]) -> None:
        d["history"][0]["content"][0]["text"] = ""

    def done_without_result(d: dict[str, Any]) -> None:
        d["pending"][1]["status"] = "done"

    def foreign_result(d: dict[str, Any]) -> None:
        d["pending"][1]["status"] = "done"
        d["pending"][1]["result"] = {"tool_use_id": "c3", "name": "transfer", "content": "x"}

    cases = {
        "turn end, but calls are unanswered (c1, c2, c3)": at_turn_end,
        "pending calls [c1 balance, c3 transfer] are not the unanswered": drop_a_call,
        "[c1 balance, c3 transfer, c2 transfer]": swap_calls,
        "[c1 balance, c2 balance, c3 transfer]": rename,
        "message 0 (user) has an empty text part": empty_user_text,
        "call c2 is done but has no result": done_without_result,
        "call c2 holds the result of call c3": foreign_result,
    }
    for says, change in cases.items():
        with pytest.raises(PauseStateError, match="inconsistent") as caught:
            PauseState.from_dict(tampered(change))
        assert says in str(caught.value), (says, caught.value)


async def test_a_consistent_turn_end_state_and_a_state_without_calls_still_load() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("draft")]))

    async def review(ctx: TurnEndContext) -> Pause:
        return Pause("review")

    worker.add_on_turn_end_hook(review)
    paused = await worker.run("write")
    assert paused.state is not None
    assert PauseState.from_json(paused.state.to_json()) == paused.state
    signed = Message("assistant", [TextPart("", signature="sig")])
    state = PauseState([Message.user("hi"), signed], at="on_turn_end")
    assert PauseState.from_json(state.to_json()) == state
