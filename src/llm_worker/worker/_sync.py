"""Running a Worker from synchronous code: one event loop per call, nothing left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from llm_worker.errors import ConfigurationError
from llm_worker.state import OutputT

if TYPE_CHECKING:
    from llm_worker.limits import Limits
    from llm_worker.messages import Message
    from llm_worker.providers._base import LLMClient
    from llm_worker.sessions import Session
    from llm_worker.state import Decision, PauseState, RunResult
    from llm_worker.worker._config import WorkerConfig

__all__ = ("SyncRuns", "run_blocking")

T = TypeVar("T")


def run_blocking(name: str, work: Callable[[], Awaitable[T]], client: LLMClient) -> T:
    """Run `work()` in a new event loop; close the client's connections before it ends.

    Raises:
        ConfigurationError: An event loop already runs in this thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise ConfigurationError(
            f"{name}() cannot run inside a running event loop (an async function, a Jupyter "
            f"notebook): there, await the async form instead (`await worker.run(...)`)"
        )

    async def main() -> T:
        try:
            return await work()
        finally:
            await _release(client)

    return anyio.run(main)


async def _release(client: LLMClient) -> None:
    # A pooled connection belongs to the loop that opened it, and this loop is about to end:
    # left open, the socket leaks and the next call's loop would try to reuse it.
    from llm_worker.providers._base import HttpClient

    if isinstance(client, HttpClient):
        await client.aclose()  # the pool only: the client opens a new one when next used


class SyncRuns(Generic[OutputT]):
    """`Worker.run_sync` / `resume_sync`, kept beside the event loop they run in."""

    __slots__ = ()
    _cfg: WorkerConfig

    if TYPE_CHECKING:

        async def run(
            self,
            input: str | Message | Iterable[Message],
            *,
            limits: Limits | None = None,
            session: Session | None = None,
        ) -> RunResult[OutputT]: ...

        async def resume(
            self,
            state: PauseState | None = None,
            *,
            decisions: Mapping[str, Decision] | None = None,
            limits: Limits | None = None,
            session: Session | None = None,
        ) -> RunResult[OutputT]: ...

    def run_sync(
        self,
        input: str | Message | Iterable[Message],
        *,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """Run like `run()`, from synchronous code (a script, a REPL): returns when done.

        ```python
        result = Worker("anthropic:claude-sonnet-4-5", tools=[get_weather]).run_sync("Hi!")
        ```

        Each call runs in an event loop of its own (`anyio.run`), and the client's connections
        are closed before that loop ends: they belong to it, and the next call opens new ones.
        That holds for a pool the client made itself; an `httpx.AsyncClient` you passed to it
        is yours, left open, and its connections would outlive the loop — use such a client
        from async code instead.

        Raises:
            ConfigurationError: An event loop is running in this thread (inside an `async def`,
                or in a Jupyter notebook): use `await worker.run(...)` there. Or any error of
                `run()`.
        """
        work = lambda: self.run(input, limits=limits, session=session)  # noqa: E731
        return run_blocking("run_sync", work, self._cfg.client)

    def resume_sync(
        self,
        state: PauseState | None = None,
        *,
        decisions: Mapping[str, Decision] | None = None,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """Go on with a paused run like `resume()`, from synchronous code, as `run_sync` runs.

        Raises:
            ConfigurationError: An event loop is running in this thread: use
                `await worker.resume(...)` there. Or any error of `resume()`.
        """
        work = lambda: self.resume(  # noqa: E731
            state, decisions=decisions, limits=limits, session=session
        )
        return run_blocking("resume_sync", work, self._cfg.client)
