"""Review probe (issue 39): `Worker.stream` under trio, where httpx is the default transport."""

from __future__ import annotations

import pytest
import trio

from llm_worker import Worker
from llm_worker.errors import ConfigurationError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.testing import ScriptedClient, ScriptedResponse


def test_worker_run_works_under_trio() -> None:
    async def main() -> str:
        worker = Worker(ScriptedClient([ScriptedResponse.text("hello")]))
        with trio.fail_after(10):
            result = await worker.run("hi")
        return str(result.output)

    assert trio.run(main) == "hello"


@pytest.mark.xfail(
    strict=True,
    raises=ConfigurationError,
    reason="Worker.stream is asyncio-only: RunStream's channel and its loan of the answer's "
    "iterator to the reader are built on asyncio futures, tasks and Task.cancel/uncancel "
    "(worker/_stream.py); under trio the first read raises a ConfigurationError saying so "
    "(it was a bare RuntimeError('no running event loop'), and the run's coroutine was left "
    "never awaited: a RuntimeWarning that failed whichever test the collection came in). "
    "Worker.run and the clients work under trio.",
)
def test_worker_stream_works_under_trio() -> None:
    async def main() -> str:
        worker = Worker(ScriptedClient([ScriptedResponse.text("hello")]))
        text = ""
        with trio.fail_after(10):
            async with worker.stream("hi") as stream:
                async for event in stream:
                    if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                        text += event.delta.text
        return text

    assert trio.run(main) == "hello"
