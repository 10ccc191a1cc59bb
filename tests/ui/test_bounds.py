"""The adapters' request bounds: message and part counts, the body deadline, and a long
history converted off the event loop while other streams go on."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import orjson
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter
from llm_worker.ui import _agui_app as agui_app  # pyright: ignore[reportPrivateUsage]
from llm_worker.ui import _vercel_app as vercel_app  # pyright: ignore[reportPrivateUsage]

from .conftest import serve

pytestmark = pytest.mark.anyio


def vercel_user(n: int, parts: int = 1) -> dict[str, Any]:
    text = [{"type": "text", "text": f"message {n}"}] * parts
    return {"id": f"u{n}", "role": "user", "parts": text}


def vercel_body(messages: int, parts: int = 1, chat: str = "") -> dict[str, Any]:
    ui = [vercel_user(n, parts) for n in range(messages)]
    return {"id": chat, "messages": ui, "trigger": "submit-message"}


def agui_body(messages: int, parts: int = 1) -> dict[str, Any]:
    content = [{"type": "text", "text": "hello"}] * parts
    raw = [{"id": f"u{n}", "role": "user", "content": content} for n in range(messages)]
    return {"threadId": "t1", "runId": "r1", "messages": raw, "tools": [], "context": []}


class Converter:
    """Wraps a history converter: counts its calls; a long history waits for `release`
    (from the thread it runs in) and records whether the release came."""

    def __init__(self, real: Callable[[Any], Any]) -> None:
        self.real = real
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.released: list[bool] = []

    def __call__(self, raw: Any) -> Any:
        self.calls += 1
        if len(raw) > 1:
            self.started.set()
            # Were the conversion on the event loop, nothing could set `release` (the loop is
            # blocked here): the wait would time out and record False.
            self.released.append(self.release.wait(20))
        return self.real(raw)


@pytest.fixture
def vercel_converter(monkeypatch: pytest.MonkeyPatch) -> Converter:
    converter = Converter(vercel_app.read_ui)
    monkeypatch.setattr(vercel_app, "read_ui", converter)
    return converter


@pytest.fixture
def agui_converter(monkeypatch: pytest.MonkeyPatch) -> Converter:
    converter = Converter(agui_app.read_agui)
    monkeypatch.setattr(agui_app, "read_agui", converter)
    return converter


class Gated:
    """A Worker factory whose tool `gate` waits until the test opens it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.opened = anyio.Event()
        opened = self.opened

        @tool(effect="read_only")
        async def gate() -> str:
            """Wait for the gate."""
            await opened.wait()
            return "the gate opened"

        self.tool = gate

    def __call__(self) -> Worker:
        return Worker(self.client, tools=[self.tool])


def gated_script() -> list[ScriptedResponse]:
    first = ScriptedResponse([TextPart("Waiting."), ToolUsePart("", "gate", {})])
    return [first] + [ScriptedResponse.text("Done.") for _ in range(3)]


async def until(lines: AsyncIterator[str], chunk_type: str) -> None:
    """Read the SSE lines up to the chunk of `chunk_type`."""
    async for line in lines:
        if f'"type":"{chunk_type}"' in line:
            return
    raise AssertionError(f"the stream ended before a {chunk_type} chunk")


@pytest.mark.parametrize(
    ("body", "cap"),
    [
        (vercel_body(11), "11 messages, over the limit of 10 (max_messages)"),
        (vercel_body(2, parts=30), "60 message parts, over the limit of 50 (max_parts)"),
    ],
)
async def test_vercel_refuses_a_body_over_its_counts_with_413_before_converting(
    vercel_converter: Converter, body: dict[str, Any], cap: str
) -> None:
    adapter = VercelAIAdapter(lambda: None, max_messages=10, max_parts=50)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(10):
            response = await http.post(url, json=body)
    assert response.status_code == 413
    assert cap in response.json()["error"]
    assert vercel_converter.calls == 0


@pytest.mark.parametrize(
    ("body", "cap"),
    [
        (agui_body(11), "11 messages, over the limit of 10 (max_messages)"),
        (agui_body(2, parts=30), "60 message parts, over the limit of 50 (max_parts)"),
    ],
)
async def test_agui_refuses_a_body_over_its_counts_with_413_before_converting(
    agui_converter: Converter, body: dict[str, Any], cap: str
) -> None:
    adapter = AGUIAdapter(lambda: None, max_messages=10, max_parts=50)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(10):
            response = await http.post(url, json=body)
    assert response.status_code == 413
    assert cap in response.json()["error"]
    assert agui_converter.calls == 0


