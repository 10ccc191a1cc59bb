"""Tools the front end declares and runs itself (`RunAgentInput.tools`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from typing import Any

from llm_worker.errors import ConfigurationError, ToolError
from llm_worker.messages import Message, ToolResultPart
from llm_worker.state import PauseState, PendingCall
from llm_worker.tools import ToolMeta, ToolResult
from llm_worker.tools._tool import MetaTool

__all__ = (
    "FrontendTool",
    "add_frontend_tools",
    "answers_pause",
    "approval_tools",
    "awaiting_decision",
    "with_frontend_results",
)


class FrontendTool(MetaTool):
    """A tool the model may call but the browser runs: a call pauses the run, never executes.

    The adapter ends the run with the call pending (AG-UI `pendingToolCallIds`); the browser
    runs it and sends its result in the next request's messages.
    """

    def __init__(self, name: str, description: str, input_schema: dict[str, Any]) -> None:
        schema = input_schema or {"type": "object", "properties": {}}
        self.meta = ToolMeta(name, description, schema, requires_approval=True)

    async def execute(self, input_json: str) -> str:
        """Never runs here: the browser runs the call."""
        raise ToolError(f"{self.name} runs in the browser; its result comes with the next request")


def add_frontend_tools(worker: Any, tools: list[FrontendTool]) -> None:
    """Offer the browser's tools to the model through `worker`.

    Raises:
        ConfigurationError: A front-end tool has the name of one of the Worker's tools.
    """
    for t in tools:
        if t.name in worker.tools.names:
            raise ConfigurationError(f"the front-end tool {t.name!r} has the name of a server tool")
        worker.add_tool(t)


def with_frontend_results(
    state: PauseState, history: Iterable[Message], names: Collection[str]
) -> PauseState:
    """`state` with the results the browser sent for its own tools' pending calls.

    A step can call a front-end tool and a tool that asks for approval at once: the browser
    then sends the front-end output with its decision, and the resumed run must take that
    output (else the call pauses again and the run stalls). Only calls of the browser's own
    tools take a result from it: a server tool's call always runs on the server.
    """
    results = {r.tool_use_id: r for m in history for r in m.tool_results}
    pending: list[PendingCall] = []
    for p in state.pending:
        sent = results.get(p.call.id)
        if p.status == "pending" and p.call.name in names and sent is not None:
            result = ToolResult(
                p.call.id,
                p.call.name,
                sent.content,
                is_error=sent.is_error,
                input=p.call.input,
                media=sent.media,
            )
            pending.append(PendingCall(p.call, "done", result, approved=True))
        else:
            pending.append(p)
    return dataclasses.replace(state, pending=pending)


def answers_pause(state: PauseState, history: list[Message], names: Collection[str]) -> bool:
    """Whether the browser's messages end with an output for a front-end call `state` waits on.

    Such a request goes on with the paused batch (`with_frontend_results`), whose server
    calls run then; a new run from the browser's history would give them no result.
    """
    last = history[-1] if history else None
    if last is None or last.role != "user" or not last.content:
        return False
    if not all(isinstance(p, ToolResultPart) for p in last.content):
        return False  # a new message too: it starts a new run, as any new message
    waiting = {p.call.id for p in state.pending if p.status == "pending" and p.call.name in names}
    return any(r.tool_use_id in waiting for r in last.tool_results)


def awaiting_decision(
    state: PauseState, frontend: Collection[str], approval: Collection[str] | None
) -> list[PendingCall]:
    """The pending calls of `state` a person must decide on (approve or deny).

    A batch stops at the first call that pauses (a hook's `Pause`, a tool that asks for
    approval, a front-end call): the calls after it are `"pending"` only because no hook
    saw them yet. Of those, only calls of tools that ask for approval (`approval`) will
    wait on a decision; the others (a `weather` call) run when the batch goes on, and
    asking a person about them would show a question nothing waits for. The browser's own
    tools' calls (`frontend`) wait on their output, never on a decision.

    Args:
        state: The pause.
        frontend: Names of the tools the browser runs.
        approval: Names of the tools that ask for approval (`None`: unknown — then every
            later pending call is shown as waiting).
    """
    waiting: list[PendingCall] = []
    first = True
    for p in state.pending:
        if p.status != "pending":
            continue
        asks = first or approval is None or (p.call.name in approval and not p.approved)
        if asks and p.call.name not in frontend:
            waiting.append(p)
        first = False
    return waiting


def approval_tools(worker: Any) -> frozenset[str]:
    """Names of `worker`'s tools that ask for approval (front-end tools included)."""
    metas: dict[str, ToolMeta] = dict(worker.tools.metas)
    return frozenset(name for name, meta in metas.items() if meta.requires_approval)
