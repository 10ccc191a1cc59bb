"""`RunStream`: one run's events as an async iterator, its result once it is over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, Self

import anyio

from llm_worker.errors import ConfigurationError
from llm_worker.state import OutputT, RunCompleted, RunEvent, RunResult

__all__ = ("RunStream",)


class RunStream(Generic[OutputT]):
    """One run's events as they happen; what `Worker.stream` and `Worker.resume_stream` return.

    The run starts when you begin reading. Read it with `async for event in stream`: the
    provider's events (`TextDelta`, `BlockStart`, …) arrive beside the Worker's own
    (`TurnStarted`, `TextComplete`, `ToolCallComplete`, `ToolResultReady`, `TurnEnded`), and
    the last event is a `RunCompleted` whose `result` is the run's `RunResult` — also kept in
    `stream.result` once the stream is over. An exception of the run (`HookError`,
    `ProviderError`, …) is raised where the stream is read.

    `async with worker.stream(...) as stream:` closes the run when the block ends: a reader
    that stops early cancels it (its clean-up runs as for any cancellation). Without
    `async with`, call `await stream.aclose()` when you stop before the end.
    """

    def __init__(
        self, start: Callable[[Callable[[Any], None]], Awaitable[RunResult[OutputT]]]
    ) -> None:
        # `start(sink)` runs the run with `sink` receiving its events, and only its own: the
        # Worker registers the sink once the run holds it, so a stream refused because
        # another run is going never shows that run's events.
        self._start = start
        self._queue: asyncio.Queue[RunEvent | BaseException | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._events: AsyncGenerator[RunEvent, None] | None = None
        self._result: RunResult[OutputT] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._reading = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> RunEvent:
        if self._events is None:
            if self._closed:  # closed before it was read: its run never starts
                raise StopAsyncIteration
            self._events = self._read()
        self._reading = True
        try:
            return await self._events.__anext__()
        finally:
            self._reading = False

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
        if self._task is not None:
            await _stop(self._task)
        if self._events is not None and not self._reading:  # a reader elsewhere just ends
            await self._events.aclose()

    async def _drive(self) -> None:
        put = self._queue.put_nowait
        try:
            put(RunCompleted(await self._start(put)))
        except asyncio.CancelledError:
            raise  # the stream was closed: its reader ends, it was not cancelled itself
        except BaseException as exc:  # handed to the reader, who re-raises it
            put(exc)
        finally:
            put(None)

    async def _read(self) -> AsyncGenerator[RunEvent, None]:
        self._task = asyncio.ensure_future(self._drive())
        try:
            while (item := await self._queue.get()) is not None:
                if isinstance(item, BaseException):
                    self._error = item
                    raise item
                if isinstance(item, RunCompleted):
                    self._result = item.result
                yield item
        finally:
            # A reader that stops early ends the run, rather than leave it running unread.
            await _stop(self._task)


async def _stop(task: asyncio.Task[None]) -> None:
    """Cancel the run's task and wait for its clean-up (on_abort hooks included).

    Shielded: a reader cancelled from outside still waits, so that its Worker is free once it
    has left. The run's own cancellation is not the waiter's: it is not raised here.
    """
    if task.done():
        return
    task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait({task})
