"""The messages lent to the on_message_send hooks: which of them a hook read, and edited.

The per-request checks compare a request with the last one by message identity, which an
edit in place does not change (a timestamp put into the first message, a call taken out of
an old one). Printing every message before each request would cost what the checks saved;
instead the hooks get a list that notes each message read out of it — by index, slice,
iteration or `pop` — with its print from before the hooks ran (`sent_print`). Only those
are printed again afterwards: a hook that reads no message costs nothing, one that reads
them all costs a print each (as it spends a visit each itself).

A message reached another way (kept from an earlier request, the Worker's `history`) is
not seen: the provider's refusal of a broken history stays the backstop there
(`Conversation.recheck`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, SupportsIndex, overload

from llm_worker.worker._cache import Edited, SentPrint, sent_print

if TYPE_CHECKING:
    from llm_worker.messages import Message

__all__ = ("Lent", "edited_in")


class Lent(list["Message"]):
    """A request's messages while the on_message_send hooks run, noting what they read."""

    __slots__ = ("_taken",)

    def __init__(self, messages: Iterable[Message]) -> None:
        super().__init__(messages)
        # id -> (index when read, the message, its print then); None once the hooks ran.
        self._taken: dict[int, tuple[int, Message, SentPrint]] | None = {}

    def _take(self, index: int, message: Message) -> None:
        taken = self._taken
        if taken is not None and id(message) not in taken:
            taken[id(message)] = (index, message, sent_print(message))

    def _take_all(self) -> None:
        if self._taken is not None:
            for index, message in enumerate(super().__iter__()):
                self._take(index, message)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            if self._taken is not None:
                for i in range(*index.indices(len(self))):
                    self._take(i, super().__getitem__(i))
            return super().__getitem__(index)
        message = super().__getitem__(index)
        if self._taken is not None:
            i = operator.index(index)
            self._take(i + len(self) if i < 0 else i, message)
        return message

    def __iter__(self) -> Iterator[Message]:
        if self._taken is None:
            return super().__iter__()
        return self._walk(enumerate(super().__iter__()))

    def __reversed__(self) -> Iterator[Message]:
        if self._taken is None:
            return super().__reversed__()
        size = len(self)
        return self._walk((size - 1 - i, m) for i, m in enumerate(super().__reversed__()))

    def _walk(self, items: Iterable[tuple[int, Message]]) -> Iterator[Message]:
        for index, message in items:
            self._take(index, message)
            yield message

    def pop(self, index: SupportsIndex = -1) -> Message:
        """Remove and return a message (noted as read)."""
        message = super().pop(index)
        self._take(-1, message)  # out of the list: found again by identity, if put back
        return message

    def copy(self) -> list[Message]:
        """A plain list of the messages (all noted as read)."""
        self._take_all()
        return super().copy()

    def sort(self, *args: object, **kwargs: object) -> None:
        """Sort in place (a key function reads every message)."""
        self._take_all()
        super().sort(*args, **kwargs)  # type: ignore[call-overload]  # list's own arguments

    def __add__(self, other: list[Message]) -> list[Message]:  # type: ignore[override]
        self._take_all()
        return super().__add__(other)

    def __mul__(self, count: SupportsIndex) -> list[Message]:
        self._take_all()
        return super().__mul__(count)

    __rmul__ = __mul__

    def returned(self) -> list[tuple[int, Message, SentPrint]]:
        """Stop noting; the messages read whose print changed: `(read at, message, before)`."""
        taken, self._taken = self._taken, None
        if not taken:
            return []
        return [item for item in taken.values() if sent_print(item[1]) != item[2]]


def edited_in(
    messages: list[Message], changed: list[tuple[int, Message, SentPrint]]
) -> list[Edited]:
    """Where each message a hook edited in place is in `messages`.

    The hooks may have moved or dropped it: it is found by identity then.
    """
    found: list[Edited] = []
    for read_at, message, before in changed:
        index = read_at
        if not (0 <= index < len(messages) and messages[index] is message):
            index = next((i for i, m in enumerate(messages) if m is message), -1)
            if index < 0:
                continue  # left out of the request: nothing of it is sent
        found.append(Edited(index, message, before))
    return found
