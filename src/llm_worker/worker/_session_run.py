"""A run in a session: claim it, load its history (and pause), run, append what is new.

The session, not the Worker's memory, is the source of truth: the history is replaced by the
session's before each run, and only the messages the run added are appended, with the run's
pause (or none), in one write that checks nothing else changed the session meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from llm_worker.errors import PauseStateError
from llm_worker.state import OutputT, RunStatus
from llm_worker.worker._stream import RunStream
from llm_worker.worker._sync import SyncRuns

if TYPE_CHECKING:
    from llm_worker.limits import Limits
    from llm_worker.messages import Message
    from llm_worker.sessions import Session, SessionRecord
    from llm_worker.state import Decision, PauseState, RunResult
    from llm_worker.worker._config import WorkerConfig

Sink = Callable[[Any], None]

__all__ = ("SessionRuns", "check_unpaused", "in_session", "paused_state")

R = TypeVar("R", bound="RunResult[Any]")


async def in_session(
    session: Session, history: list[Message], work: Callable[[SessionRecord], Awaitable[R]]
) -> R:
    """Run `work` (given the loaded record) under the session's claim; append what is new.

    `work` replaces `history` by the record's messages (or the pause's history, the same)
    before it changes it; the messages after those are the run's.

    Raises:
        SessionBusyError: Another run holds the session, or took it over meanwhile.
        SessionError: The store failed.
    """
    token = await session.claim()
    try:
        record = await session.load()
        base = len(record.messages)
        before = list(history)
        try:
            result = await work(record)
        except Exception:
            # A run that failed past its start leaves a valid history (its clean-up repaired
            # it): keep it, so the conversation goes on from what really happened. One that
            # was refused before it began changes nothing (a pause stays to be resumed): the
            # history is still the Worker's own, which a cleared (or another) session must
            # not be given.
            if _started(before, history) and history[:base] == record.messages:
                await session.append(token, record.version, history[base:], None)
            raise
        paused = result.state if result.status is RunStatus.PAUSED else None
        await session.append(token, record.version, history[base:], paused)
        return result
    finally:
        with anyio.CancelScope(shield=True):
            await session.release(token)


def _started(before: list[Message], history: list[Message]) -> bool:
    """Whether a run changed `history` (`before` is a copy of it from before the run).

    By identity: a run's messages are new objects, so a history the run never touched
    is the same objects, whatever they hold.
    """
    if len(history) != len(before):
        return True
    return any(a is not b for a, b in zip(history, before, strict=True))


def paused_state(record: SessionRecord, state: PauseState | None, session_id: str) -> PauseState:
    """The pause a `resume(session=...)` goes on from: the session's, or the given one.

    Raises:
        PauseStateError: The session has no paused run, or `state` is not its pause.
    """
    if state is None:
        if record.pause is None:
            raise PauseStateError(f"session {session_id!r} has no paused run to resume")
        return record.pause
    if len(state.history) != len(record.messages):
        raise PauseStateError(
            f"this pause state is not the pause of session {session_id!r} (its history differs)"
        )
    return state


def check_unpaused(record: SessionRecord, session_id: str) -> None:
    """Refuse a new run on a session whose last run paused.

    Raises:
        PauseStateError: Resume it (`resume(session=...)`) or clear the pause first.
    """
    if record.pause is not None:
        raise PauseStateError(
            f"session {session_id!r}: its last run paused; resume it with "
            "worker.resume(session=...) first"
        )


class SessionRuns(SyncRuns[OutputT], Generic[OutputT]):
    """A base class of `Worker`: runs and resumes in a session (`session=`) or not, streamed."""

    _cfg: WorkerConfig
    history: list[Message]
    _paused: PauseState | None

    def _check_idle(self, state: PauseState | None = None) -> None: ...  # the Worker's

    async def _run_now(
        self, input: str | Message | Iterable[Message], sink: Sink | None, limits: Limits | None
    ) -> RunResult[OutputT]:
        raise NotImplementedError  # the Worker's

    async def _resume_now(
        self,
        state: PauseState,
        decisions: Mapping[str, Decision],
        sink: Sink | None,
        limits: Limits | None,
    ) -> RunResult[OutputT]:
        raise NotImplementedError  # the Worker's

    async def _run(
        self,
        input: str | Message | Iterable[Message],
        sink: Sink | None,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        chosen = session or self._cfg.session
        if chosen is None:
            return await self._run_now(input, sink, limits)

        async def work(record: SessionRecord) -> RunResult[OutputT]:
            self._check_idle()  # before the history is touched
            check_unpaused(record, chosen.session_id)
            self.history[:] = record.messages
            self._paused = None  # the session has none: it is the source of truth
            return await self._run_now(input, sink, limits)

        return await in_session(chosen, self.history, work)

    async def _resume(
        self,
        state: PauseState | None,
        decisions: Mapping[str, Decision],
        sink: Sink | None,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        chosen = session or self._cfg.session
        if chosen is None:
            if state is None:
                raise PauseStateError("resume() needs a pause state, or a session= holding one")
            return await self._resume_now(state, decisions, sink, limits)

        async def work(record: SessionRecord) -> RunResult[OutputT]:
            paused = paused_state(record, state, chosen.session_id)
            return await self._resume_now(paused, decisions, sink, limits)

        return await in_session(chosen, self.history, work)

    def stream(
        self,
        input: str | Message | Iterable[Message],
        *,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunStream[OutputT]:
        """Run like `run()`, yielding every event as it happens, a `RunCompleted` last.

        ```python
        async with worker.stream("What is the weather in Kyoto?") as stream:
            async for event in stream:
                match event:
                    case BlockDelta(delta=TextDelta(text=text)):
                        print(text, end="")
        print(stream.result.usage)
        ```

        The run starts when you begin reading; `stream.result` holds its `RunResult` once the
        stream is over, and `async with` cancels the run if you stop reading early. See
        `RunStream` for the events. The errors are those of `run()`, raised where you read.
        """
        return RunStream(lambda sink: self._run(input, sink, limits, session))

    def resume_stream(
        self,
        state: PauseState | None = None,
        *,
        decisions: Mapping[str, Decision] | None = None,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunStream[OutputT]:
        """Go on with a paused run like `resume()`, yielding its events like `stream()`.

        The errors are those of `resume()`, raised where you read the stream.
        """
        return RunStream(lambda sink: self._resume(state, decisions or {}, sink, limits, session))
