"""The encoders run a `RunStream`'s lent step inline (`BlockEncoder.sse_stream`).

While the model's answer streams, the run lends its reader the event iterator; the encoders
take that step in their own frame, as `RunStream.__anext__` takes it, and every other step
through `__anext__`. Over a real wire on both transports and when the run or the reader
breaks off, what they write must be what they write reading the same run through
`__anext__` (a plain async generator over the stream takes that path), and the Worker must
come out free.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from llm_worker import ConfigurationError, RunStatus, TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.ui import to_agui_events, to_vercel_stream
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
            [TextPart("on it " * 20), ToolUsePart("c1", "send", {"to": "ana"})], chunk_size=3
        ),
        ScriptedResponse.text("done " * 30, chunk_size=4),
    ]


async def _plain(stream: RunStream[Any]) -> AsyncIterator[object]:
    async for event in stream:  # `__anext__`: the encoder reads this source with `anext`
        yield event


def _scrub(text: str) -> str:
    # Ids the run makes afresh (the encoder's token in its ids, signatures) are not the
    # reading's.
    text = re.sub(r"[0-9a-f]{16}", "-", text)
    return re.sub(r'"(signature|mac|encryptedValue)":"[^"]*"', r'"\1":"-"', text)


def _text(out: str) -> str:
    """The text the deltas carry, in order (either protocol)."""
    chunks = [json.loads(line[6:]) for line in out.split("\n\n") if line.startswith("data: {")]
    kinds = ("text-delta", "TEXT_MESSAGE_CONTENT")
    return "".join(c["delta"] for c in chunks if c["type"] in kinds)


def _encoder(protocol: str, source: AsyncIterator[object] | RunStream[Any]) -> AsyncIterator[str]:
    if protocol == "vercel":
        return to_vercel_stream(source, message_id="m1")
    return to_agui_events(source, thread_id="t", run_id="r")


@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_over_a_real_wire_the_lent_step_writes_what_anext_gives(
    protocol: str, http_transport: str
) -> None:
    out: dict[bool, str] = {}
    server = ScriptedModelServer("openai_chat", _script() + _script())
    async with server, server.client() as client:
        for plain in (False, True):
            worker = Worker(client, tools=[send])
            with anyio.fail_after(TIMEOUT):
                async with worker.stream("go") as stream:
                    source = _plain(stream) if plain else stream
                    out[plain] = "".join([line async for line in _encoder(protocol, source)])
            assert stream.result.status is RunStatus.FINISHED
    assert _scrub(out[False]) == _scrub(out[True])
    assert _text(out[False]) == "on it " * 20 + "done " * 30
    assert "sent to ana" in out[False]


async def test_a_second_reader_mid_answer_is_refused_and_the_encoder_reads_on() -> None:
    script = [ScriptedResponse([TextPart("y" * 50)], chunk_size=1, delay=0.01)]
    worker = Worker(ScriptedClient(script))
    errors: list[BaseException] = []
    first: list[str] = []
    rest: list[str] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            lines = to_vercel_stream(stream, message_id="m1")

            async def second() -> None:
                try:
                    async for _ in stream:
                        pass
                except ConfigurationError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                first.extend([await anext(lines) for _ in range(4)])
                tg.start_soon(second)  # runs once the encoder is in its next (lent) step
                rest.extend([line async for line in lines])
    assert errors
    assert "another task" in str(errors[0])
    text = "".join(first + rest)
    assert text.count('"delta":"y"') == 50
    assert text.endswith("data: [DONE]\n\n")
    assert stream.result.status is RunStatus.FINISHED


async def test_an_encoder_that_is_the_second_reader_ends_with_the_refusal() -> None:
    script = [ScriptedResponse([TextPart("y" * 50)], chunk_size=1, delay=0.01)]
    worker = Worker(ScriptedClient(script))
    got: list[object] = []
    lines: list[str] = []
    mid_answer = anyio.Event()
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:

            async def first() -> None:
                async for event in stream:
                    got.append(event)
                    if len(got) == 3:
                        mid_answer.set()  # its next read waits in a lent step

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await mid_answer.wait()
                lines.extend([line async for line in to_vercel_stream(stream, message_id="m1")])
    text = "".join(lines)
    assert '"type":"error"' in text
    assert text.endswith('{"type":"finish","finishReason":"error"}\n\ndata: [DONE]\n\n')
    assert stream.result.status is RunStatus.FINISHED  # the first reader read it to its end
    assert sum(1 for e in got if type(e).__name__ == "BlockDelta") == 50


@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_an_encoder_cancelled_in_a_lent_step_over_a_wire_ends_the_run(
    protocol: str, http_transport: str
) -> None:
    script = [
        ScriptedResponse.text("z" * 400, chunk_size=1, delay=0.002),
        ScriptedResponse.text("again"),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as client:
        worker = Worker(client)
        stream = worker.stream("go")
        lines = _encoder(protocol, stream)
        read = 0
        with anyio.fail_after(TIMEOUT):
            with anyio.move_on_after(0.2):
                async for _ in lines:
                    read += 1
            await lines.aclose()  # pyright: ignore[reportAttributeAccessIssue]
            assert 0 < read < 400
            assert [e async for e in stream] == []  # the cancel ended the run
            again = await worker.run("again")
        assert again.status is RunStatus.FINISHED


async def _closed_mid_answer(plain: bool) -> list[str]:
    """What the encoder writes of a run whose stream another task closes mid-answer."""
    script = [
        ScriptedResponse([TextPart("y" * 400)], chunk_size=1, delay=0.002),
        ScriptedResponse.text("next"),
    ]
    worker = Worker(ScriptedClient(script))
    seen: list[str] = []
    five = anyio.Event()
    with anyio.fail_after(TIMEOUT):
        stream = worker.stream("go")
        lines = _encoder("vercel", _plain(stream) if plain else stream)

        async def encode() -> None:
            async for line in lines:
                seen.append(line)
                if sum(line.count('"delta":"y"') for line in seen) == 5:
                    five.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(encode)
            await five.wait()
            await stream.aclose()  # the encoder is in a lent step (the next delta's wait)
        again = await worker.run("again")
    assert again.text == "next"  # the Worker is free
    return seen


@pytest.mark.parametrize("plain", [False, True])
async def test_a_stream_closed_from_another_task_mid_answer_ends_the_encoder(plain: bool) -> None:
    # The run is cancelled under the encoder's lent step (the loan revoked): the encoder
    # stops as a reader through `__anext__` stops.
    seen = await _closed_mid_answer(plain)
    assert 5 <= sum(line.count('"delta":"y"') for line in seen) < 400
    assert seen[-1] == "data: [DONE]\n\n"
    assert not any('"type":"error"' in line for line in seen)
