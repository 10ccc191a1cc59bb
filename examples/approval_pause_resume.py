"""Tool approval that pauses, saves the state to a file, and resumes in a second process
(seeds 001 and 002).

1. The model asks for two calls at once: `check_calendar` (read-only) and `send_invitation`
   (a side effect, marked `@tool(requires_approval=True)`).
2. The read-only call is allowed; the marked one pauses the run before it runs: the run ends
   PAUSED, and nothing with a side effect has run. (No hook needed; a before_tool_call hook
   returning `Pause` does the same for rules of your own.)
3. The `PauseState` (history, pending calls, what was decided) is saved as JSON to a file, and
   this script starts itself again as a second Python process — as if a person approved the
   call hours later, after a restart.
4. The second process loads the file, decides the pending call (`Decision.approve()`, or
   `--deny`), and `Worker.resume` runs it and finishes the turn.

Run: `python examples/approval_pause_resume.py [--deny]` (offline unless an API key is set;
see _common.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from _common import model

from llm_worker import Decision, PauseState, TextPart, ToolUsePart, Worker, tool
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedRequest, ScriptedResponse


@tool(effect="read_only")
def check_calendar(day: str) -> str:
    """Look up free slots on a day."""
    return f"{day}: free from 14:00 to 16:00"


@tool(requires_approval=True)  # a side effect: a person decides each call
def send_invitation(to: str, when: str) -> str:
    """Send a meeting invitation."""
    print(f"  [pid {os.getpid()}] >>> invitation sent to {to} for {when}")
    return f"invitation sent to {to}"


TOOLS = [check_calendar, send_invitation]
PROMPT = "Find a free slot on Friday and invite ana@example.com."


# The scripted model of each process: the first asks for the calls, the second answers after
# the resume (it gets the whole history from the state file, as a real model would).
FIRST_PROCESS = [
    ScriptedResponse(
        [
            TextPart("I'll check Friday and invite Ana."),
            ToolUsePart("", "check_calendar", {"day": "Friday"}),
            ToolUsePart("", "send_invitation", {"to": "ana@example.com", "when": "Friday 14:00"}),
        ]
    )
]


def answer_after_resume(call: ScriptedRequest) -> ScriptedResponse:
    if any("Denied: the user said no" in r.content for r in call.tool_results):
        return ScriptedResponse.text("Friday 14:00 is free, but I did not invite Ana: you said no.")
    return ScriptedResponse.text("Done: Friday 14:00 was free and Ana is invited.")


SECOND_PROCESS = [answer_after_resume]


async def pause() -> str:
    """Process 1: run until the pause; return the saved state."""
    print(f"process 1 (pid {os.getpid()}): running")
    async with model(FIRST_PROCESS, provider="openai_responses") as (client, _):
        worker = Worker(client, tools=TOOLS)
        result = await worker.run(PROMPT)
    assert result.status is RunStatus.PAUSED
    assert result.state is not None
    print(f"process 1: paused — {result.reason}")
    for p in result.state.pending:
        print(f"process 1:   {p.call.name}({p.call.input}) is {p.status}")
    return result.state.to_json()


async def resume(saved: str, deny: bool) -> None:
    """Process 2: decide the pending calls and go on."""
    state = PauseState.from_json(saved)
    decisions = {
        p.call.id: Decision.deny("the user said no") if deny else Decision.approve()
        for p in state.pending
        if p.status == "pending"
    }
    for p in state.pending:
        if p.call.id in decisions:
            print(f"process 2: {'denied' if deny else 'approved'} {p.call.name}")
    async with model(SECOND_PROCESS, provider="openai_responses") as (client, server):
        worker = Worker(client, tools=TOOLS)  # a new Worker with the same tools
        result = await worker.resume(state, decisions=decisions)
        if server is not None:
            carried = PROMPT in server.requests[0].body.decode()
            print(f"process 2: the request carried process 1's conversation: {carried}")
    print(f"process 2: {result.status.value}: {result.text}")


def main() -> None:
    if "--resume" in sys.argv:
        state_file = Path(sys.argv[sys.argv.index("--resume") + 1])
        print(f"process 2 (pid {os.getpid()}): loading {state_file.name}")
        anyio.run(resume, state_file.read_text(), "--deny" in sys.argv)
        return
    with tempfile.TemporaryDirectory() as folder:
        state_file = Path(folder) / "pause-state.json"
        state_file.write_text(anyio.run(pause))
        print(f"process 1: state saved to {state_file.name} ({state_file.stat().st_size} bytes)")
        flags = [f for f in ("--offline", "--deny") if f in sys.argv]
        # A second process: nothing but the file carries the run over.
        subprocess.run([sys.executable, __file__, "--resume", str(state_file), *flags], check=True)


if __name__ == "__main__":
    main()
