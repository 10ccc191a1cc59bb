"""A durable run that waits for an approval sent by another process (DBOS on SQLite).

1. Process 1 runs a `DurableWorker` on a SQLite file: the run is a DBOS workflow, each model
   request and tool call a recorded step. The model asks to send an invitation, a tool marked
   `@tool(requires_approval=True)`: the run pauses and waits, durably, for a decision.
2. Process 2 — a web handler on another machine, in real life — opens the same database
   as a client only (`DurableWorker(..., serve=False)`: it runs no run, takes none from the
   queue, strands none when it exits), reads the pause (`durable.paused(run_id)`) and sends
   the decision with the run id (`durable.decide(run_id, ...)`). Of two deciders answering
   one pause at once, one wins and the other gets `DecisionConflictError`.
3. Process 1, still waiting on `durable.result(run_id)`, resumes the run: the invitation is
   sent, the model answers. Had process 1 died while waiting, restarting it would recover the
   run from its records and wait again — without asking the model twice.

Run: `python examples/durable_approval.py [--deny]` (needs `pip install 'llm-worker[dbos]'`;
offline unless an API key is set, see _common.py).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import anyio
from _common import model

from llm_worker import Decision, TextPart, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.testing import ScriptedRequest, ScriptedResponse


@tool(requires_approval=True)  # a side effect: a person decides each call
def send_invitation(to: str, when: str) -> str:
    """Send a meeting invitation."""
    print(f"  [pid {os.getpid()}] >>> invitation sent to {to} for {when}")
    return f"invitation sent to {to}"


def answer_after_decision(call: ScriptedRequest) -> ScriptedResponse:
    if any(r.is_error for r in call.tool_results):
        return ScriptedResponse.text("I did not invite Ana: you said no.")
    return ScriptedResponse.text("Done: Ana is invited for Friday 14:00.")


SCRIPT = [
    ScriptedResponse(
        [
            TextPart("I'll invite Ana."),
            ToolUsePart("", "send_invitation", {"to": "ana@example.com", "when": "Friday 14:00"}),
        ]
    ),
    answer_after_decision,
]
RUN_ID = "invite-ana"


def durable(worker: Worker, database: Path, executor: str | None) -> DurableWorker:
    """Serving with an executor id (process 1), or a client that serves nothing (None)."""
    url = f"sqlite:///{database}"
    if executor is None:
        return DurableWorker(worker, name="assistant", database_url=url, serve=False)
    return DurableWorker(worker, name="assistant", database_url=url, executor_id=executor)


async def run(database: Path, flags: list[str]) -> None:
    """Process 1: start the run, let process 2 decide, print the result."""
    print(f"process 1 (pid {os.getpid()}): starting run {RUN_ID}")
    async with (
        model(SCRIPT) as (client, _),
        durable(Worker(client, tools=[send_invitation]), database, "worker-1") as d,
    ):
        await d.start("Invite ana@example.com on Friday at 14:00.", run_id=RUN_ID)
        state = await d.paused(RUN_ID)
        assert state is not None
        print(f"process 1: paused — {state.reason}")
        # A second process decides: nothing but the database carries the decision over.
        await anyio.run_process(
            [sys.executable, __file__, "--decide", str(database), *flags],
            stdout=None,
            stderr=None,
        )
        result = await d.result(RUN_ID)
        print(f"process 1: {result.status.value} after {result.requests} requests: {result.text}")


async def decide(database: Path, deny: bool) -> None:
    """Process 2: read the pause and answer it by run id."""
    async with (
        model([]) as (client, _),
        durable(Worker(client, tools=[send_invitation]), database, None) as d,
    ):
        state = await d.paused(RUN_ID)
        assert state is not None
        call = state.pending[0].call
        decision = Decision.deny("the user said no") if deny else Decision.approve()
        await d.decide(RUN_ID, {call.id: decision})
        verb = "denied" if deny else "approved"
        print(f"process 2 (pid {os.getpid()}): {verb} {call.name}({call.input})")


def main() -> None:
    flags = [f for f in ("--offline", "--deny") if f in sys.argv]
    if "--decide" in sys.argv:
        anyio.run(decide, Path(sys.argv[sys.argv.index("--decide") + 1]), "--deny" in flags)
        return
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(run, Path(folder) / "runs.sqlite", flags)


if __name__ == "__main__":
    main()
