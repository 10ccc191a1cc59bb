"""`RunStream`: one run's events as an async iterator, its result once it is over.

The run goes on in a task of its own (its hooks, tools and cancel scopes live there), and its
events reach the reader through a `Channel` (`_channel`). While the model's answer streams,
the run lends the reader its event iterator: the reader's task then reads the network and
processes each event itself, in `RunStream.__anext__`.

Under trio (no asyncio loop at the first read) the run is a task of `_stream_trio`'s and
reads its answer itself: nothing is lent (see that module). The choice is made once, when the
run starts; the asyncio path below carries no check of it.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Self, cast

import anyio

from llm_worker.errors import ConfigurationError
from llm_worker.events import Event
from llm_worker.state import OutputT, RunCompleted, RunEvent, RunResult
from llm_worker.worker._channel import (
    BUFFERED_MAX,
    Channel,
    Loan,
    Reached,
    channel_of,
    drive_run,
)
from llm_worker.worker._stream_trio import Detached, begin

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

if sys.version_info < (3, 12):
    # `asyncio.current_task()` is pure Python on 3.11 (a third of a microsecond, once per
    # event here); the lookup it makes, without the calls. C code from 3.12 on.
    _current_task: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = vars(
        asyncio.tasks
    )["_current_tasks"].get
else:
    _current_task = asyncio.current_task
current_task = _current_task  # for the readers that take a lent step inline (see `lender`)


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
            # Checked before the run's coroutine is made: it would never be awaited. The new
            # channel keeps the buffer (`__anext__` holds it), and is never lent.
            self._channel, task = begin(self._start, self._channel)
            return task
        return asyncio.ensure_future(drive_run(self._start, self._channel))

    async def _failed_step(self, loan: Loan, exc: BaseException) -> None:
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
