"""What a Worker keeps about its conversation from one request to the next, across runs.

A long run stays flat in cost because each request does only what changed since the last
one: the history's check (`Checked`) and the sent messages' check, told which messages the
on_message_send hooks edited in place (`_lent.Lent`). `Worker.fork` starts a
conversation of its own; a resumed run in a new Worker starts a new one (one full pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llm_worker.worker._cache import CacheWatch
from llm_worker.worker._history import Checked

if TYPE_CHECKING:
    from llm_worker.messages import Message, Request
    from llm_worker.state import CacheMiss
    from llm_worker.worker._cache import Edited

__all__ = ("Conversation",)


@dataclass(slots=True)
class Conversation:
    """One conversation's state between requests.

    Attributes:
        history: The check of the Worker's history (repaired before each request).
        sent: The check of the messages sent (after the on_message_send hooks).
        cache: The previous request sent, for the prompt cache's key and diagnostics.
    """

    history: Checked = field(default_factory=Checked)
    sent: Checked = field(default_factory=Checked)
    cache: CacheWatch = field(default_factory=CacheWatch)
    touched: list[tuple[int, Message]] = field(default_factory=lambda: [])
    """The messages the hooks edited in place since the history's last check (where sent)."""

    def repair(self, history: list[Message]) -> int:
        """Repair the Worker's history in place, checking what changed since the last request.

        Returns:
            The number of changes made.
        """
        touched, self.touched = self.touched, []
        edited = _found(history, touched) if touched else ()
        repaired, changes = self.history.repair(history, edited=edited)
        if changes:
            history[:] = repaired
        return changes

    def recheck(self, history: list[Message], request: Request) -> bool:
        """Check the history and `request.messages` in full again; True if either changed.

        The checks look at new messages only: a message edited in place further back (a
        hook that takes the calls out of an old assistant message) is not seen, and can
        leave a result that answers no call, which the provider rejects. After such a
        rejection the checks start over, here.
        """
        self.history, self.sent = Checked(), Checked()
        changed = self.repair(history)
        request.messages, changes = self.sent.repair(request.messages)
        return bool(changed or changes)

    def sending(
        self,
        request: Request,
        messages: list[Message],
        number: int,
        edited: list[Edited] | None = None,
    ) -> CacheMiss | None:
        """Set `request.messages` to `messages` repaired; where the prompt cache stops, if early.

        Args:
            request: The request about to be sent (after the on_message_send hooks).
            messages: The messages the hooks left for it.
            number: The request's number in the run.
            edited: The messages in it the hooks edited in place.
        """
        indexes = [edit.index for edit in edited] if edited else ()
        request.messages = self.sent.repair(messages, edited=indexes)[0]
        if edited:
            # The edited messages are the history's own objects: checked there too, with
            # their neighbours in the history (a hook may also have left one out of the
            # request, which then fits while the history does not), before the next request.
            self.touched += [(edit.index, edit.message) for edit in edited]
        if request.prompt_cache is None:  # caching off, or a hook took it off this request
            return None
        return self.cache.check(request, number, edited)


def _found(history: list[Message], touched: list[tuple[int, Message]]) -> list[int]:
    """Where each touched message is in `history` (by identity; at its index when sent, mostly)."""
    found: list[int] = []
    for sent_at, message in touched:
        index = sent_at
        if not (index < len(history) and history[index] is message):
            index = next((i for i, m in enumerate(history) if m is message), -1)
        if index >= 0:
            found.append(index)
    return found
