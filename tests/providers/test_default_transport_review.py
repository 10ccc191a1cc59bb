"""Review probes of the default transport (issue 39): the pool behind `max_concurrency=None`,
the environment's transport name, and a client shared by event loops in several threads."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import anyio.lowlevel
import orjson
import pytest

from llm_worker.errors import ConfigurationError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import OpenAIChatClient, RetryPolicy, _http
from llm_worker.providers._http_backend import TRANSPORT_ENV
from llm_worker.testing import RecordedRequest, WireResponse, WireServer

pytestmark = pytest.mark.anyio

API_KEY = "sk-review-default-0123456789"


def _sse() -> bytes:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "ok"}}],
    }
    done = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    return (
        b"data: "
        + orjson.dumps(chunk)
        + b"\n\ndata: "
        + orjson.dumps(done)
        + b"\n\ndata: [DONE]\n\n"
    )


class _Rendezvous:
    """An HTTP server that answers no request until `count` requests are in at once.

    A client whose pool holds fewer connections than `count` never gets there: its streams wait.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.arrived = 0
        self.all_in = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            self.arrived += 1
            if self.arrived >= self.count:
                self.all_in.set()
            await self.all_in.wait()
            body = _sse()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + b"content-length: %d\r\n\r\n" % len(body)
                + body
            )
            await writer.drain()
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def _text(client: OpenAIChatClient) -> str:
    text = ""
    async for event in client.stream(Request([Message.user("hi")])):
        if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
            text += event.delta.text
    return text


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_no_concurrency_limit_means_no_pool_limit_either(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # max_concurrency=None lifted the client's gate, but its own pool kept the default size:
    # with the default at 100, the 101st concurrent stream waited for a connection until it
    # timed out ("did not answer in time"). The default is made 2 here, and 3 streams must
    # all be in flight at once before the server answers any.
    monkeypatch.setattr(_http, "DEFAULT_MAX_CONCURRENCY", 2)
    async with _Rendezvous(3) as base_url:
        client = OpenAIChatClient(
            model="m",
            base_url=base_url,
            api_key=API_KEY,
            transport=transport,  # type: ignore[arg-type]
            max_concurrency=None,
            retry=RetryPolicy.disabled(),
        )
        texts: list[str] = []

        async def one() -> None:
            texts.append(await _text(client))

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for _ in range(3):
                        tg.start_soon(one)
        finally:
            await client.aclose()
    assert texts == ["ok"] * 3


@pytest.mark.parametrize("junk", ["fast", "AIOHTTP", " requests ", "auto,httpx"])
def test_a_junk_transport_in_the_environment_is_a_configuration_error(
    junk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRANSPORT_ENV, junk)
    with pytest.raises(ConfigurationError, match=TRANSPORT_ENV) as caught:
        OpenAIChatClient(model="m", api_key=API_KEY)
    assert API_KEY not in str(caught.value)


@contextmanager
def _server_in_a_thread(count: int) -> Iterator[str]:
    """A WireServer with `count` answers, run by asyncio in a thread of its own: its base URL."""
    ready = threading.Event()
    box: list[tuple[str, asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def serve() -> None:
        async with WireServer([WireResponse(_sse(), chunk_delay=0.001)] * count) as server:
            stop = asyncio.Event()
            box.append((server.base_url, asyncio.get_running_loop(), stop))
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        assert ready.wait(10), "the server did not start"
        yield box[0][0] + "/v1"
    finally:
        if box:
            box[0][1].call_soon_threadsafe(box[0][2].set)
        thread.join(10)
        assert not thread.is_alive()


@pytest.mark.parametrize("transport", [None, "aiohttp", "httpx"])
def test_one_client_serves_event_loops_running_at_once_in_threads(
    transport: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client built at start-up and shared by threads that each run a loop (a threaded web
    # server calling run_sync per request): its one own HTTP client was swapped from loop to
    # loop, and the requests failed with a bare RuntimeError("Session is closed") (aiohttp,
    # the default), "Connector is closed" or broken reads (httpx), sockets left unclosed.
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    threads, streams, rounds = 3, 8, 3
    with _server_in_a_thread(threads * streams * rounds) as base_url:
        client = OpenAIChatClient(
            model="m",
            base_url=base_url,
            api_key=API_KEY,
            transport=transport,  # type: ignore[arg-type]
            max_concurrency=4,  # a gate that makes streams wait: its waiters are per loop
            retry=RetryPolicy.disabled(),
        )
        texts: list[str] = []
        errors: list[BaseException] = []

        async def main() -> None:
            async def one() -> None:
                texts.append(await _text(client))

            try:
                with anyio.fail_after(20):
                    for _ in range(rounds):
                        async with anyio.create_task_group() as tg:
                            for _ in range(streams):
                                tg.start_soon(one)
            except BaseException as exc:
                errors.append(exc)

        runners = [threading.Thread(target=anyio.run, args=(main,)) for _ in range(threads)]
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join(30)
        assert not any(runner.is_alive() for runner in runners)
    assert errors == []
    assert texts == ["ok"] * (threads * streams * rounds)


class _StallThenAnswer:
    """An HTTP server whose first `stalled` requests get no answer (the connection held open,
    never a byte back); every later one is answered. `in_` is set once all the stalled are in."""

    def __init__(self, stalled: int, *, head_only: bool = False) -> None:
        self.stalled = stalled
        self.head_only = head_only  # the stalled get their headers, then nothing more
        self.arrived = 0
        self.in_ = asyncio.Event()
        self.closing = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # a kept-alive connection may carry the answered request after
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                self.arrived += 1
                if self.arrived <= self.stalled:
                    if self.arrived == self.stalled:
                        self.in_.set()
                    if self.head_only:
                        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
                        writer.write(b"transfer-encoding: chunked\r\n\r\n")
                    await self.closing.wait()
                    return
                body = _sse()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + b"content-length: %d\r\n\r\n" % len(body)
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0, backlog=2048)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.closing.set()
        self.server.close()
        await self.server.wait_closed()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(("transport", "count"), [(None, 300), ("httpx", 100)])
@pytest.mark.parametrize("where", ["connecting", "waiting", "streaming"])
async def test_streams_cancelled_anywhere_free_their_slots_for_one_more(
    transport: str | None, count: int, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `count` streams fill the client's every slot (max_concurrency=count) and are cancelled:
    # mid-connect (right as they start), waiting for an answer that never comes, or in a
    # body that stalls after its headers. One more stream must then still go through.
    # (1,000 passed too; fewer here for the suite's time.)
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    server = _StallThenAnswer(count if where != "connecting" else 0, head_only=where == "streaming")
    async with server as base_url:
        client = OpenAIChatClient(
            model="m",
            base_url=base_url,
            api_key=API_KEY,
            transport=transport,  # type: ignore[arg-type]
            max_concurrency=count,
            retry=RetryPolicy.disabled(),
        )
        try:
            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    for _ in range(count):
                        tg.start_soon(_text, client)
                    if where == "connecting":
                        await anyio.lowlevel.checkpoint()  # the streams started, none connected yet
                    else:
                        await server.in_.wait()
                    tg.cancel_scope.cancel()
                assert await _text(client) == "ok"
        finally:
            await client.aclose()


@pytest.mark.parametrize("transport", [None, "httpx"])
async def test_credentials_in_the_base_url_beside_a_bearer_key_are_sent_as_with_httpx(
    transport: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gateway behind Basic auth named in the base URL (`https://user:pass@gateway/v1`) with
    # an OpenAI key: on the default (aiohttp) every request failed, aiohttp refusing an
    # Authorization header beside the URL's credentials — reported as "could not reach"
    # (an APIConnectionError, so retried). httpx, the default before, sends the URL's
    # credentials as Basic auth in place of the key: both transports now send the same.
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    seen: list[str] = []

    def handler(request: RecordedRequest) -> WireResponse:
        seen.append(request.headers.get("authorization", ""))
        return WireResponse(_sse())

    async with WireServer(handler=handler) as server:
        host = server.base_url.removeprefix("http://")
        client = OpenAIChatClient(
            model="m",
            base_url=f"http://gate%20user:{API_KEY}%2F@{host}/v1",
            api_key="sk-bearer-0123456789",
            transport=transport,  # type: ignore[arg-type]
            retry=RetryPolicy.disabled(),
        )
        try:
            with anyio.fail_after(10):
                assert await _text(client) == "ok"
        finally:
            await client.aclose()
    expected = "Basic " + base64.b64encode(f"gate user:{API_KEY}/".encode()).decode()
    assert seen == [expected]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_aiohttp_named_by_the_environment_under_trio_says_to_unset_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "leave transport out" alone does not cure a client whose aiohttp came from the variable.
    monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    client = OpenAIChatClient(model="m", base_url="http://127.0.0.1:9/v1", api_key=API_KEY)
    with pytest.raises(ConfigurationError, match=f"unset {TRANSPORT_ENV}=aiohttp") as caught:
        with anyio.fail_after(10):
            await _text(client)
    assert API_KEY not in str(caught.value)
    await client.aclose()


_THREAD_LOOP_CLOSED_BY_HAND = """
import asyncio, gc, sys, threading, warnings
from llm_worker.providers._http import RetryPolicy, Transport
from llm_worker.testing import WireResponse, WireServer

warnings.simplefilter("always", ResourceWarning)
ready, address, stop = threading.Event(), [], []

async def serve():
    async with WireServer([WireResponse(b"data: x\\n\\n")] * 2) as server:
        address.append(server.base_url)
        stop.append((asyncio.get_running_loop(), asyncio.Event()))
        ready.set()
        await stop[0][1].wait()

server = threading.Thread(target=asyncio.run, args=(serve(),))
server.start()
assert ready.wait(10)
t = Transport(provider="test", base_url=address[0], headers={}, secret=None,
              retry=RetryPolicy.disabled(), timeout=5.0, transport=sys.argv[1])

async def one():
    return b"".join([chunk async for chunk in t.stream("/x", {})]) == b"data: x\\n\\n"

def by_hand():  # a loop closed without shutdown_asyncgens (no asyncio.run), in its own thread
    loop = asyncio.new_event_loop()
    print(loop.run_until_complete(one()), flush=True)
    loop.close()

thread = threading.Thread(target=by_hand)
thread.start()
thread.join(10)
del thread
gc.collect()

async def main():
    print(await one(), flush=True)
    await t.aclose()

asyncio.run(main())
del t
gc.collect()
stop[0][0].call_soon_threadsafe(stop[0][1].set)
server.join(10)
"""


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_thread_whose_loop_was_closed_by_hand_leaves_no_socket_open(transport: str) -> None:
    # A client's own HTTP client is per thread: one made under a loop closed by hand (no
    # asyncio.run to close it) went with its thread, its sockets left to the garbage collector
    # (a ResourceWarning); they are closed as the thread's backend is dropped. Development
    # mode reports any socket, transport or aiohttp session left open.
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _THREAD_LOOP_CLOSED_BY_HAND, transport],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.split() == ["True"] * 2, result.stderr[-2000:]
    assert "nclosed" not in result.stderr, result.stderr[-2000:]
