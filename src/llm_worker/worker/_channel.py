"""`Channel`: the events of one run on their way to its `RunStream` reader.

The run puts its own events (turn, tool and hook events) in the channel's buffer. While the
model's answer streams, the run lends the reader its event iterator (`Channel.lend`): the
reader's task then reads the network and processes each event itself, so an event costs one
task wake-up, not two (the run's task, then the reader's). The run takes the iterator back at
each completed block, at the end of the answer, on an error, and when it is cancelled. Under
trio a channel of `_stream_trio`'s lends nothing: its run reads the answer itself.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, cast

import anyio

from llm_worker.state import RunCompleted

__all__ = ("BUFFERED_MAX", "Channel", "Loan", "Reached", "Settable", "channel_of", "drive_run")

BUFFERED_MAX = 1024
"""Events of sub-agents (and of a handoff's Worker) a reader may have unread before they wait.

Their answers are read in their own tasks, not lent to the reader: past this many unread
events they wait (`Channel.drained`) until the reader has taken half of them.
"""


class Settable(Protocol):
    """What a `Channel` wakes its waiters through: an asyncio future (or trio's stand-in)."""

    def done(self) -> bool:
        """Whether it was set."""
        ...

    def set_result(self, result: None, /) -> None:
        """Wake whoever waits on it."""
        ...


class Reached(Exception):
    """Raised by a lent event's processing that failed after the sinks had the event."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class Loan:
    """The run's event iterator, lent to the reader until `back` is resolved."""

    __slots__ = ("back", "ctx", "idle", "it", "loop", "process", "reader", "revoked")

    def __init__(
        self,
        it: AsyncIterator[Any],
        process: Callable[[Any], Any],
        ctx: contextvars.Context,
        back: asyncio.Future[Any],
    ) -> None:
        self.it = it
        self.process = process  # what the run does with each event; non-None: hand back
        self.ctx = ctx  # the run's context variables (tracing), for processing the events
        self.back = back  # the run waits on it: a value to act on, None at the end, or an error
        self.revoked = False  # the run took the iterator back (it was cancelled)
        self.reader: asyncio.Task[Any] | None = None  # the reader's task, inside a step
        self.idle: asyncio.Future[None] | None = None  # resolved when that step is over
        self.loop = back.get_loop()


class Channel:
    """The events of one run on their way to its `RunStream` reader (`put` is the sink)."""

    __slots__ = ("buffer", "loan", "orphaned", "room", "sink", "waiter")

    def __init__(self) -> None:
        # Unbounded only for what the run's own code produces (turn, tool and hook events);
        # the model's answer is read through the loan, at the reader's pace.
        self.buffer: deque[Any] = deque()
        self.loan: Loan | None = None
        self.waiter: Settable | None = None
        # The sink the run calls; the run's processing of a lent event skips it (the reader
        # hands the event on itself), so it is kept as one object to compare with `is`.
        self.sink: Callable[[object], None] = self.put
        self.orphaned = False  # its RunStream was dropped unread: the run reads on alone
        self.room: Settable | None = None  # sub-agents waiting for the reader

    def full(self) -> bool:
        """Whether the reader has `BUFFERED_MAX` events unread (sub-agents then wait)."""
        return len(self.buffer) >= BUFFERED_MAX and not self.orphaned

    async def drained(self) -> None:
        """Wait until the reader has taken half of what it had unread (or is gone)."""
        room = self.room
        if room is None:
            room = self.room = asyncio.get_running_loop().create_future()
        # Shared by every waiting sub-agent: one cancel is its own. A future: this class's are.
        await asyncio.shield(cast("asyncio.Future[None]", room))

    def let_in(self) -> None:
        """Wake the sub-agents waiting for the reader."""
        room, self.room = self.room, None
        if room is not None and not room.done():
            room.set_result(None)

    def put(self, item: object) -> None:
        """Hand an event (or the run's error, or None at its end) to the reader."""
        if self.orphaned:
            return
        self.buffer.append(item)
        waiter = self.waiter
        if waiter is not None:
            self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def orphan(self) -> None:
        """The reader dropped the stream without closing it: end the loan, keep nothing."""
        self.orphaned = True
        self.buffer.clear()
        self.let_in()
        loan = self.loan
        if loan is not None:
            self.give_back(loan, None)

    async def wait(self) -> None:
        """Wait for an item or a loan."""
        waiter = self.waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self.waiter = None

    async def lend(
        self, it: AsyncIterator[Any], process: Callable[[Any], Any], ctx: contextvars.Context
    ) -> Any:
        """Let the reader step `it` and `process` each event until one gives a value.

        Returns:
            The first non-None value of `process`, or None once `it` is exhausted.

        Raises:
            Exception: What `it` or `process` raised.
        """
        loan = Loan(it, process, ctx, asyncio.get_running_loop().create_future())
        self.loan = loan
        self._wake()
        try:
            return await loan.back
        except BaseException:
            # Cancelled (or the error handed back): take the iterator back, and let a step
            # under way end first — the iterator never runs in two tasks at once.
            if self.loan is loan:
                self.loan = None
            reader = loan.reader
            if reader is not None:
                loan.revoked = True
                reader.cancel("the run was cancelled")  # the step gets what the run got
                loan.idle = asyncio.get_running_loop().create_future()
                with anyio.CancelScope(shield=True):
                    await loan.idle
            raise

    def give_back(self, loan: Loan, value: Any) -> None:
        """End the loan: the run goes on with `value` (None: the end; an exception: raised)."""
        if self.loan is loan:
            self.loan = None
        back = loan.back
        if not back.done():
            if isinstance(value, BaseException):
                back.set_exception(value)
            else:
                back.set_result(value)

    def failed(self, loan: Loan, event: Any, exc: BaseException) -> None:
        """Processing a lent event raised: the run gets the error (after the event, if sent)."""
        if isinstance(exc, Reached):  # the event reached the sinks, then something failed
            self.buffer.appendleft(event)
            exc = exc.error
        self.give_back(loan, exc)

    def settled(self, loan: Loan, event: Any, value: Any) -> bool:
        """A lent event was processed to `value`: end the loan on a value, as `__anext__` does.

        For the readers that take the lent step in a loop of their own (see `lender`), when
        the processing gave a value or sent events of its own (kept in step with `__anext__`).

        Returns:
            Whether the reader hands `event` on now; if not, it is put back before what its
            processing sent, and the reader reads again.
        """
        if value is not None:
            self.give_back(loan, value)
        if self.buffer:
            self.buffer.appendleft(event)
            return False
        return True

    def stepped(self, loan: Loan, failed: BaseException | None) -> bool:
        """A step is over; whether its exception was the run's revoking it (not the reader's)."""
        reader, loan.reader = loan.reader, None
        idle = loan.idle
        if idle is not None and not idle.done():
            idle.set_result(None)
        if not loan.revoked or reader is None:
            return False
        # The one cancellation the run sent is spent in this step (raised, or swallowed by
        # the iterator); any other left is the reader's own.
        left = reader.uncancel()
        return isinstance(failed, asyncio.CancelledError) and left == 0


def channel_of(sinks: list[Callable[[Any], None]]) -> Channel | None:
    """The `RunStream` channel among a run's sinks, if a stream reads the run."""
    for sink in sinks:
        owner = getattr(sink, "__self__", None)
        if isinstance(owner, Channel):  # a trio stream's too
            return owner
    return None


async def drive_run(
    start: Callable[[Callable[[Any], None]], Awaitable[Any]], channel: Channel
) -> None:
    """Run a stream's run into `channel`: its events, then its result (or error), then None.

    The run's task on either loop (asyncio's, or `_stream_trio`'s under trio). A function,
    not a `RunStream` method: the run's task must not keep its RunStream alive (see
    `RunStream.__del__`).
    """
    put = channel.sink
    try:
        put(RunCompleted(await start(put)))
    except anyio.get_cancelled_exc_class():
        raise  # the stream was closed (or the loop's run is ending): its reader ends
    except BaseException as exc:  # handed to the reader, who re-raises it
        put(exc)
    finally:
        put(None)
