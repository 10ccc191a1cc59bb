"""`Worker.stream` reads the model's answer in the reader's task: pace, cancel, errors, order."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel, field_validator

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStop,
    RunCompleted,
    RunEvent,
    RunStatus,
    RunStream,
    TextDelta,
    TextPart,
    Worker,
)
from llm_worker.hooks import AbortContext
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


def stalling(text: str = "abcdef") -> ScriptedResponse:
    """One character per delta; after the first, the model goes silent (longer than a test)."""
    return ScriptedResponse([TextPart(text)], chunk_size=1, delay=60.0)


def texts(events: list[RunEvent]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


async def read_all(stream: RunStream[Any], into: list[RunEvent]) -> None:
    async with stream:
        async for event in stream:
            into.append(event)


async def test_a_slow_reader_holds_the_answer_back_instead_of_buffering_it() -> None:
    # The run used to read the whole answer ahead of its reader, into an unbounded queue.
    worker = Worker(ScriptedClient([ScriptedResponse([TextPart("x" * 400)], chunk_size=1)]))
    dispatched: list[object] = []
    worker.timeline.on_text_block(dispatched.append)
    read = 0
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            async for event in stream:
                read += isinstance(event, BlockDelta)
                if read == 5:
                    await anyio.wait_all_tasks_blocked()  # every chance to run ahead
                    break
    assert sum(isinstance(e, TextDelta) for e in dispatched) == 5


async def test_worker_cancel_while_the_reader_waits_mid_answer_ends_the_run_cancelled() -> None:
    worker = Worker(ScriptedClient([stalling(), ScriptedResponse.text("next")]))
    aborts: list[str] = []
    worker.add_on_abort_hook(lambda ctx: aborts.append(ctx.kind))
    seen: list[RunEvent] = []

    async def read() -> None:
        async with worker.stream("go") as stream:
            async for event in stream:
                seen.append(event)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            while not texts(seen):
                await anyio.wait_all_tasks_blocked()
            worker.cancel()  # the reader is inside the model's silence
        again = await worker.run("again")
    last = seen[-1]
    assert isinstance(last, RunCompleted)
    assert last.result.status is RunStatus.CANCELLED
    assert [e.index for e in seen if isinstance(e, BlockAbort)] == [0]
    assert aborts == ["cancelled"]
    assert again.text == "next"


async def test_a_stream_read_on_in_another_task_is_cancelled_there_only() -> None:
    worker = Worker(ScriptedClient([stalling(), ScriptedResponse.text("next")]))
    stream = worker.stream("go")
    first: list[RunEvent] = []
    rest: list[RunEvent] = []
    handed, done = anyio.Event(), anyio.Event()
    outcome: list[str] = []

    async def start_reading() -> None:
        async for event in stream:
            first.append(event)
            if texts(first):
                break
        handed.set()
        await done.wait()  # cancelled here if the run cancelled the wrong reader
        outcome.append("first reader untouched")

    async def read_on() -> None:
        await handed.wait()
        async for event in stream:
            rest.append(event)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            group.start_soon(start_reading)
            group.start_soon(read_on)
            await handed.wait()
            await anyio.wait_all_tasks_blocked()
            worker.cancel()
            while not rest or not isinstance(rest[-1], RunCompleted):
                await anyio.wait_all_tasks_blocked()
            done.set()
    assert outcome == ["first reader untouched"]
    last = rest[-1]
    assert isinstance(last, RunCompleted)
    assert last.result.status is RunStatus.CANCELLED


@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
async def test_a_reader_cancelled_mid_answer_ends_the_run_and_its_scope_exits_cleanly(
    library: str,
) -> None:
    # The wire server sends the stream's head, then one delta per 50 ms.
    script = [ScriptedResponse([TextPart("y" * 100)], chunk_size=1, delay=0.05)]
    script.append(ScriptedResponse.text("next"))
    aborts: list[str] = []

    async def on_abort(ctx: AbortContext) -> None:
        aborts.append(ctx.kind)

    seen: list[RunEvent] = []
    async with (
        ScriptedModelServer("anthropic", script) as server,
        server.client(transport=library) as client,
    ):
        worker = Worker(client)
        worker.add_on_abort_hook(on_abort)
        with anyio.fail_after(TIMEOUT):
            with anyio.CancelScope() as scope:
                async with worker.stream("go") as stream:
                    async for event in stream:
                        seen.append(event)
                        if texts(seen):
                            scope.cancel()  # lands in the next read, on the network
            assert scope.cancelled_caught
            again = await worker.run("again")
    assert texts(seen) == "y"
    assert aborts == ["cancelled"]
    assert [m.role for m in worker.history] == ["user", "user", "assistant"]
    assert again.text == "next"


async def test_a_handler_error_mid_answer_follows_the_events_before_it() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse([TextPart("abcdefgh")], chunk_size=1)]))

    def fragile(event: object) -> None:
        if isinstance(event, TextDelta) and event.text == "e":
            raise ValueError("handler bug")

    worker.timeline.on_text_block(fragile)
    seen: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(ValueError, match="handler bug"):
        await read_all(worker.stream("go"), seen)
    assert texts(seen) == "abcd"
    assert [e.index for e in seen if isinstance(e, BlockAbort)] == [0]


class Note(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def _no_secrets(cls, value: str) -> str:
        if "secret" in value:
            raise RuntimeError("validator bug")  # not a ValueError: pydantic lets it through
        return value


async def test_an_error_after_the_reader_had_the_event_comes_after_that_event() -> None:
    # The partial output check runs after the event went to the reader: the event that
    # made it fail is read first, then the error, as when the run's task sent it.
    answer = '{"text": "' + "x" * 300 + ' secret"}'
    worker = Worker(
        ScriptedClient([ScriptedResponse.text(answer, chunk_size=100)]), output_type=Note
    )
    seen: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(RuntimeError, match="validator bug"):
        await read_all(worker.stream("go"), seen)
    assert texts(seen) == answer
    assert [e.index for e in seen if isinstance(e, BlockStop)] == [0]  # the one that failed
