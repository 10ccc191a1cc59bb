"""Closing: a Worker closes the client it made, never one it was given; no socket leaks."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from llm_worker import TextPart, Worker
from llm_worker.providers import AnthropicClient
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


def leaked_sockets() -> list[str]:
    """The ResourceWarnings that collecting the garbage now raises (unclosed sockets)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.fixture
async def server(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[ScriptedModelServer[AnthropicClient]]:
    """A scripted Anthropic model that `Worker("anthropic:…")` reaches (no real API)."""
    script = [ScriptedResponse.text("one"), ScriptedResponse.text("two")]
    async with ScriptedModelServer("anthropic", script) as running:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.base_url)
        yield running


async def test_a_worker_made_from_a_model_string_leaks_no_connection_closed_or_not(
    server: ScriptedModelServer[AnthropicClient],
) -> None:
    # What the issue saw: the README's Worker("anthropic:…") left a socket open. The HTTP
    # client its transport made is now closed on the event loop when it is collected.
    unclosed = Worker("anthropic:claude-sonnet-4-5")
    with anyio.fail_after(TIMEOUT):
        await unclosed.run("hi")
    del unclosed
    assert leaked_sockets() == []

    with anyio.fail_after(TIMEOUT):
        async with Worker("anthropic:claude-sonnet-4-5") as worker:
            result = await worker.run("hi")
    assert result.text == "two"
    del worker
    assert leaked_sockets() == []


async def test_aclose_after_a_stream_closed_early_leaks_nothing(
    server: ScriptedModelServer[AnthropicClient],
) -> None:
    server.script[:] = [ScriptedResponse([TextPart("y" * 400)], chunk_size=1)]
    server.chunk_delay = 0.001
    with anyio.fail_after(TIMEOUT):
        worker = Worker("anthropic:claude-sonnet-4-5")
        async with worker.stream("hi") as stream:
            async for _ in stream:
                break
        await worker.aclose()
    assert [m.role for m in worker.history] == ["user"]
    del worker, stream
    assert leaked_sockets() == []


async def test_a_worker_never_closes_a_client_it_was_given() -> None:
    script = [ScriptedResponse.text("one"), ScriptedResponse.text("two")]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as client:
        with anyio.fail_after(TIMEOUT):
            async with Worker(client) as first:
                await first.run("hi")
            second = await Worker(client).run("again")  # the client still works
    assert second.text == "two"
    del client, first
    assert leaked_sockets() == []  # the client's own `async with` closed it


async def test_a_client_closes_only_the_http_client_it_created() -> None:
    script = [ScriptedResponse.text("one"), ScriptedResponse.text("two")]
    async with ScriptedModelServer("anthropic", script) as server, httpx.AsyncClient() as http:
        with anyio.fail_after(TIMEOUT):
            async with server.client(http_client=http) as given:
                await Worker(given).run("hi")
            assert not http.is_closed  # the user's, passed in: left open
            async with server.client() as own:
                await Worker(own).run("hi")
        del given, own
        assert leaked_sockets() == []  # the one it created itself was closed
