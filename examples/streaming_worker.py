"""A research assistant streamed event by event: `worker.stream`, then `worker.resume_stream`.

1. `async with worker.stream(prompt) as stream` yields every event as it happens: the
   provider's (`BlockDelta` with a `TextDelta` for each piece of text) and the Worker's own
   (`ToolCallComplete`, `ToolResultReady`, `TurnStarted` / `TurnEnded`, …), and last a
   `RunCompleted`; `stream.result` then holds the `RunResult`.
2. `save_note` is marked `@tool(requires_approval=True)`: the run pauses before it runs, and
   the result says so (`RunStatus.PAUSED`, with the pending call in `result.state`).
3. A person approves it (or refuses: `--deny`), and `worker.resume_stream(state,
   decisions=...)` streams the rest of the run the same way.
4. `async with Worker(...)` closes what the Worker opened when it is done.

Run: `python examples/streaming_worker.py [--deny]` (offline unless an API key is set; see
_common.py).
"""

from __future__ import annotations

import sys

import anyio
from _common import model

from llm_worker import (
    BlockDelta,
    Decision,
    RunCompleted,
    RunStatus,
    RunStream,
    TextComplete,
    TextDelta,
    TextPart,
    ToolCallComplete,
    ToolResultReady,
    ToolUsePart,
    TurnStarted,
    Worker,
    tool,
)
from llm_worker.testing import ScriptedRequest, ScriptedResponse

NOTES: list[str] = []


@tool(effect="read_only")
def search(query: str) -> str:
    """Search the library catalogue."""
    return f"3 papers on {query}: Lamport 1978, Fidge 1988, Mattern 1989"


@tool(requires_approval=True)
def save_note(text: str) -> str:
    """Save a note to the user's notebook."""
    NOTES.append(text)
    return "saved"


def after_resume(call: ScriptedRequest) -> ScriptedResponse:
    if any("Denied" in r.content for r in call.tool_results):
        return ScriptedResponse.text("Understood: nothing was saved.", chunk_size=12)
    return ScriptedResponse.text("Saved: three papers on logical clocks.", chunk_size=12)


SCRIPT = [
    ScriptedResponse(
        [
            TextPart("Let me search the catalogue."),
            ToolUsePart("", "search", {"query": "logical clocks"}),
        ],
        chunk_size=8,
    ),
    ScriptedResponse(
        [ToolUsePart("", "save_note", {"text": "Lamport 1978; Fidge 1988; Mattern 1989"})]
    ),
    after_resume,
]


async def show(stream: RunStream) -> None:
    """Print the events a reader usually wants; the others pass by."""
    async with stream:
        async for event in stream:
            match event:
                case TurnStarted():
                    print("── run starts")
                case BlockDelta(delta=TextDelta(text=text)):
                    print(text, end="", flush=True)
                case TextComplete():
                    print()  # the text block is over
                case ToolCallComplete(call=call):
                    print(f"→ {call.name}({call.input})")
                case ToolResultReady(result=result):
                    print(f"← {result.name}: {result.content}")
                case RunCompleted(result=result):
                    print(f"── {result.status.value} after {result.requests} request(s)")
                case _:
                    pass


async def main() -> None:
    deny = "--deny" in sys.argv
    async with (
        model(SCRIPT, provider="openai_chat") as (client, _),
        Worker(client, tools=[search, save_note]) as worker,
    ):
        first = worker.stream("Find papers on logical clocks and save a note of them.")
        await show(first)
        paused = first.result
        if paused.status is not RunStatus.PAUSED or paused.state is None:
            return  # a live model may answer without asking to save
        print(f"paused: {paused.reason}")
        decisions = {
            p.call.id: Decision.deny("the user said no") if deny else Decision.approve()
            for p in paused.state.pending
            if p.status == "pending"
        }
        print("a person", "refused" if deny else "approved", "the note")
        resumed = worker.resume_stream(paused.state, decisions=decisions)
        await show(resumed)
        print(f"final answer: {resumed.result.text}")
        print(f"notes saved: {NOTES}")


if __name__ == "__main__":
    anyio.run(main)
