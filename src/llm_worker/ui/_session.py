"""A chat the server keeps (`session_from=`): its session per request, its new message.

With `session_from`, the server, not the browser, holds the conversation: a request's run
loads the chat's session and takes only the browser's new user message (or its answers to a
pause, or its results for the calls of its own tools the pause waits on) from the request.
The session is keyed by the owner and the chat id together (the `chat_key`), so a client
naming another owner's chat id reaches a session of its own.

Everything a browser sends is untrusted: its results are taken only for front-end calls
pending in the session's pause, checked once when the request comes (a 4xx) and again when
the run loads the session under its claim (a second tab that answered meanwhile leaves this
run nothing to answer: `SessionBusyError`, nothing written).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Collection, Sequence

import anyio

from llm_worker._log import logger
from llm_worker.errors import SessionBusyError
from llm_worker.messages import Message, ToolResultPart
from llm_worker.sessions import Session, SessionRecord
from llm_worker.state import PauseState
from llm_worker.ui._asgi import BadRequest
from llm_worker.ui._auth import owner_part
from llm_worker.ui._errors import GENERIC_ERROR
from llm_worker.ui._frontend import with_frontend_results
from llm_worker.ui._store import MemoryPauseStore

__all__ = (
    "NO_PAUSE_STORE",
    "AnsweredSession",
    "NoPauseStore",
    "SessionFrom",
    "answered",
    "close_session",
    "new_message",
    "open_session",
    "sent_results",
    "split_key",
)

_log = logger("llm_worker.ui")

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
        BadRequest: The last message is not the user's (400): in a session, a regeneration
            or an assistant message the browser wrote has no place the server could check it
            against (tool results go through `sent_results` and `answered`).
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


def sent_results(history: list[Message]) -> list[ToolResultPart]:
    """The tool results the browser's messages end with (none when they end otherwise).

    A browser answers its own tools' calls with a last message of results only (a Vercel
    assistant message's tool outputs, AG-UI tool messages): only that message is taken, as
    only the new user message is, and each result is then checked by `answered`.
    """
    last = history[-1] if history else None
    if last is None or last.role != "user" or not last.content:
        return []
    if all(isinstance(p, ToolResultPart) for p in last.content):
        return last.tool_results
    return []


def answered(
    record: SessionRecord,
    results: Sequence[ToolResultPart],
    names: Collection[str],
    *,
    deciding: bool = False,
) -> list[ToolResultPart]:
    """Of the browser's `results`, those answering front-end calls the session's pause waits on.

    A result is taken only for a call of one of `names` (the browser's tools) that the pause
    holds unanswered; the run gives it the session's tool name and input, not the browser's.
    One for a call the pause holds a result of already (a server tool's that ran beside the
    front-end call, or an output given before the pause came back for an approval) is the
    browser's copy of the session's: left out, the session's stands.

    Args:
        record: The session as the request read it.
        results: The tool results the browser's request ends with (`sent_results`).
        names: The names of the tools the browser runs.
        deciding: The request also answers approvals (then it may bring no new output).

    Raises:
        BadRequest: Nothing waits, or the results answer nothing new (409); two results for
            one call, a call the pause does not hold, or a server tool's call still waiting
            for its approval (400).
    """
    pause = record.pause
    if pause is None:
        text = "no tool call of this chat waits for a result (answered already, or never made)"
        raise BadRequest(409, text)
    calls = {p.call.id: p for p in pause.pending}
    earlier = {r.tool_use_id for m in record.messages for r in m.tool_results}
    fresh: list[ToolResultPart] = []
    seen: set[str] = set()
    for result in results:
        call_id = result.tool_use_id
        if call_id in seen:
            raise BadRequest(400, f"two results for the tool call {_shown(call_id)}")
        seen.add(call_id)
        pending = calls.get(call_id)
        if pending is None and call_id in earlier:
            raise BadRequest(409, f"the tool call {_shown(call_id)} has its result already")
        if pending is None:
            raise BadRequest(400, f"no tool call {_shown(call_id)} of this chat waits")
        if pending.result is not None:
            continue  # the browser's copy of a result the session holds: the session's stands
        if pending.call.name not in names or pending.status != "pending":
            text = f"the tool call {_shown(call_id)} is not of a tool the browser runs"
            raise BadRequest(400, text + ": its result is the server's to give")
        fresh.append(result)
    if not fresh and not deciding:
        raise BadRequest(409, "the tool calls these results answer have their results already")
    return fresh


def _shown(call_id: str) -> str:
    """A call id the browser sent, as an error names it (cut: the id may be long)."""
    return repr(call_id if len(call_id) <= 80 else call_id[:80] + "…")


class AnsweredSession:
    """A chat's session whose pause a resumed run loads with the browser's outputs in it.

    The outputs were checked against the pause the request read (`answered`); they are
    checked again against the one the run loads under its claim, so that two requests
    answering the same call at once (two tabs) never both go on: the later one finds the
    call answered and fails with `SessionBusyError`, having written nothing.

    Args:
        session: The chat's session.
        results: The outputs `answered` took, each for a front-end call pending in the pause.
        names: The names of the tools the browser runs.
    """

    def __init__(
        self, session: Session, results: Sequence[ToolResultPart], names: Collection[str]
    ) -> None:
        self._session = session
        self._results = list(results)
        self._names = frozenset(names)

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._session.session_id

    def answering(self, pause: PauseState | None) -> PauseState:
        """`pause` with the outputs in it (their calls `"done"`).

        Raises:
            SessionBusyError: `pause` no longer waits on every one of their calls (another
                request answered them since this one was checked).
        """
        pending = [] if pause is None else pause.pending
        waiting = {p.call.id for p in pending if p.status == "pending"}
        if pause is None or any(r.tool_use_id not in waiting for r in self._results):
            raise SessionBusyError(
                f"session {self.session_id!r} changed: another request answered its tool call",
                session_id=self.session_id,
            )
        return with_frontend_results(pause, [Message("user", [*self._results])], self._names)

    async def claim(self) -> str:
        """Take the session for the run (see `Session.claim`)."""
        return await self._session.claim()

    async def load(self) -> SessionRecord:
        """The session as stored, its pause with the browser's outputs (see `answering`)."""
        record = await self._session.load()
        return dataclasses.replace(record, pause=self.answering(record.pause))

    async def append(
        self, token: str, version: int, messages: list[Message], pause: PauseState | None
    ) -> None:
        """Append the run's messages (see `Session.append`)."""
        await self._session.append(token, version, messages, pause)

    async def release(self, token: str) -> None:
        """Give up the claim (see `Session.release`)."""
        await self._session.release(token)
