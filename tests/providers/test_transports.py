"""Choosing the HTTP library: `transport=`, a lent `http_client`, the environment, the extra.

The behaviour over each library (statuses, faults, retries, secrets) is proven by the provider
and fault tests, which run over both (the `http_transport` fixture); this module tests the
choice itself and what only one library has.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import aiohttp
import anyio
import httpx
import pytest

from llm_worker.errors import ConfigurationError, MissingExtraError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._base import HttpClient
from llm_worker.providers._http_backend import TRANSPORT_ENV
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

CLIENTS: list[type[HttpClient]] = [
    AnthropicClient,
    GeminiClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
]


async def _answer(server: ScriptedModelServer[Any], **options: Any) -> str:
    text = ""
    async with server.client(**options) as client:
        with anyio.fail_after(10):
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                    text += event.delta.text
    return text


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
async def test_every_client_streams_through_the_library_it_names(
    provider: str, library: str
) -> None:
    async with ScriptedModelServer(provider, [ScriptedResponse.text("Hello there")]) as server:
        assert await _answer(server, transport=library) == "Hello there"
    # The library's own User-Agent: the request really went through it.
    [request] = server.requests
    assert request.headers["user-agent"].startswith(
        "python-httpx" if library == "httpx" else "Python/"
    )
    assert ("aiohttp" in request.headers["user-agent"]) == (library == "aiohttp")


@pytest.mark.parametrize("cls", CLIENTS, ids=lambda c: c.__name__)
def test_every_client_takes_transport(cls: type[HttpClient]) -> None:
    client = cls(model="m", api_key="k", base_url="http://127.0.0.1:1", transport="aiohttp")
    assert client.transport.transport == "aiohttp"
    assert isinstance(client.transport.timeout, aiohttp.ClientTimeout)
    default = cls(model="m", api_key="k", base_url="http://127.0.0.1:1")
    assert default.transport.transport == "auto"  # resolved by the loop of each request


async def test_a_lent_aiohttp_session_is_used_and_left_open() -> None:
    sent: list[str] = []

    async def on_start(_s: object, _c: object, params: aiohttp.TraceRequestStartParams) -> None:
        sent.append(str(params.url))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    async with (
        ScriptedModelServer(
            "openai_chat", [ScriptedResponse.text("one"), ScriptedResponse.text("two")]
        ) as server,
        aiohttp.ClientSession(trace_configs=[trace]) as session,
    ):
        assert await _answer(server, http_client=session) == "one"  # transport inferred
        assert not session.closed  # the client's aclose left the caller's session open
        assert await _answer(server, http_client=session, transport="aiohttp") == "two"
    assert len(sent) == 2
    assert all(url.endswith("/v1/chat/completions") for url in sent)


async def test_the_environment_names_the_default_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    assert OpenAIChatClient(model="m", api_key="k").transport.transport == "aiohttp"
    # An explicit choice and a lent client both win over the environment.
    explicit = OpenAIChatClient(model="m", api_key="k", transport="httpx")
    assert explicit.transport.transport == "httpx"
    async with httpx.AsyncClient() as lent:
        assert OpenAIChatClient(model="m", api_key="k", http_client=lent).transport.transport == (
            "httpx"
        )
    monkeypatch.setenv(TRANSPORT_ENV, "requests")
    with pytest.raises(ConfigurationError, match=f"'requests'.*{TRANSPORT_ENV}"):
        OpenAIChatClient(model="m", api_key="k")


async def test_settings_of_the_other_library_are_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="unknown transport 'curl'"):
        OpenAIChatClient(model="m", api_key="k", transport="curl")  # type: ignore[arg-type]
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ConfigurationError, match="transport='aiohttp'"):
            OpenAIChatClient(model="m", api_key="k", http_client=session, transport="httpx")
    async with httpx.AsyncClient() as client:
        with pytest.raises(ConfigurationError, match="transport='httpx'"):
            OpenAIChatClient(model="m", api_key="k", http_client=client, transport="aiohttp")
    with pytest.raises(ConfigurationError, match=r"AsyncClient or an aiohttp\.ClientSession"):
        OpenAIChatClient(model="m", api_key="k", http_client=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"httpx\.Timeout for the httpx transport"):
        OpenAIChatClient(
            model="m", api_key="k", transport="httpx", timeout=aiohttp.ClientTimeout(total=5)
        )
    with pytest.raises(ConfigurationError, match=r"seconds, an httpx\.Timeout or an aiohttp"):
        OpenAIChatClient(model="m", api_key="k", timeout="5")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="positive number of seconds"):
        OpenAIChatClient(model="m", api_key="k", transport="aiohttp", timeout=-1.0)


def test_an_httpx_timeout_keeps_its_phases_on_aiohttp() -> None:
    timeout = httpx.Timeout(5.0, connect=2.0, read=0.25, pool=1.0)
    client = OpenAIChatClient(model="m", api_key="k", transport="aiohttp", timeout=timeout)
    got = client.transport.timeout
    assert isinstance(got, aiohttp.ClientTimeout)
    assert (got.total, got.connect, got.sock_connect, got.sock_read) == (None, 3.0, 2.0, 0.25)


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "llm_worker.providers._http_aiohttp", raising=False)
    with pytest.raises(MissingExtraError) as caught:
        OpenAIChatClient(model="m", api_key="k", transport="aiohttp")
    assert caught.value.extra == "aiohttp"
    assert "pip install 'llm-worker[aiohttp]'" in str(caught.value)


def test_with_aiohttp_httpx_is_never_imported() -> None:
    # A whole stream, from a real local server, in a fresh interpreter.
    code = textwrap.dedent(
        """
        import sys, anyio
        from llm_worker import Message, Request
        from llm_worker.testing import ScriptedModelServer, ScriptedResponse

        async def main():
            async with ScriptedModelServer("anthropic", [ScriptedResponse.text("hi")]) as server:
                async with server.client(transport="aiohttp") as client:
                    async for _ in client.stream(Request([Message.user("x")])):
                        pass
            print(",".join(m for m in ("httpx", "httpcore", "aiohttp") if m in sys.modules))

        anyio.run(main)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "aiohttp"


