"""`RunStream`: one run's events as an async iterator, its result once it is over.

The run goes on in a task of its own (its hooks, tools and cancel scopes live there), and its
events reach the reader through a `Channel`. While the model's answer streams, the run lends
the reader its event iterator (`Channel.lend`): the reader's task then reads the network and
processes each event itself, so an event costs one task wake-up, not two (the run's task, then
the reader's). The run takes the iterator back at each completed block, at the end of the
answer, on an error, and when it is cancelled.

Under trio (no asyncio loop at the first read) the run is a task of `_stream_trio`'s and
reads its answer itself: nothing is lent (see that module). The choice is made once, when the
run starts; the asyncio path below carries no check of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, cast

import anyio

from llm_worker.errors import ConfigurationError
from llm_worker.events import Event
from llm_worker.state import OutputT, RunCompleted, RunEvent, RunResult

if TYPE_CHECKING:
    from llm_worker.worker._stream_trio import Detached

__all__ = (
    "BUFFERED_MAX",
    "Channel",
    "Reached",
    "RunStream",
    "channel_of",
    "closing",
    "current_task",
    "lender",
)

BUFFERED_MAX = 1024
"""Events of sub-agents (and of a handoff's Worker) a reader may have unread before they wait.

Their answers are read in their own tasks, not lent to the reader: past this many unread
events they wait (`Channel.drained`) until the reader has taken half of them.
"""


if sys.version_info < (3, 12):
    # `asyncio.current_task()` is pure Python on 3.11 (a third of a microsecond, once per
    # event here); the lookup it makes, without the calls. C code from 3.12 on.
    _current_task: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = vars(
        asyncio.tasks
    )["_current_tasks"].get
else:
    _current_task = asyncio.current_task
current_task = _current_task  # for the readers that take a lent step inline (see `lender`)


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


class _Loan:
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
        self.loan: _Loan | None = None
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
        loan = _Loan(it, process, ctx, asyncio.get_running_loop().create_future())
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

    def give_back(self, loan: _Loan, value: Any) -> None:
        """End the loan: the run goes on with `value` (None: the end; an exception: raised)."""
        if self.loan is loan:
            self.loan = None
        back = loan.back
        if not back.done():
            if isinstance(value, BaseException):
                back.set_exception(value)
            else:
                back.set_result(value)

    def failed(self, loan: _Loan, event: Any, exc: BaseException) -> None:
        """Processing a lent event raised: the run gets the error (after the event, if sent)."""
        if isinstance(exc, Reached):  # the event reached the sinks, then something failed
            self.buffer.appendleft(event)
            exc = exc.error
        self.give_back(loan, exc)

    def settled(self, loan: _Loan, event: Any, value: Any) -> bool:
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

    def stepped(self, loan: _Loan, failed: BaseException | None) -> bool:
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


class RunStream(Generic[OutputT]):
    """One run's events as they happen; what `Worker.stream` and `Worker.resume_stream` return.

    The run starts when you begin reading. Read it with `async for event in stream`: the
    provider's events (`TextDelta`, `BlockStart`, …) arrive beside the Worker's own
    (`TurnStarted`, `TextComplete`, `ToolCallComplete`, `ToolResultReady`, `TurnEnded`; with
    an output type, `OutputPartial` and `OutputRejected`), and the last event is a
    `RunCompleted` whose `result` is the run's `RunResult` — also kept in `stream.result` once
    the stream is over. A `Worker[Invoice]`'s stream is a `RunStream[Invoice]`: it yields
    `RunEvent[Invoice]` (`OutputPartial[Invoice]`, `RunCompleted[Invoice]`). An exception of
    the run (`HookError`, `ProviderError`, …) is raised where the stream is read.

    The model's answer is read from the network as you read the stream: a reader that pauses
    holds the answer back (in the connection, not in memory) rather than let it pile up. Under
    trio the stream works the same, with the same events; its run reads the answer itself,
    ahead of a reader that lags by at most `BUFFERED_MAX` events.

    `async with worker.stream(...) as stream:` closes the run when the block ends: a reader
    that stops early cancels it (its clean-up runs as for any cancellation). Without
    `async with`, call `await stream.aclose()` when you stop before the end: a stream dropped
    unread and unclosed lets its run go on to its end alone, its events discarded.
    """

    def __init__(
        self, start: Callable[[Callable[[Any], None]], Awaitable[RunResult[OutputT]]]
    ) -> None:
        # `start(sink)` runs the run with `sink` receiving its events, and only its own: the
        # Worker registers the sink once the run holds it, so a stream refused because
        # another run is going never shows that run's events.
        self._start = start
        self._channel = Channel()
        self._task: asyncio.Task[None] | Detached | None = None
        self._result: RunResult[OutputT] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._over = False  # the reader saw the end, the error, or stopped: no more events
        self._reading = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RunEvent[OutputT]:
        if self._over:
            raise StopAsyncIteration
        channel = self._channel
        buffer = channel.buffer
        while not buffer:
            loan = channel.loan
            if loan is None:
                await self._wait()
                continue
            # The hot path: the reader reads the model's answer and processes each event
            # itself (see Channel.lend), inline here to keep this a single frame. The web
            # encoders run these steps inline too (ui/_encoder.py `sse_stream`): keep in step.
            if loan.reader is not None:
                raise _second_reader()
            loan.reader = _current_task(loan.loop)
            try:
                event = await loan.it.__anext__()
            except BaseException as exc:
                await self._failed_step(loan, exc)
                continue
            if loan.revoked:
                channel.stepped(loan, None)
                continue  # read as the run was cancelled: not processed, as it would not be
            loan.reader = None
            try:
                value = loan.ctx.run(loan.process, event)
            except BaseException as exc:  # the run's, as if raised in its task (a cancel too)
                channel.failed(loan, event, exc)
                continue
            if value is not None:
                channel.give_back(loan, value)
            if not buffer:
                return event  # of the model's answer: never None, an error or the end
            buffer.appendleft(event)  # before what its processing sent (a partial output)
        return self._next_item()

    def _next_item(self) -> RunEvent[OutputT]:
        """The first buffered item: an event, or the end (None) or the run's error, raised."""
        channel = self._channel
        item = channel.buffer.popleft()
        if channel.room is not None and len(channel.buffer) <= BUFFERED_MAX // 2:
            channel.let_in()
        if item is None:
            self._over = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._over = True
            self._error = item
            raise item
        if type(item) is RunCompleted:
            self._result = item.result
        return item

    async def _wait(self) -> None:
        """Start the run if need be, and wait for an item or a loan."""
        task = self._task
        if task is None:
            if self._closed:  # closed before it was read: its run never starts
                raise StopAsyncIteration
            task = self._task = self._begin()
        if self._channel.waiter is not None:
            raise _second_reader()
        self._reading = True
        try:
            await self._channel.wait()
        except BaseException:
            # A reader cancelled while it waited ends the run, rather than leave it unread.
            self._over = True
            await _stop(task)
            raise
        finally:
            self._reading = False

    def _begin(self) -> asyncio.Task[None] | Detached:
        """Start the run: an asyncio task, or (no asyncio loop) a trio task of its own."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from llm_worker.worker._stream_trio import begin

            # Checked before the run's coroutine is made: it would never be awaited. The new
            # channel keeps the buffer (`__anext__` holds it), and is never lent.
            self._channel, task = begin(self._start, self._channel)
            return task
        return asyncio.ensure_future(_drive(self._start, self._channel))

    async def _failed_step(self, loan: _Loan, exc: BaseException) -> None:
        """A step of the lent iterator raised: hand it to the run, or end the run and raise."""
        channel = self._channel
        if channel.stepped(loan, exc):
            return  # the cancellation the run sent: the run ends, and says so
        if isinstance(exc, StopAsyncIteration):
            channel.give_back(loan, None)
        elif isinstance(exc, Exception):
            channel.give_back(loan, exc)  # the run's error: raised there, as before
        else:  # the reader was cancelled: that ends the run, rather than leave it unread
            self._over = True
            if self._task is not None:
                await _stop(self._task)
            raise exc

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's result, once the stream has yielded its `RunCompleted`.

        Raises:
            ConfigurationError: The run has not finished (read the stream to its end first),
                was closed before it finished, or failed (its error was raised to the reader).
        """
        if self._result is not None:
            return self._result
        if self._error is not None:
            raise ConfigurationError(
                f"the run has no result: it failed with {type(self._error).__name__}: "
                f"{self._error} (raised where the stream was read)"
            )
        if self._closed:
            raise ConfigurationError("the run has no result: its stream was closed before its end")
        raise ConfigurationError(
            "the run has no result yet: read the stream to its end (its last event, "
            "RunCompleted, carries the result too)"
        )

    async def aclose(self) -> None:
        """Stop the run if it is still going: it is cancelled and cleaned up.

        A stream closed before it was read never starts its run; one closed from another
        task while it is read ends there for its reader (no more events, no result).
        """
        self._closed = True
        loan = self._channel.loan
        reading = self._reading or (loan is not None and loan.reader is not None)
        if self._task is not None:
            await _stop(self._task)
        if not reading:  # a reader elsewhere gets what is left, then the end
            self._over = True

    def __del__(self) -> None:
        # Dropped unread and unclosed: its run must not wait for a reader that is gone (its
        # Worker would stay busy); it reads on alone, as a run without a stream would.
        task = self._task
        if not self._over and task is not None and not task.done():
            if not isinstance(task, asyncio.Future):  # under trio
                task.call_soon(self._channel.orphan)
                return
            loop = task.get_loop()
            if not loop.is_closed():  # a collection may run in another thread
                loop.call_soon_threadsafe(self._channel.orphan)


async def _drive(
    start: Callable[[Callable[[Any], None]], Awaitable[Any]], channel: Channel
) -> None:
    # Not a method: the run's task must not keep its RunStream alive (see RunStream.__del__).
    put = channel.sink
    try:
        put(RunCompleted(await start(put)))
    except asyncio.CancelledError:
        raise  # the stream was closed: its reader ends, it was not cancelled itself
    except BaseException as exc:  # handed to the reader, who re-raises it
        put(exc)
    finally:
        put(None)


def _second_reader() -> ConfigurationError:
    return ConfigurationError(
        "this stream is already being read by another task: read a RunStream from one task "
        "at a time"
    )


def lender(events: object) -> tuple[RunStream[Any] | None, Channel, deque[Any]]:
    """`events` if it is a `RunStream`, the channel its run lends its reader through, its buffer.

    For a reader that takes `RunStream.__anext__`'s lent step in a loop of its own (the web
    encoders: one generator between the run and the browser, not a coroutine per event) and
    every other step through `__anext__`. Any other source: `None`, and a channel that is
    never lent.
    """
    if type(events) is RunStream:
        run = cast("RunStream[Any]", events)
        channel = run._channel  # pyright: ignore[reportPrivateUsage]
        return run, channel, channel.buffer
    channel = Channel()
    return None, channel, channel.buffer


def channel_of(sinks: list[Callable[[Any], None]]) -> Channel | None:
    """The `RunStream` channel among a run's sinks, if a stream reads the run."""
    for sink in sinks:
        owner = getattr(sink, "__self__", None)
        if isinstance(owner, Channel):  # a trio stream's too
            return owner
    return None


async def _stop(task: asyncio.Task[None] | Detached) -> None:
    """Cancel the run's task and wait for its clean-up (on_abort hooks included).

    Shielded: a reader cancelled from outside still waits, so that its Worker is free once it
    has left. The run's own cancellation is not the waiter's: it is not raised here.
    """
    if task.done():
        return
    if not isinstance(task, asyncio.Future):  # under trio
        await task.stop()
        return
    task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait({task})


class closing:
    """`contextlib.aclosing` for any async iterator: closes a generator on exit (cancel too)."""

    def __init__(self, it: AsyncIterator[Event]) -> None:
        self.it = it

    async def __aenter__(self) -> AsyncIterator[Event]:
        return self.it

    async def __aexit__(self, *exc: object) -> None:
        aclose = getattr(self.it, "aclose", None)
        if aclose is not None:
            await aclose()
