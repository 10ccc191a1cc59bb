"""Review probe (issue 39): `Worker.stream` under trio, where httpx is the default transport."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from llm_worker import Worker
from llm_worker.errors import ConfigurationError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.worker._channel import Channel
from llm_worker.worker._stream_trio import begin


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


def test_a_stream_started_outside_asyncio_and_trio_is_a_configuration_error() -> None:
    # `RunStream._begin` reaches `begin` only where no asyncio loop runs: anything but trio
    # (here nothing at all) is refused, typed, and the run's coroutine is never made.
    made: list[object] = []

    def start(sink: object) -> Any:
        made.append(sink)
        raise AssertionError("the run was started")

    with pytest.raises(ConfigurationError, match="asyncio or trio, and no async library"):
        begin(start, Channel())
    assert made == []
