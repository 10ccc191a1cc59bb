"""A chat the server keeps (`session_from=`): its session per request, its new message.

With `session_from`, the server, not the browser, holds the conversation: a request's run
loads the chat's session and takes only the browser's new user message (or its answers to a
pause) from the request. The session is keyed by the owner and the chat id together (the
`chat_key`), so a client naming another owner's chat id reaches a session of its own.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable

import anyio

from llm_worker.messages import Message, ToolResultPart
from llm_worker.sessions import Session, SessionRecord
from llm_worker.state import PauseState
from llm_worker.ui._asgi import BadRequest
from llm_worker.ui._auth import owner_part
from llm_worker.ui._errors import GENERIC_ERROR
from llm_worker.ui._store import MemoryPauseStore

__all__ = (
    "NO_PAUSE_STORE",
    "NoPauseStore",
    "SessionFrom",
    "close_session",
    "new_message",
    "open_session",
    "split_key",
)

_log = logging.getLogger("llm_worker.ui")

SessionFrom = Callable[[str, str], "Session | Awaitable[Session]"]
"""`session_from(owner, chat_id) -> Session`, sync or async: the chat's session, opened for
one request (the adapter closes it after the run: `aclose()`, else `close()`). `owner` is
what `authorize` returned ("" without it) and `chat_id` the chat (thread) id the request
names. Key the session by both, in a way no other pair spells (e.g.
`SqliteSession(f"{owner}/{chat_id}", path)` when owner ids never hold a "/"), so that one
owner's chat id never names another owner's conversation."""


async def open_session(session_from: SessionFrom, key: str) -> tuple[Session, SessionRecord]:
    """The session `session_from` gives the chat `key` (a `chat_key`), and what it holds.

    Only for a request naming a chat: one naming none has no session (it could only share
    one with every other anonymous request).

    Raises:
        BadRequest: `session_from` failed or returned no session (500, a generic text; the
            exception is logged on `llm_worker.ui`), or its store failed (503).
    """
    owner, chat_id = split_key(key)
    try:
        session = session_from(owner, chat_id)
        if inspect.isawaitable(session):
            session = await session
        if not isinstance(session, Session):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"session_from returned {session!r}, not a Session")
    except Exception as exc:
        _log.error("session_from failed", exc_info=exc)
        raise BadRequest(500, GENERIC_ERROR) from exc
    try:
        return session, await session.load()
    except BaseException as exc:
        await close_session(session)
        if isinstance(exc, Exception):
            _log.error("the chat's session could not be read", exc_info=exc)
            raise BadRequest(503, "the chat's history could not be read") from exc
        raise


class NoPauseStore(MemoryPauseStore):
    """The pause store of a run in a session: it keeps nothing (the session keeps the pause)."""

    async def put(self, chat_id: str, state: PauseState) -> None:
        """Keep nothing."""
        del chat_id, state


NO_PAUSE_STORE = NoPauseStore()


def split_key(key: str) -> tuple[str, str]:
    """The owner and the chat id of a `chat_key`."""
    owner = owner_part(key)
    return owner, key[len(f"{len(owner)}:{owner}:") :]


def new_message(history: list[Message]) -> list[Message]:
    """The browser's new message, the run's input in a session (its older ones are ignored).

    Raises:
        BadRequest: The last message is not the user's (400): in a session, front-end tool
            results and regenerations have no place the server could check them against.
    """
    last = history[-1] if history else None
    if (
        last is None
        or last.role != "user"
        or any(isinstance(p, ToolResultPart) for p in last.content)
    ):
        raise BadRequest(400, "a chat kept on the server takes a new user message as its input")
    return history[-1:]


async def close_session(session: Session) -> None:
    """Close `session` (`aclose()`, else `close()`, if it has either), shielded."""
    with anyio.CancelScope(shield=True):
        closer = getattr(session, "aclose", None)
        if callable(closer):
            done = closer()
            if inspect.isawaitable(done):
                await done
            return
        closer = getattr(session, "close", None)
        if callable(closer):
            closer()
