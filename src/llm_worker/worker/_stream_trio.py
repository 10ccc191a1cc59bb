"""A `RunStream`'s run under trio: a task of its own, and no loan of the answer to the reader.

Under asyncio the run lends its reader the model's answer (`Channel.lend`): the reader's task
steps the answer's iterator, and the run revokes that with `Task.cancel` / `uncancel`. trio has
no task to cancel from outside, and a task may not step an iterator whose cancel scopes another
task entered. Here the run reads its answer in its own task and hands each event on through the
channel, as it does every other event: the same events in the same order, each processed in the
run's context. A reader that lags holds the answer back once it has `BUFFERED_MAX` events unread
(the bound the events of sub-agents already have): memory stays bounded, and the answer waits in
the connection beyond that.

The run is a trio system task, cancelled through a cancel scope of its own: a stream read
without `async with` has no nursery for it to live in, and one dropped unread must let its run
go on alone, as under asyncio. Chosen once a stream, when its run starts (`RunStream._begin`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import sniffio

from llm_worker.errors import ConfigurationError
from llm_worker.worker._channel import Channel, Reached, drive_run

__all__ = ("Detached", "TrioChannel", "begin")


class _Flag:
    """The future-like a `Channel` wakes its waiters through, over an anyio `Event`."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = anyio.Event()

    def done(self) -> bool:
        return self.event.is_set()

    def set_result(self, result: None, /) -> None:
        self.event.set()


class TrioChannel(Channel):
    """A `Channel` whose run reads its answer itself, waiting while its reader lags."""

    __slots__ = ()

    async def wait(self) -> None:
        """Wait for an item (there is never a loan)."""
        waiter = _Flag()
        self.waiter = waiter
        try:
            await waiter.event.wait()
        finally:
            self.waiter = None

    async def drained(self) -> None:
        """Wait until the reader has taken half of what it had unread (or is gone)."""
        room = self.room
        if not isinstance(room, _Flag):  # none yet: every waiter waits on the same one
            room = _Flag()
            self.room = room
        await room.event.wait()

    async def lend(
        self, it: AsyncIterator[Any], process: Callable[[Any], Any], ctx: contextvars.Context
    ) -> Any:
        """Step `it` and `process` each event in the run's task, handing it on after.

        Returns:
            The first non-None value of `process`, or None once `it` is exhausted (or the
            stream was dropped: the run then reads on alone).

        Raises:
            Exception: What `it` or `process` raised.
        """
        while not self.orphaned:
            try:
                event = await it.__anext__()
            except StopAsyncIteration:
                return None
            value = self._processed(event, process, ctx)
            if value is not None:
                return value
            while self.full():  # the reader lags: the rest of the answer waits in the connection
                await self.drained()
        return None

    def _processed(
        self, event: object, process: Callable[[Any], Any], ctx: contextvars.Context
    ) -> Any:
        """`process` the event, then hand it on before what its processing sent (partials)."""
        at = len(self.buffer)
        try:
            value = ctx.run(process, event)
        except Reached as exc:  # the sinks had the event, then something failed: after it
            error = exc.error
        else:
            self._hand_on(at, event)
            return value
        self._hand_on(at, event)
        raise error  # as under asyncio: the run's error, its own cause and context kept

    def _hand_on(self, at: int, event: object) -> None:
        if not self.orphaned:
            self.buffer.insert(at, event)
            self._wake()


class Detached:
    """A run's task under trio: a system task in a cancel scope of its own."""

    __slots__ = ("finished", "scope", "token")

    def __init__(self, main: Callable[[], Awaitable[None]]) -> None:
        import trio

        self.scope = anyio.CancelScope()
        self.finished = anyio.Event()
        self.token = trio.lowlevel.current_trio_token()
        # In a copy of the reader's context, as an asyncio task is (tracing's current span).
        trio.lowlevel.spawn_system_task(
            self._run, main, name="llm_worker.RunStream", context=contextvars.copy_context()
        )

    async def _run(self, main: Callable[[], Awaitable[None]]) -> None:
        try:
            with self.scope:
                await main()
        finally:
            self.finished.set()

    def done(self) -> bool:
        """Whether the run's task is over."""
        return self.finished.is_set()

    async def stop(self) -> None:
        """Cancel the run and wait for its clean-up (shielded, as `_stream._stop`)."""
        self.scope.cancel()
        with anyio.CancelScope(shield=True):
            await self.finished.wait()

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Call `callback` in the run's trio loop, from any thread (a garbage collection)."""
        import trio

        with contextlib.suppress(trio.RunFinishedError):  # its loop is over: so is the run
            self.token.run_sync_soon(callback)


def begin(
    start: Callable[[Callable[[Any], None]], Awaitable[Any]], channel: Channel
) -> tuple[TrioChannel, Detached]:
    """Start a stream's run under trio, on a channel that takes over `channel`'s buffer.

    Raises:
        ConfigurationError: The running library is neither asyncio nor trio.
    """
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = "no async library"
    if library != "trio":
        raise ConfigurationError(
            f"Worker.stream and resume_stream run on asyncio or trio, and {library} is "
            "running: read the stream inside one of those"
        )
    ours = TrioChannel()
    ours.buffer = channel.buffer  # the reader's loop (`RunStream.__anext__`) holds this deque
    return ours, Detached(lambda: drive_run(start, ours))
