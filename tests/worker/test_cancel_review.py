"""Review probe: worker.cancel() while a run is starting (before its cancel scope opens)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from llm_worker import RunResult, RunStatus, Worker
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.worker._intercept import Interceptor, RunStep

pytestmark = pytest.mark.anyio


class Slow(Interceptor):
    """A run interceptor that does some I/O of its own before the run proceeds."""

    def __init__(self) -> None:
        self.entered, self.gate = anyio.Event(), anyio.Event()

    async def run(
        self, step: RunStep, proceed: Callable[[], Awaitable[RunResult[Any]]]
    ) -> RunResult[Any]:
        self.entered.set()
        await self.gate.wait()
        return await proceed()


async def test_a_cancel_while_a_run_interceptor_works_cancels_the_run() -> None:
    slow = Slow()
    async with ScriptedModelServer("anthropic", [ScriptedResponse.text("done")]) as server:
        client = server.client()
        worker = Worker(client)
        worker._cfg.interceptors.append(slow)  # pyright: ignore[reportPrivateUsage]
        result: list[RunResult[Any]] = []
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:

                async def run() -> None:
                    result.append(await worker.run("Go"))

                group.start_soon(run)
                await slow.entered.wait()
                worker.cancel()
                slow.gate.set()
            after = await worker.run("Again")  # the cancel does not linger to the next run
        await client.aclose()
    assert result[0].status is RunStatus.CANCELLED
    assert after.status is RunStatus.FINISHED and after.text == "done"
    assert len(server.requests) == 1
