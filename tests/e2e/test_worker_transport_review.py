"""A Worker over each wire format and both transports, cancelled while the model streams.

worker.cancel() and task cancellation mid-stream leave no task behind and give the connection
back: with a pool of one, the next run on the same client gets its answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from llm_worker import RunCompleted, Worker
from llm_worker.events import BlockDelta
from llm_worker.state import RunStatus
from llm_worker.testing import Chunking, ScriptedModelServer, ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

LONG = " ".join(f"word{i}" for i in range(100))


def client_tasks() -> int:
    """The tasks running, the scripted server's own (one per connection) left out."""
    return sum("WireServer" not in repr(task.get_coro()) for task in asyncio.all_tasks())


def slow_server(provider: str) -> ScriptedModelServer[Any]:
    script = [
        ScriptedResponse.text(LONG),
        ScriptedResponse.text("done"),
        ScriptedResponse.text("ok"),
    ]
    return ScriptedModelServer(
        provider, script, chunking=Chunking.random(seed=5, max_size=64), chunk_delay=0.005
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_worker_cancel_mid_stream_then_the_client_answers_again(provider: str) -> None:
    async with slow_server(provider) as server:
        client = server.client(max_concurrency=1)
        try:
            worker = Worker(client)
            tasks_before = client_tasks()
            seen: list[object] = []
            with anyio.fail_after(TIMEOUT):
                async with worker.stream("go") as stream:
                    async for event in stream:
                        seen.append(event)
                        if isinstance(event, BlockDelta):
                            worker.cancel()
            last = seen[-1]
            assert isinstance(last, RunCompleted)
            assert last.result.status is RunStatus.CANCELLED
            assert client_tasks() == tasks_before
            with anyio.fail_after(TIMEOUT):
                again = await Worker(client).run("again")
            assert again.status is RunStatus.FINISHED
            assert again.text == "done"
        finally:
            await client.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_task_cancelled_mid_stream_gives_its_connection_back(provider: str) -> None:
    async with slow_server(provider) as server:
        client = server.client(max_concurrency=1)
        try:
            started = anyio.Event()

            async def run() -> None:
                async with Worker(client).stream("go") as stream:
                    async for event in stream:
                        if isinstance(event, BlockDelta):
                            started.set()

            with anyio.fail_after(TIMEOUT):
                async with anyio.create_task_group() as group:
                    group.start_soon(run)
                    await started.wait()
                    group.cancel_scope.cancel()
                again = await Worker(client).run("again")
            assert again.status is RunStatus.FINISHED
            assert again.text == "done"
        finally:
            await client.aclose()
