"""What a `PauseState` must hold to be resumed: checks of its history against its pending calls.

Kept apart from `llm_worker.state` (which runs them when a state is made or loaded) so that module
stays the data model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_worker.messages import Message, TextPart, ToolResultPart, ToolUsePart

if TYPE_CHECKING:
    from llm_worker.state import PauseState

__all__ = ("empty_text", "output_call_mismatch", "pending_mismatch")


def empty_text(history: list[Message]) -> str | None:
    for n, message in enumerate(history):
        for part in message.content:
            if isinstance(part, TextPart) and not part.text and _bare(part, message.role):
                return f"message {n} ({message.role}) has an empty text part"
    return None


def _bare(part: TextPart, role: str) -> bool:
    # An assistant's empty text may carry a signature or citations its provider needs back.
    return role == "user" or not (part.signature or part.item_id or part.citations)


def _unanswered(history: list[Message]) -> list[ToolUsePart]:
    """The calls of the last assistant message that no later message answers."""
    for n in range(len(history) - 1, -1, -1):
        if history[n].role == "assistant":
            answered = {
                p.tool_use_id
                for m in history[n + 1 :]
                for p in m.content
                if isinstance(p, ToolResultPart)
            }
            return [c for c in history[n].tool_uses if c.id not in answered]
    return []


def pending_mismatch(state: PauseState) -> str | None:
    calls = [(c.id, c.name) for c in _unanswered(state.history)]
    pending = [(p.call.id, p.call.name) for p in state.pending]
    if state.at == "on_turn_end" and (pending or calls):
        return (
            "it is paused at the turn end, but calls are unanswered "
            f"({', '.join(i for i, _ in calls or pending)}): they would never run"
        )
    if pending != calls:
        return (
            f"the pending calls {_ids(pending)} are not the unanswered calls {_ids(calls)} of "
            "the last assistant message (id and tool name, in order)"
        )
    for p in state.pending:
        if p.status not in ("pending", "allowed") and p.result is None:
            return f"call {p.call.id} is {p.status} but has no result"
        if p.result is not None and p.result.tool_use_id != p.call.id:
            return f"call {p.call.id} holds the result of call {p.result.tool_use_id}"
    return None


def output_call_mismatch(state: PauseState) -> str | None:
    """Why the state's accepted output call does not fit its history, or None when it does."""
    call = state.output_call
    if call is None:
        return None
    if state.at != "on_turn_end":
        return f"it holds an accepted output call ({call.id}) but is not paused at the turn end"
    last = next((m for m in reversed(state.history) if m.role == "assistant"), None)
    if last is None or all((c.id, c.name) != (call.id, call.name) for c in last.tool_uses):
        return f"the output call {call.id} {call.name} is not a call of the last assistant message"
    results = [p for m in state.history for p in m.content if isinstance(p, ToolResultPart)]
    if not any(r.tool_use_id == call.id and not r.is_error for r in results):
        return f"the output call {call.id} has no successful result in the history"
    return None


def _ids(calls: list[tuple[str, str]]) -> str:
    return "[" + ", ".join(f"{i} {n}" for i, n in calls) + "]"
