"""Review probes: disconnects and secrets with Workers made from a model string."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Worker
from llm_worker.errors import AuthenticationError
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

from .conftest import book, serve, weather
from .test_http import Done, run_tasks

pytestmark = pytest.mark.anyio

SECRET = "sk-ant-api03-" + "R3v13wS3cr3t" * 4
VERCEL = {
    "id": "c1",
    "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "A story"}]}],
}
AGUI = {
    "threadId": "t1",
    "runId": "r1",
    "messages": [{"id": "u1", "role": "user", "content": "A story"}],
}
BODIES = {VercelAIAdapter: (VERCEL, "text-delta"), AGUIAdapter: (AGUI, "TEXT_MESSAGE_CONTENT")}


class OwnFactory:
    """Workers made from a model string (each owns its connection pool), kept to inspect."""

    def __init__(self) -> None:
        self.workers: list[Worker] = []

    def __call__(self) -> Worker:
        worker = Worker("anthropic:scripted-model", tools=[weather, book])
        self.workers.append(worker)
        return worker


@asynccontextmanager
async def model(
    script: list[ScriptedResponse], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ScriptedModelServer[Any]]:
    async with ScriptedModelServer("anthropic", script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
        yield server


def pool_open(worker: Worker) -> bool:
    """Whether the Worker's own HTTP pool is still open (private: no public view of it)."""
    transport: Any = worker.client.transport  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    backend: Any = transport._backend  # pyright: ignore[reportUnknownMemberType]
    if backend.name == "aiohttp":  # the default under asyncio
        session: Any = backend._session  # pyright: ignore[reportUnknownMemberType]
        return session is not None and not session.closed  # pyright: ignore[reportUnknownMemberType]
    pool: Any = backend._client  # pyright: ignore[reportUnknownMemberType]
    return pool is not None and not pool.is_closed  # pyright: ignore[reportUnknownMemberType]


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_a_disconnect_closes_the_pool_of_a_worker_made_from_a_model_string(
    adapter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, delta = BODIES[adapter]
    slow = ScriptedResponse.text("Once upon a time " * 200, chunk_size=4, delay=0.01)
    async with model([slow], monkeypatch):
        factory = OwnFactory()
        app = Done(adapter(factory))
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                async with http.stream("POST", url, json=body) as response:
                    async for line in response.aiter_lines():
                        if delta in line:
                            break  # the tab closes mid-answer
                await app.finished.wait()
            assert run_tasks() == []
    assert [pool_open(w) for w in factory.workers] == [False]


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_a_provider_error_shows_no_api_key(
    adapter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, _ = BODIES[adapter]
    refused = AuthenticationError(f"invalid x-api-key {SECRET}", error_type="authentication_error")
    async with model([ScriptedResponse.text("x", fail_with=refused)], monkeypatch):
        factory = OwnFactory()
        async with serve(adapter(factory)) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                response = await http.post(url, json=body)
    assert "authentication" in response.text.lower(), response.text
    assert "R3v13wS3cr3t" not in response.text
    assert "R3v13wS3cr3t" not in repr(factory.workers[0])
