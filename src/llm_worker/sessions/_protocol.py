"""The Session protocol: what a Worker needs of a store to keep a conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from llm_worker.messages import Message
    from llm_worker.state import PauseState

__all__ = ("ReplaySafeSession", "Session", "SessionRecord")


@dataclass(slots=True, frozen=True)
class SessionRecord:
    """A session as loaded: its messages, its paused run (if any) and its version.

    Attributes:
        messages: The conversation, oldest first.
        pause: The pause of the session's last run, which `Worker.resume(session=...)`
            goes on from; None when the last run ended.
        version: Bumped by every append and clear: an append names the version it read,
            and is refused if the session changed since.
    """

    messages: list[Message] = field(default_factory=lambda: [])
    pause: PauseState | None = None
    version: int = 0


@runtime_checkable
class Session(Protocol):
    """A conversation kept in a store, that a Worker loads before a run and appends to after.

    `SqliteSession` and `PostgresSession` implement it; any store that keeps these promises
    can (Redis, a document database):

    - `claim()` gives the run the session, or raises `SessionBusyError` while another run
      holds it; a claim whose process is gone is taken over;
    - `append()` adds messages and sets (or clears) the pause in one atomic write, only if
      the claim still holds and the version is the one `load()` read — else
      `SessionBusyError`, and nothing is written;
    - `release()` lets the next run claim it (a no-op once `append` released it).
    """

    @property
    def session_id(self) -> str:
        """The session's id."""
        ...

    async def claim(self) -> str:
        """Take the session for one run; returns the claim's token."""
        ...

    async def load(self) -> SessionRecord:
        """The session's messages, pause and version."""
        ...

    async def append(
        self, token: str, version: int, messages: list[Message], pause: PauseState | None
    ) -> None:
        """Append `messages`, set the pause, bump the version and release the claim."""
        ...

    async def release(self, token: str) -> None:
        """Give up the claim (nothing else changes)."""
        ...


@runtime_checkable
class ReplaySafeSession(Session, Protocol):
    """A session a `DurableWorker` can use: a recovered run appends its turn once.

    A durable run that crashed is run again from its start by another process; the store
    must let that attempt take the same history and write its turn only if the first did
    not. `SqliteSession` and `PostgresSession` implement it:

    - `claim(token)` takes a claim held under the same token again (the dead attempt's);
    - `messages_at(version, count)` gives back the messages the run first loaded, whatever
      was appended since (or raises `SessionError` if they are gone: a `clear()`);
    - `append(..., key=...)` stores its key in the same transaction, and an append whose
      key is stored writes nothing; `appended(key)` says whether (and at which version)
      the keyed append was made.
    """

    async def claim(self, token: str | None = None) -> str:
        """Take the session for one run, under `token` if given; returns the token."""
        ...

    async def messages_at(self, version: int, count: int) -> list[Message]:
        """The `count` messages the session held at `version`."""
        ...

    async def append(
        self,
        token: str,
        version: int,
        messages: list[Message],
        pause: PauseState | None,
        *,
        key: str | None = None,
    ) -> None:
        """Append like `Session.append`, once per `key`."""
        ...

    async def appended(self, key: str) -> int | None:
        """The version the append keyed `key` made, or None if none was."""
        ...
