"""The default transport (`"auto"`): aiohttp under asyncio, httpx under trio, per request.

A client is often built outside any event loop and may be used under asyncio in one `run` and
under trio in the next: the library is picked by the loop of each request. These tests run
real streams from local servers (in a thread of their own, on asyncio, so that the client's
loop can be trio) and tell the library by the User-Agent it sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TypeVar

import aiohttp
import anyio
import httpx
import pytest
import trio

from llm_worker import PauseState, RunStatus, ToolUsePart, Worker, tool
from llm_worker.errors import ConfigurationError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import Message, Request
from llm_worker.providers import Cooldown, FallbackClient, OpenAIChatClient, RetryPolicy
from llm_worker.providers._base import LLMClient
from llm_worker.providers._http_backend import TRANSPORT_ENV
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer

S = TypeVar("S")
TIMEOUT = 10.0


def library_of(user_agent: str) -> str:
    """The HTTP library that sent a request, by its own User-Agent."""
    if user_agent.startswith("python-httpx/"):
        return "httpx"
    assert "aiohttp/" in user_agent, user_agent
    return "aiohttp"


@contextmanager
def in_a_thread(server: Callable[[], AbstractAsyncContextManager[S]]) -> Iterator[S]:
    """A local server run by asyncio in a thread: the test's own loop may be trio."""
    ready = threading.Event()
    box: list[tuple[S, asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def serve() -> None:
        async with server() as running:
            stop = asyncio.Event()
            box.append((running, asyncio.get_running_loop(), stop))
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        assert ready.wait(TIMEOUT), "the server did not start"
        yield box[0][0]
    finally:
        if box:
            _, loop, stop = box[0]
            loop.call_soon_threadsafe(stop.set)
        thread.join(TIMEOUT)
        assert not thread.is_alive()


async def answer(client: LLMClient) -> str:
    text = ""
    with anyio.fail_after(TIMEOUT):
        async for event in client.stream(Request([Message.user("hi")])):
            if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                text += event.delta.text
    return text


PLAIN = """
import asyncio, json, sys, threading, warnings
warnings.simplefilter("error")
import trio
from llm_worker import Message, Request
from llm_worker.providers import OpenAIChatClient
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

ready, box = threading.Event(), []

async def serve():
    script = [ScriptedResponse.text(f"answer {n}") for n in range(3)]
    async with ScriptedModelServer("openai_chat", script) as server:
        box.append(server)
        ready.set()
        await asyncio.Event().wait()

threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
assert ready.wait(10)
server = box[0]
client = server.client()  # outside any event loop
built = [m for m in ("httpx", "aiohttp") if m in sys.modules]

async def one():
    inside = client.transport.transport
    async for _ in client.stream(Request([Message.user("hi")])):
        pass
    libraries = [m for m in ("httpx", "aiohttp") if m in sys.modules]
    return {"inside": inside, "imported": libraries}

async def close():
    await client.aclose()

runs = [asyncio.run(one()), trio.run(one), asyncio.run(one())]
asyncio.run(close())
agents = [request.headers["user-agent"] for request in server.requests]
after = client.transport.transport
print(json.dumps({"built": built, "runs": runs, "agents": agents, "after": after}))
"""


def test_a_plain_environment_sends_through_aiohttp_on_asyncio_and_httpx_on_trio() -> None:
    # A fresh interpreter, no LLM_WORKER_TRANSPORT and no lent client: what a plain install
    # does. One client, built outside any loop, used under asyncio, trio, asyncio again.
    env = {k: v for k, v in os.environ.items() if k != TRANSPORT_ENV}
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-c", PLAIN],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nclosed" not in result.stderr, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["built"] == []  # building the client imported neither library
    assert [library_of(agent) for agent in seen["agents"]] == ["aiohttp", "httpx", "aiohttp"]
    assert [run["inside"] for run in seen["runs"]] == ["aiohttp", "httpx", "aiohttp"]
    assert seen["runs"][0]["imported"] == ["aiohttp"]  # httpx only once trio needed it
    assert seen["after"] == "aiohttp"  # outside a loop: the last request's library


WITHOUT_AIOHTTP = """
import asyncio, sys
sys.modules["aiohttp"] = None  # as if an install had left it out (--no-deps)
from llm_worker import Message, Request
from llm_worker.errors import APIConnectionError
from llm_worker.providers import OpenAIChatClient, RetryPolicy

client = OpenAIChatClient(model="m", api_key="k", base_url="http://127.0.0.1:9/v1",
                          retry=RetryPolicy.disabled())

async def main():
    inside = client.transport.transport
    try:
        async for _ in client.stream(Request([Message.user("hi")])):
            pass
    except APIConnectionError as exc:
        print(inside, type(exc.__cause__).__module__.split(".")[0])
    await client.aclose()

asyncio.run(main())
"""


def test_without_aiohttp_the_default_falls_back_to_httpx() -> None:
    env = {k: v for k, v in os.environ.items() if k != TRANSPORT_ENV}
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_AIOHTTP],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["httpx", "httpx"]  # chosen, and the request went through it


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("transport", "variable", "expected"),
    [
        (None, None, "aiohttp"),
        ("auto", None, "aiohttp"),
        ("httpx", None, "httpx"),
        (None, "httpx", "httpx"),
        (None, "auto", "aiohttp"),
        ("aiohttp", "httpx", "aiohttp"),
        ("httpx", "aiohttp", "httpx"),
    ],
)
async def test_an_explicit_choice_wins_over_the_default(
    transport: str | None, variable: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    if variable is not None:
        monkeypatch.setenv(TRANSPORT_ENV, variable)
    options = {} if transport is None else {"transport": transport}
    async with (
        ScriptedModelServer("anthropic", [ScriptedResponse.text("hi")]) as server,
        server.client(**options) as client,
    ):
        assert client.transport.transport == expected  # inside the loop: resolved
        assert await answer(client) == "hi"
    assert [library_of(r.headers["user-agent"]) for r in server.requests] == [expected]


@pytest.mark.anyio
async def test_a_lent_httpx_client_decides_under_asyncio_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    async with (
        ScriptedModelServer("openai_chat", [ScriptedResponse.text("lent")]) as server,
        httpx.AsyncClient() as lent,
    ):
        client = server.client(http_client=lent)
        assert client.transport.transport == "httpx"
        assert await answer(client) == "lent"
        assert not lent.is_closed
    assert library_of(server.requests[0].headers["user-agent"]) == "httpx"


def test_the_default_timeout_is_in_the_type_of_the_loops_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    client = OpenAIChatClient(model="m", api_key="k", timeout=7)
    seen: list[object] = []

    async def read() -> None:
        seen.append(client.transport.timeout)

    trio.run(read)
    asyncio.run(read())
    under_trio, under_asyncio = seen
    assert isinstance(under_trio, httpx.Timeout)
    assert under_trio.read == 7.0
    assert isinstance(under_asyncio, aiohttp.ClientTimeout)
    assert under_asyncio.sock_read == 7.0
    # Outside any loop: the library used last (aiohttp, under asyncio just now).
    assert isinstance(client.transport.timeout, aiohttp.ClientTimeout)


def test_aiohttp_named_under_trio_is_a_configuration_error() -> None:
    # aiohttp runs on asyncio only: the error says what to do instead of asyncio's
    # "no running event loop".
    client = OpenAIChatClient(
        model="m", api_key="k", base_url="http://127.0.0.1:9/v1", transport="aiohttp"
    )

    async def main() -> None:
        with pytest.raises(ConfigurationError, match=r"asyncio only.*under trio"):
            await answer(client)

    trio.run(main)


@tool(effect="side_effect")
async def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("approve?")


def test_paused_under_asyncio_and_resumed_from_json_under_trio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One client, built outside any loop: the pause's request goes through aiohttp, the
    # resumed run's through httpx, and the JSON between them knows nothing of either.
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    script = [
        ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})]),
        ScriptedResponse.text("done"),
    ]
    with in_a_thread(lambda: ScriptedModelServer("anthropic", script)) as server:
        client = server.client()

        def worker() -> Worker:
            made = Worker(client, tools=[send])
            made.add_before_tool_call_hook(approval)
            return made

        async def pause() -> str:
            result = await worker().run("send it")
            assert result.status is RunStatus.PAUSED
            assert result.state is not None
            return result.state.to_json()

        async def resume(saved: str) -> str:
            with anyio.fail_after(TIMEOUT):
                result = await worker().resume(PauseState.from_json(saved))
            assert result.status is RunStatus.FINISHED
            await client.aclose()
            return result.text

        saved = asyncio.run(pause())
        assert trio.run(resume, saved) == "done"
    agents = [library_of(r.headers["user-agent"]) for r in server.requests]
    assert agents == ["aiohttp", "httpx"]
    assert "sent to ana" in server.requests[1].body.decode()


