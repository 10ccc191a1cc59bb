"""Tools that come and go: `@tool(enabled=...)`, asked before each model request.

A tool's `enabled` callable decides from the conversation so far whether the model is offered
the tool for the next answer (`query_db` only once `get_schema` was called). The Worker asks
every such callable right before each request, and only then: the offered set and its order
(the registration order, filtered) change only at those points, so a provider's prompt cache
keeps the prefix of tools that did not change. A call of a tool that was not offered for the
answer that made it gets an error result naming the tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from llm_worker.messages import Message

if TYPE_CHECKING:
    from llm_worker.events import UsageEvent

__all__ = ("EnabledCheck", "EnabledContext")


@dataclass(frozen=True, slots=True)
class EnabledContext:
    """What an `enabled` callable decides from, before each request.

    Attributes:
        tool_name: The tool asked about.
        history: The conversation as it will be sent (read it, do not change it).
        requests: Requests the run has made so far (0 before its first).
        usage: The run's token usage so far.
        path: Where the run sits in a run tree (`ToolContext.path`).
    """

    tool_name: str
    history: Sequence[Message]
    requests: int
    usage: UsageEvent
    path: tuple[str, ...] = ()

    def called(self, name: str, *, succeeded: bool = True) -> bool:
        """Whether the history holds a call of tool `name` (by default: one that succeeded).

        Args:
            name: The tool's name.
            succeeded: Count only calls whose result is not an error.
        """
        ids = {p.id for m in self.history for p in m.tool_uses if p.name == name}
        if not ids:
            return False
        if not succeeded:
            return True
        return any(
            r.tool_use_id in ids and not r.is_error for m in self.history for r in m.tool_results
        )


EnabledCheck: TypeAlias = (
    "Callable[[EnabledContext], bool] | Callable[[EnabledContext], Awaitable[bool]]"
)
"""`enabled=` of `@tool`: whether the tool is offered for the next answer (sync or async)."""
