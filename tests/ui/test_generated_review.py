"""Review of `generated` (R42): the web encoders read a `RunStream` through one async generator.

Whatever the run does — a failing neighbour hook, a hook that pauses, a sub-agent's events, a
reader that stops early — the encoder's output must be the one it gives reading the same run
through `__anext__` (a plain async generator wrapping the stream takes that path).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from llm_worker import RunStatus, TextPart, ToolUsePart, Worker, tool
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import to_vercel_stream
from llm_worker.worker._stream import RunStream

pytestmark = pytest.mark.anyio

TIMEOUT = 10.0


@tool
async def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def _script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [TextPart("on it " * 10), ToolUsePart("c1", "send", {"to": "ana"})], chunk_size=3
        ),
        ScriptedResponse.text("done " * 10, chunk_size=4),
    ]


async def _plain(stream: RunStream[Any]) -> AsyncIterator[object]:
    async for event in stream:  # `__anext__`: `generated` gives None for this source
        yield event


def _scrub(text: str) -> str:
    # Ids the run makes afresh (tool result signatures, message ids) are not the reading's.
    return re.sub(r'"(toolCallId|messageId|id|signature|mac)":"[^"]*"', r'"\1":"-"', text)


async def _encode(make: Callable[[], Worker], plain: bool) -> tuple[str, Worker]:
    worker = make()
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            source = _plain(stream) if plain else stream
            out = "".join([line async for line in to_vercel_stream(source, message_id="m1")])
    return _scrub(out), worker


async def _same(make: Callable[[], Worker]) -> str:
    gen, _ = await _encode(make, plain=False)
    plain, _ = await _encode(make, plain=True)
    assert gen == plain
    return gen


async def test_a_failing_neighbour_handler_encodes_as_through_anext() -> None:
    def make() -> Worker:
        worker = Worker(ScriptedClient(_script()), tools=[send])
        seen: list[object] = []

        def broken(event: object) -> None:
            seen.append(event)
            if len(seen) == 2:
                raise RuntimeError("handler bug")

        worker.on_text_complete(broken)
        return worker

    await _same(make)


async def test_a_hook_raising_mid_run_encodes_as_through_anext() -> None:
    def make() -> Worker:
        worker = Worker(ScriptedClient(_script()), tools=[send])

        async def broken(ctx: ToolCallContext) -> None:
            raise RuntimeError("hook bug")

        worker.add_before_tool_call_hook(broken)
        return worker

    out = await _same(make)
    assert '"type":"error"' in out


async def test_a_paused_run_encodes_as_through_anext() -> None:
    def make() -> Worker:
        worker = Worker(ScriptedClient(_script()), tools=[send])

        async def ask(ctx: ToolCallContext) -> Pause:
            return Pause("ask a person")

        worker.add_before_tool_call_hook(ask)
        return worker

    await _same(make)


async def test_a_sub_agents_events_encode_as_through_anext() -> None:
    def make() -> Worker:
        child = Worker(ScriptedClient([ScriptedResponse.text("inner " * 30, chunk_size=2)]))
        research = child.as_tool(name="research", description="Looks things up.")
        script = [
            ScriptedResponse([TextPart("asking"), ToolUsePart("r1", "research", {"input": "x"})]),
            ScriptedResponse.text("summed up", chunk_size=2),
        ]
        return Worker(ScriptedClient(script), tools=[research])

    await _same(make)


async def test_an_encoder_left_early_closes_its_generator_and_frees_the_worker() -> None:
    script = [
        ScriptedResponse([TextPart("y" * 200)], chunk_size=1, delay=0.005),
        ScriptedResponse.text("next"),
    ]
    worker = Worker(ScriptedClient(script))
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            lines = to_vercel_stream(stream, message_id="m1")
            n = 0
            async for _ in lines:
                n += 1
                if n == 5:
                    break
            await lines.aclose()  # pyright: ignore[reportAttributeAccessIssue]
        again = await worker.run("again")
    assert again.status is RunStatus.FINISHED
    assert again.text == "next"


async def test_an_encoder_cancelled_mid_answer_ends_the_run() -> None:
    script = [
        ScriptedResponse([TextPart("y" * 400)], chunk_size=1, delay=0.002),
        ScriptedResponse.text("next"),
    ]
    worker = Worker(ScriptedClient(script))
    read = 0
    with anyio.fail_after(TIMEOUT):
        stream = worker.stream("go")
        lines = to_vercel_stream(stream, message_id="m1")
        with anyio.move_on_after(0.2):
            async for _ in lines:
                read += 1
        await lines.aclose()  # pyright: ignore[reportAttributeAccessIssue]
        assert [e async for e in stream] == []
        again = await worker.run("again")
    assert 0 < read < 400
    assert again.text == "next"
