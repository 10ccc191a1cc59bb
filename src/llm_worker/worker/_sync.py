"""Running a Worker from synchronous code: one event loop per call, nothing left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio

from llm_worker.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_worker.providers._base import LLMClient

__all__ = ("run_blocking",)

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