def test_building_clients_imports_no_http_library_and_no_heavy_stdlib() -> None:
    # The HTTP library is imported at the first request; our modules import neither
    # urllib.request (xml.sax.saxutils pulls it in) nor email (for one Retry-After date),
    # nor hashlib (OpenSSL: a cooldown's key digest is made at its first use) nor socket.
    code = textwrap.dedent(
        """
        import sys
        from llm_worker.providers import (
            AnthropicClient, GeminiClient, OpenAIChatClient, OpenAIResponsesClient,
        )
        for cls in (AnthropicClient, GeminiClient, OpenAIChatClient, OpenAIResponsesClient):
            for transport in ("httpx", "aiohttp"):
                cls(model="m", api_key="k", transport=transport, timeout=30)
        heavy = ("httpx", "httpcore", "aiohttp", "urllib.request", "email", "xml.sax",
                 "hashlib", "socket")
        print(",".join(m for m in heavy if m in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


async def test_a_client_built_before_its_first_request_checks_its_settings_then() -> None:
    # Built without importing the library, it still refuses bad settings at construction.
    with pytest.raises(ConfigurationError, match="timeout"):
        OpenAIChatClient(model="m", api_key="k", timeout=-1.0)
    client = OpenAIChatClient(model="m", api_key="k", transport="aiohttp", timeout=7)
    assert client.transport.transport == "aiohttp"
    assert isinstance(client.transport.timeout, aiohttp.ClientTimeout)
    assert client.transport.timeout.sock_read == 7.0


async def test_a_body_over_one_megabyte_goes_whole_and_unwarned(http_transport: str) -> None:
    # aiohttp warned (a ResourceWarning: an error here) for every request body over 1 MB,
    # which a long run's history passes: the default transport failed such runs' tests.
    big = "page " * 300_000  # 1.5 MB
    async with (
        ScriptedModelServer("openai_chat", ScriptedResponse.text("ok")) as server,
        server.client() as client,
    ):
        with anyio.fail_after(30):
            events = [e async for e in client.stream(Request([Message.user(big)]))]
        assert any(isinstance(e, BlockDelta) for e in events)
        (received,) = server.requests
        assert received.json()["messages"][0]["content"] == big
        assert received.headers["content-type"] == "application/json"
        assert int(received.headers["content-length"]) == len(received.body)
