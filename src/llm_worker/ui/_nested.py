"""A sub-agent's progress for a web front end: one small record per path, kept up to date.

A run tree's events all reach the root's stream (`event.path` names the sub-agent calls they
came through). The protocols' message models have no place for another agent's blocks, so a
child's progress is told as data the front end can show beside the call: for each path, its
status (`running`, then `done`), the text of its last completed text block (bounded) and the
tool it last called. Vercel writes it as a `data-subagent` part with the path as its id (the
client keeps the latest), and a transient `data-subagent-delta` per text delta for live
display; AG-UI as `CUSTOM` events named `subagent` / `subagent-delta`.
"""

from __future__ import annotations

from typing import Any

from llm_worker._run_events import TextComplete, ToolCallComplete, TurnEnded, TurnStarted
from llm_worker.events import BlockDelta, TextDelta

__all__ = ("NestedProgress", "path_key")

_TEXT_CHARS = 4_000  # a child's text kept in its record (the end of it); the rest is the child's


def path_key(path: tuple[str, ...]) -> str:
    """The id of a sub-agent's record: its call ids joined by `/`."""
    return "/".join(path)


class NestedProgress:
    """What a front end is told of each sub-agent's run, from its events."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: dict[tuple[str, ...], dict[str, Any]] = {}

    def record(self, event: object) -> tuple[str, dict[str, Any]] | None:
        """The updated record of the event's path (`None`: nothing to tell)."""
        path: tuple[str, ...] = getattr(event, "path", ())
        if type(event) is TurnStarted:
            self._records[path] = {
                "path": list(path),
                "status": "running",
                "text": "",
                "tool": None,
            }
        record = self._records.get(path)
        if record is None:
            return None
        if type(event) is TextComplete:
            record["text"] = event.text[-_TEXT_CHARS:]
        elif type(event) is ToolCallComplete:
            record["tool"] = event.call.name
        elif type(event) is TurnEnded:
            record["status"] = "done"
            del self._records[path]
        else:
            return None
        return path_key(path), dict(record)

    @staticmethod
    def delta(event: object) -> dict[str, Any] | None:
        """A text delta of a sub-agent, for live display (`None` for any other event)."""
        if type(event) is BlockDelta and type(event.delta) is TextDelta and event.delta.text:
            return {"path": list(event.path), "text": event.delta.text}
        return None
