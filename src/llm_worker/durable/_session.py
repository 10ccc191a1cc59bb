"""A durable run's session: its load recorded as a step, its appends made once.

A recovered run is its workflow run again from the start, in another process. Without this,
it would load the session afresh (a history its recorded answers were not made for, its own
turn included if the first attempt had appended it) and append its turn a second time.

`RunSession` wraps the Worker's session for one execution of one run:

- each load is a DBOS step recording the version read and the number of messages (not the
  messages: the store keeps them, append-only); a recovered run gets back exactly those
  messages (`messages_at`), whatever was appended since;
- the claim is taken under a token of the run's own (its id and a random part drawn once, a
  step), so a recovered run takes back the claim its dead attempt left; a turn whose append
  was made already claims nothing (the session may have gone on to another run since);
- each append carries a key, the run's token and the number of the run's turn in the session
  (its first run, then one per resume), so the store writes it once.

A different run still meets the claim and the version check: `SessionBusyError`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_worker.durable._errors import RecordError
from llm_worker.durable._steps import recorded
from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.sessions import ReplaySafeSession, SessionRecord
from llm_worker.state import PauseState

if TYPE_CHECKING:
    from llm_worker.durable._steps import Attempt
    from llm_worker.messages import Message
    from llm_worker.sessions import Session

__all__ = ("RunSession", "replay_safe", "run_session")


def replay_safe(session: Session | None) -> ReplaySafeSession | None:
    """`session`, if a durable run can append to it exactly once.

    Raises:
        ConfigurationError: `session` does not implement `ReplaySafeSession`.
    """
    if session is None or isinstance(session, ReplaySafeSession):
        return session
    raise ConfigurationError(
        "a durable run's session must be a ReplaySafeSession (SqliteSession, PostgresSession),"
        f" so that a recovered run appends its turn once; {type(session).__name__} is not"
    )


def run_session(session: Session | None, attempt: Attempt) -> RunSession | None:
    """The Worker's session as this execution's: its loads recorded, its appends made once.

    Raises:
        ConfigurationError: The session cannot append exactly once (`ReplaySafeSession`).
    """
    store = replay_safe(session)
    return None if store is None else RunSession(store, attempt)


@dataclass(slots=True)
class _Turn:
    """One claim -> load -> append of the run: its append's key and its claim's token."""

    number: int
    key: str
    token: str


class RunSession:
    """The session of one execution of a durable run (see the module's docstring)."""

    def __init__(self, store: ReplaySafeSession, attempt: Attempt) -> None:
        self._store = store
        self._attempt = attempt
        self._turns = 0
        self._turn: _Turn | None = None
        self._token: str | None = None

    def __repr__(self) -> str:
        return f"RunSession({self._store!r})"

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._store.session_id

    async def claim(self) -> str:
        """Take the session under the run's token, unless this turn was appended already."""
        token = await self._run_token()
        turn = _Turn(self._turns, f"{token}:{self._turns}", token)
        self._turns += 1
        self._turn = turn
        if await self._store.appended(turn.key) is not None:
            return turn.token  # written by an earlier attempt: nothing to hold
        return await self._store.claim(turn.token)

    async def _run_token(self) -> str:
        """The run's claim token: its id and a random part, recorded as a step.

        The run id alone would not do: two DBOS databases (or one wiped) may both have a run
        `chat-1`; on one session store the second would take the first's live claim, and its
        turn would pass for appended already.
        """
        if self._token is None:
            name = "llm-worker session token"

            async def draw() -> str:
                return uuid.uuid4().hex

            step = self._attempt.engine.run_step_async({"name": name}, draw)
            drawn = await recorded(self._attempt, name, step)
            if not isinstance(drawn, str):
                raise RecordError("it is not a string", run_id=self._attempt.run_id, step=name)
            self._token = f"durable:{self._attempt.run_id}:{drawn}"
        return self._token

    async def load(self) -> SessionRecord:
        """What the run's first attempt loaded for this turn (loaded now if it is this one)."""
        turn = self._current()
        name = f"llm-worker session load {turn.number}"
        live: list[SessionRecord] = []

        async def execute() -> dict[str, Any]:
            record = await self._store.load()
            live.append(record)
            pause = None if record.pause is None else record.pause.to_dict()
            return {"version": record.version, "count": len(record.messages), "pause": pause}

        step = self._attempt.engine.run_step_async({"name": name}, execute)
        kept: dict[str, Any] = await recorded(self._attempt, name, step)
        if live:
            return live[0]
        try:
            version, count = int(kept["version"]), int(kept["count"])
            pause = None if kept["pause"] is None else PauseState.from_dict(kept["pause"])
        except (KeyError, TypeError, ValueError, PauseStateError) as exc:
            raise RecordError(
                f"it is malformed ({exc!r})", run_id=self._attempt.run_id, step=name
            ) from None
        messages = await self._store.messages_at(version, count)
        return SessionRecord(messages, pause, version)

    async def append(
        self, token: str, version: int, messages: list[Message], pause: PauseState | None
    ) -> None:
        """Append the turn once: an earlier attempt's append makes this one a no-op."""
        key = self._current().key
        await self._store.append(token, version, messages, pause, key=key)

    async def release(self, token: str) -> None:
        """Give up the claim (a no-op once the append released it, or if another holds it)."""
        await self._store.release(token)

    def _current(self) -> _Turn:
        if self._turn is None:  # the Worker claims before it loads or appends
            raise ConfigurationError("a durable run's session was used before it was claimed")
        return self._turn
