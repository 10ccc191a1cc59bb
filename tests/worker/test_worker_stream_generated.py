"""`generated`: a `RunStream` read through one async generator (the web encoders' reading).

It runs `RunStream.__anext__`'s steps in a generator of its own: the events, the end, the
run's error, closing early, a cancelled reader and a second reader must be what a loop of
`__anext__` calls gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from llm_worker import (
    ConfigurationError,
    HookError,
    RunCompleted,
    RunStatus,
    TextPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.worker._stream import RunStream, generated

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


@tool
async def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def _script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [TextPart("on it " * 20), ToolUsePart("c1", "send", {"to": "ana"})], chunk_size=3
        ),
        ScriptedResponse.text("done " * 30, chunk_size=4),
    ]


def _read(stream: RunStream, how: str) -> AsyncIterator[Any]:
    if how == "generated":
        inner = generated(stream)
        assert inner is not None
        return inner
    return stream


def test_only_a_run_stream_is_generated() -> None:
    async def events() -> AsyncIterator[object]:
        yield 1

    assert generated(events()) is None
    assert generated([]) is None  # pyright: ignore[reportArgumentType]


async def test_the_generator_gives_what_anext_gives(http_transport: str) -> None:
    # Over a real wire (the run lends the reader its iterator) and from ScriptedClient.
    seen: dict[str, list[Any]] = {}
    server = ScriptedModelServer("openai_chat", _script() + _script())
    async with server, server.client() as client:
        for how in ("anext", "generated"):
            worker = Worker(client, tools=[send])
            with anyio.fail_after(TIMEOUT):
                async with worker.stream("go") as stream:
                    seen[how] = [e async for e in _read(stream, how)]
            assert stream.result.status is RunStatus.FINISHED
    plain, gen = seen["anext"], seen["generated"]
    assert [type(e) for e in gen] == [type(e) for e in plain]
    assert [e for e in gen if not isinstance(e, RunCompleted)] == [
        e for e in plain if not isinstance(e, RunCompleted)
    ]
    assert gen[-1].result.text == plain[-1].result.text == "done " * 30


@pytest.mark.parametrize("how", ["anext", "generated"])
async def test_a_paused_run_ends_its_generator_with_its_result(how: str) -> None:
    async def ask(ctx: ToolCallContext) -> Pause | None:
        return Pause("ask a person")

    worker = Worker(ScriptedClient(_script()), tools=[send])
    worker.add_before_tool_call_hook(ask)
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            events = [e async for e in _read(stream, how)]
            assert [e async for e in _read(stream, how)] == []  # over: nothing more
    assert isinstance(events[-1], RunCompleted)
    assert stream.result.status is RunStatus.PAUSED


@pytest.mark.parametrize("how", ["anext", "generated"])
async def test_the_runs_error_is_raised_from_the_generator(how: str) -> None:
    async def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook bug")

    worker = Worker(ScriptedClient(_script()), tools=[send])
    worker.add_before_tool_call_hook(broken)
    stream = worker.stream("go")
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="hook bug"):
        async for _ in _read(stream, how):
            pass
    assert [e async for e in _read(stream, how)] == []
    with pytest.raises(ConfigurationError, match="failed with HookError"):
        _ = stream.result


@pytest.mark.parametrize("how", ["anext", "generated"])
async def test_a_generator_left_early_then_closed_frees_the_worker(how: str) -> None:
    script = [
        ScriptedResponse([TextPart("y" * 200)], chunk_size=1, delay=0.01),
        ScriptedResponse.text("next"),
    ]
    worker = Worker(ScriptedClient(script))
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            events = _read(stream, how)
            async for _ in events:
                break
            if how == "generated":
                await events.aclose()  # pyright: ignore[reportAttributeAccessIssue]
        with pytest.raises(ConfigurationError, match="no result"):
            _ = stream.result
        again = await worker.run("again")
    assert again.text == "next"


@pytest.mark.parametrize("how", ["anext", "generated"])
async def test_a_reader_cancelled_mid_answer_ends_the_run(how: str, http_transport: str) -> None:
    script = [
        ScriptedResponse.text("z" * 400, chunk_size=1, delay=0.002),
        ScriptedResponse.text("again"),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as client:
        worker = Worker(client)
        stream = worker.stream("go")
        read = 0
        with anyio.fail_after(TIMEOUT):
            with anyio.move_on_after(0.2):
                async for _ in _read(stream, how):
                    read += 1
            assert 0 < read < 400
            assert [e async for e in _read(stream, how)] == []  # the cancel ended it
            again = await worker.run("again")
        assert again.status is RunStatus.FINISHED  # the Worker is free again


async def test_a_second_reader_is_refused_as_by_anext() -> None:
    script = [ScriptedResponse([TextPart("y" * 50)], chunk_size=1, delay=0.01)]
    worker = Worker(ScriptedClient(script))
    errors: list[BaseException] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            inner = generated(stream)
            assert inner is not None

            async def second() -> None:
                try:
                    async for _ in stream:
                        pass
                except ConfigurationError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                await inner.__anext__()  # the first reader is mid-answer
                tg.start_soon(second)
                async for _ in inner:
                    pass
            await inner.aclose()
    assert errors
    assert "another task" in str(errors[0])
