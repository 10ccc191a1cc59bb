"""A run tree built the same way in the test and in a second process (not a test itself).

The root calls two sub-agents at once: `a` writes its line at once; `b`'s `write` needs an
approval, so the tree pauses. `python subagent_tree.py <log> <state file> <call id>` resumes a
saved state in a new process, approving that call, and prints the run's text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from llm_worker import Decision, PauseState, ToolUsePart, Worker, tool
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse


def _usage() -> UsageEvent:
    return UsageEvent(input_tokens=10, output_tokens=1)


def child(log: Path, name: str, *, approval: bool) -> Worker:
    @tool(requires_approval=approval)
    async def write(line: str) -> str:
        """Append a line to the log."""
        with log.open("a") as f:
            f.write(line + "\n")
        return f"wrote {line}"

    def answer(r: ScriptedRequest) -> ScriptedResponse:
        if r.tool_results:
            return ScriptedResponse.text(f"{name}: {r.tool_results[0].content}", usage=_usage())
        line = f"{name} {r.request.messages[0].text}"
        return ScriptedResponse([ToolUsePart("", "write", {"line": line})], usage=_usage())

    return Worker(ScriptedClient(answer), tools=[write], name=name)


def tree(log: Path) -> Worker:
    tools = [
        child(log, "a", approval=False).as_tool(name="a", description="Writes at once."),
        child(log, "b", approval=True).as_tool(name="b", description="Writes once approved."),
    ]

    def answer(r: ScriptedRequest) -> ScriptedResponse:
        if r.tool_results:
            text = " | ".join(p.content for p in r.tool_results)
            return ScriptedResponse.text(text, usage=_usage())
        parts = [ToolUsePart("ca", "a", {"input": "x"}), ToolUsePart("cb", "b", {"input": "x"})]
        return ScriptedResponse(list(parts), usage=_usage())

    return Worker(ScriptedClient(answer), tools=tools)


async def _resume(log: Path, state: PauseState, call_id: str) -> None:
    result = await tree(log).resume(state, decisions={call_id: Decision.approve()})
    print(result.status.value, result.text, result.usage.input_tokens, sep="\n")


if __name__ == "__main__":
    saved = PauseState.from_json(Path(sys.argv[2]).read_text())
    anyio.run(_resume, Path(sys.argv[1]), saved, sys.argv[3])
