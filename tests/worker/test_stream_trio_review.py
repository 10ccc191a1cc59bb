"""Review probe (issue 39): `Worker.stream` under trio, where httpx is the default transport."""

from __future__ import annotations

import trio

from llm_worker import Worker
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.testing import ScriptedClient, ScriptedResponse


def test_worker_run_works_under_trio() -> None:
    async def main() -> str:
        worker = Worker(ScriptedClient([ScriptedResponse.text("hello")]))
        with trio.fail_after(10):
            result = await worker.run("hi")
        return str(result.output)

    assert trio.run(main) == "hello"


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
