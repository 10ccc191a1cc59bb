"""Where a run paused for approval waits for the browser's decision.

The pause state stays on the server, keyed by the chat (thread) id, never in the browser: a
`PauseState` lets its calls run once approved, so a state a browser could edit would let it
run any tool with any arguments. The browser sends back only its decisions.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Protocol

from llm_worker.state import PauseState
from llm_worker.ui._auth import owner_part

__all__ = ("MemoryPauseStore", "PauseStore")


class PauseStore(Protocol):
    """Keeps paused runs by chat id until the browser decides (implement it over a database)."""

    async def put(self, chat_id: str, state: PauseState) -> None:
        """Keep `state` as the paused run of `chat_id` (replacing any earlier one)."""
        ...

    async def take(self, chat_id: str) -> PauseState | None:
        """Remove and return the paused run of `chat_id`, if there is one.

        Taking it is what makes a decision apply once: a second POST with the same decision
        finds nothing to resume.
        """
        ...


class MemoryPauseStore:
    """A `PauseStore` in this process's memory, holding at most `max_entries` paused runs.

    Past the bound a pause is dropped (its chat then gets an error on its decision): the
    oldest of the owner holding the most, so memory stays bounded whatever the browsers do
    and one owner's many pauses push out their own, never another owner's. Pauses do not
    survive a restart: use a store over your database for that (a `PauseState` round-trips
    through JSON).
    """

    def __init__(self, max_entries: int = 1000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self.max_entries = max_entries
        self._states: OrderedDict[str, PauseState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    async def put(self, chat_id: str, state: PauseState) -> None:
        """Keep `state` for `chat_id`; past `max_entries` drop the oldest of the busiest owner."""
        self._states.pop(chat_id, None)
        self._states[chat_id] = state
        if len(self._states) > self.max_entries:
            del self._states[self._evicted(chat_id)]

    def _evicted(self, keep: str) -> str:
        """The pause to drop: the oldest (not `keep`) of the owner holding the most."""
        counts = Counter(owner_part(key) for key in self._states)
        busiest = max(counts.values())
        return next(
            key for key in self._states if key != keep and counts[owner_part(key)] == busiest
        )

    async def take(self, chat_id: str) -> PauseState | None:
        """Remove and return the pause of `chat_id`."""
        return self._states.pop(chat_id, None)
