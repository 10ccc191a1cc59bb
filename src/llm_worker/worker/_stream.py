"""`RunStream`: one run's events as an async iterator, its result once it is over."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from llm_worker.errors import ConfigurationError
from llm_worker.state import RunCompleted, RunEvent, RunResult

__all__ = ("RunStream",)


class RunStream:
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
        self, sinks: list[Callable[[Any], None]], start: Callable[[], Awaitable[RunResult]]
    ) -> None:
        self._sinks = sinks
        self._start = start
        self._queue: asyncio.Queue[RunEvent | BaseException | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._events: AsyncGenerator[RunEvent, None] | None = None
        self._result: RunResult | None = None
        self._error: BaseException | None = None

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> RunEvent:
        if self._events is None:
            self._events = self._read()
        return await self._events.__anext__()

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def result(self) -> RunResult:
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
        raise ConfigurationError(
            "the run has no result yet: read the stream to its end (its last event, "
            "RunCompleted, carries the result too)"
        )

    async def aclose(self) -> None:
        """Stop the run if it is still going: it is cancelled and cleaned up."""
        if self._events is not None:
            await self._events.aclose()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _drive(self) -> None:
        put = self._queue.put_nowait
        try:
            put(RunCompleted(await self._start()))
        except BaseException as exc:  # handed to the reader, who re-raises it
            put(exc)
        finally:
            put(None)

    async def _read(self) -> AsyncGenerator[RunEvent, None]:
        put = self._queue.put_nowait
        self._sinks.append(put)
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
            # Unregistered at once: a reader that stopped early must not leave its queue
            # collecting every later run's events.
            self._sinks.remove(put)
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
