"""Sub-agents: two Workers on two other providers run as tools of a third, as one run tree.

1. `researcher.as_tool(...)` and `checker.as_tool(...)` make each Worker a tool: a call runs it
   in a fresh context (its own system prompt, tools and model) and its answer is the result.
2. The editor calls both in one answer: they run in parallel, and their events reach the
   editor's `Worker.stream()` with `event.path` (the ids of the calls they came through).
3. The checker's `publish` tool needs an approval: the checker pauses, so the editor's run
   pauses with one `PauseState` holding the whole tree. Approved by call id, the resume goes
   on where the checker stopped; the researcher, which had finished, does not run again.
4. `RunResult.usage` totals the tree; `RunResult.children` breaks it down per path.

Run: `python examples/sub_agents.py` (offline: three scripted models behind three wire formats
on 127.0.0.1; with an API key, the real model for each, see _common.py).
"""

from __future__ import annotations

from typing import Any

import anyio
from _common import model

from llm_worker import (
    Decision,
    RunStatus,
    RunStream,
    TextComplete,
    ToolUsePart,
    TurnEnded,
    TurnStarted,
    Worker,
    tool,
)
from llm_worker.testing import ScriptedRequest, ScriptedResponse

PUBLISHED: list[str] = []


@tool(effect="read_only")
def search(topic: str) -> str:
    """Search the archive."""
    return f"Lamport clocks ({topic}): 1978, CACM 21(7)"


@tool(requires_approval=True)
def publish(fact: str) -> str:
    """Publish a checked fact."""
    PUBLISHED.append(fact)
    return f"published: {fact}"


def researcher_script(r: ScriptedRequest) -> ScriptedResponse:
    if r.tool_results:
        return ScriptedResponse.text(f"Found: {r.tool_results[0].content}.")
    return ScriptedResponse([ToolUsePart("", "search", {"topic": "logical time"})])


def checker_script(r: ScriptedRequest) -> ScriptedResponse:
    if r.tool_results:
        return ScriptedResponse.text("Checked and published.")
    return ScriptedResponse([ToolUsePart("", "publish", {"fact": "Lamport 1978"})])


def editor_script(r: ScriptedRequest) -> ScriptedResponse:
    if r.tool_results:
        return ScriptedResponse.text("Both desks are done: the fact is out.")
    return ScriptedResponse(
        [
            ToolUsePart("call_research", "research", {"input": "logical clocks"}),
            ToolUsePart("call_check", "check", {"input": "Lamport 1978"}),
        ]
    )


async def show(stream: RunStream[str]) -> Any:
    """Print each run's start and end and its texts, labelled by its path."""
    async with stream:
        async for event in stream:
            who = "/".join(event.path) or "editor"
            if isinstance(event, TurnStarted | TurnEnded):
                print(f"[{who}] {'starts' if isinstance(event, TurnStarted) else 'ends'}")
            elif isinstance(event, TextComplete):  # each block's whole text (deltas stream too)
                print(f"[{who}] {event.text}")
    return stream.result


async def main() -> None:
    async with (
        model([researcher_script] * 4, provider="gemini", name="researcher") as (rc, _),
        model([checker_script] * 4, provider="openai_responses", name="checker") as (cc, _),
        model([editor_script] * 4, provider="anthropic", name="editor") as (ec, _),
    ):
        researcher = Worker(rc, tools=[search], system="Find sources.", name="researcher")
        checker = Worker(cc, tools=[publish], system="Check, then publish.", name="checker")
        editor = Worker(
            ec,
            tools=[
                researcher.as_tool(name="research", description="Finds sources on a topic."),
                checker.as_tool(name="check", description="Checks and publishes a fact."),
            ],
            system="Run the desk.",
        )
        result = await show(editor.stream("Publish the origin of logical clocks."))
        state = result.state
        assert result.status is RunStatus.PAUSED
        assert state is not None
        waiting = state.children["call_check"].pending[0]
        print(f"paused: {result.reason}; the tree holds {sorted(state.children)}")
        print(f"a person approves {waiting.call.name}({waiting.arguments})")
        resumed = editor.resume_stream(state, decisions={waiting.call.id: Decision.approve()})
        result = await show(resumed)
        print(f"finished: {result.text}")
        print(f"published: {PUBLISHED}")
        print(f"usage of the tree: {result.requests} editor requests, ", end="")
        print(f"{sum(c.requests for c in result.children)} sub-agent requests")
        for child in result.children:
            print(f"  {'/'.join(child.path)} ({child.name}): {child.requests} requests")


if __name__ == "__main__":
    anyio.run(main)