@pytest.mark.parametrize(
    ("parts", "cap"),
    [
        (900_000, "1,800,013 JSON items, over the limit of 400,000 (20 a part of max_parts)"),
        (25_000, "25,000 message parts, over the limit of 20,000 (max_parts)"),
    ],
)
async def test_the_default_caps_refuse_the_900_000_part_request(parts: int, cap: str) -> None:
    # 900,000 parts under the byte cap took 8.9 s of event-loop CPU; its objects are now
    # counted before one is decoded, and the parts before one is converted.
    message = {"id": "u1", "role": "user", "parts": [{}] * parts}
    body = orjson.dumps({"id": "c", "messages": [message], "trigger": "submit-message"})
    assert len(body) < 32 << 20  # under the byte cap
    adapter = VercelAIAdapter(lambda: None)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=30) as http:
        with anyio.fail_after(30):
            response = await http.post(url, content=body)
    assert response.status_code == 413
    assert cap in response.json()["error"]


async def test_a_capped_body_is_refused_while_another_stream_goes_on(
    vercel_converter: Converter,
) -> None:
    async with ScriptedModelServer("anthropic", gated_script()) as server, server.client() as c:
        factory = Gated(c)
        adapter = VercelAIAdapter(factory, max_parts=2_000)
        async with serve(adapter) as url, httpx.AsyncClient(timeout=20) as http:
            with anyio.fail_after(30):
                async with http.stream("POST", url, json=vercel_body(1, chat="a")) as first:
                    lines = first.aiter_lines()
                    await until(lines, "tool-input-available")  # its tool waits at the gate
                    # 30,000 parts: refused by its count of JSON items, never decoded.
                    capped = await http.post(url, json=vercel_body(1_000, 30, chat="b"))
                    factory.opened.set()
                    await until(lines, "tool-output-available")
                    await until(lines, "finish")
    assert capped.status_code == 413
    assert "max_parts)" in capped.json()["error"]
    assert vercel_converter.calls == 1  # the first stream's; the capped body never converted


async def test_a_long_history_converts_off_the_loop_while_another_stream_goes_on(
    vercel_converter: Converter,
) -> None:
    async with ScriptedModelServer("anthropic", gated_script()) as server, server.client() as c:
        factory = Gated(c)
        adapter = VercelAIAdapter(factory)
        async with serve(adapter) as url, httpx.AsyncClient(timeout=30) as http:
            answers: list[httpx.Response] = []

            async def post_long() -> None:
                # 1,200 messages: over the parts converted on the loop, under every cap.
                answers.append(await http.post(url, json=vercel_body(1_200, chat="b")))

            with anyio.fail_after(40):
                async with http.stream("POST", url, json=vercel_body(1, chat="a")) as first:
                    lines = first.aiter_lines()
                    await until(lines, "tool-input-available")
                    async with anyio.create_task_group() as group:
                        group.start_soon(post_long)
                        await anyio.to_thread.run_sync(vercel_converter.started.wait, 20)
                        # The long history is converting: the first stream must still flow.
                        factory.opened.set()
                        await until(lines, "tool-output-available")
                        vercel_converter.release.set()
                    await until(lines, "finish")
    assert vercel_converter.released == [True]
    assert answers[0].status_code == 200
    assert '"type":"finish"' in answers[0].text


async def test_agui_converts_a_long_history_off_the_loop(agui_converter: Converter) -> None:
    adapter = AGUIAdapter(lambda: None)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=30) as http:
        answers: list[httpx.Response] = []
        other: httpx.Response | None = None

        async def post_long() -> None:
            answers.append(await http.post(url, json=agui_body(1_200)))

        with anyio.fail_after(40):
            async with anyio.create_task_group() as group:
                group.start_soon(post_long)
                await anyio.to_thread.run_sync(agui_converter.started.wait, 20)
                # The loop answers another request while the history converts.
                other = await http.post(url, json={"threadId": "t2"})
                agui_converter.release.set()
    assert other is not None
    assert other.status_code == 400
    assert agui_converter.released == [True]
    assert answers[0].status_code == 500  # the factory returned no Worker: after converting


async def slow_client(port: int, trickle: bool, path: str = "/") -> bytes:
    """A client that POSTs headers and the body's first byte, then (with `trickle`) one more
    byte every 0.2 s; returns all the server answers until it closes the connection."""
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n".encode()
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(head + b"content-length: 1000\r\n\r\n[")
        received = b""
        async with anyio.create_task_group() as group:
            if trickle:

                async def drip() -> None:
                    while True:
                        await anyio.sleep(0.2)  # the attack's pace, not a synchronisation
                        await stream.send(b" ")

                group.start_soon(drip)
            try:
                while True:
                    received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
            group.cancel_scope.cancel()
    return received


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled", "one-byte-at-a-time"])
async def test_a_body_not_in_by_its_deadline_gets_408_and_the_connection_closes(
    trickle: bool,
) -> None:
    adapter = VercelAIAdapter(lambda: None, body_timeout=1.0)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url:
        port = int(url.rpartition(":")[2])
        with anyio.fail_after(15):
            answer = await slow_client(port, trickle)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"the request body did not arrive within 1 s" in answer