def test_a_fallback_over_default_clients_keeps_its_cooldown_across_loops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first client's 500 opens its breaker under asyncio (aiohttp); under trio (httpx)
    # the same breaker holds: a client's cooldown key does not depend on its HTTP library.
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    broken = WireResponse(b'{"error": {"message": "down"}}', status=500)
    script = [ScriptedResponse.text("spare 1"), ScriptedResponse.text("spare 2")]
    with (
        in_a_thread(lambda: WireServer([broken])) as down,
        in_a_thread(lambda: ScriptedModelServer("openai_chat", script)) as spare,
    ):
        first = OpenAIChatClient(
            model="m", api_key="k", base_url=down.base_url + "/v1", retry=RetryPolicy.disabled()
        )
        client = FallbackClient([first, spare.client()], cooldown=Cooldown(failures=1))

        async def ask() -> str:
            try:
                return await answer(client)
            finally:
                await client.aclose()

        assert asyncio.run(ask()) == "spare 1"
        assert trio.run(ask) == "spare 2"
    assert len(down.requests) == 1  # the breaker kept the second request from it
    assert library_of(down.requests[0].headers["user-agent"]) == "aiohttp"
    agents = [library_of(r.headers["user-agent"]) for r in spare.requests]
    assert agents == ["aiohttp", "httpx"]
