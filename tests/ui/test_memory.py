"""A served run leaves nothing of itself behind: its Worker is garbage once its request ends.

Whatever way the run ends — to its finish, paused for an approval, failed, or cut off by the
browser mid-answer — the adapter keeps no reference to the Worker, its history or its stream
(what stays is bounded and small: a pause, a record of tool results, a resumable run's log).
`benchmarks/bench_serve.py` measures the memory this keeps down for 1,000 runs at once.
"""

from __future__ import annotations

import gc
import logging
import weakref
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Worker
from llm_worker.errors import AuthenticationError
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

from .conftest import book, booking, serve, weather

pytestmark = pytest.mark.anyio

TEXT = {VercelAIAdapter: "text-delta", AGUIAdapter: "TEXT_MESSAGE_CONTENT"}
ERROR = {VercelAIAdapter: '"type":"error"', AGUIAdapter: '"type":"RUN_ERROR"'}


def _body(adapter: type, chat: str) -> dict[str, Any]:
    if adapter is VercelAIAdapter:
        part = {"type": "text", "text": "Go"}
        return {"id": chat, "messages": [{"id": "u1", "role": "user", "parts": [part]}]}
    message = {"id": "u1", "role": "user", "content": "Go"}
    return {"threadId": chat, "runId": f"run-{chat}", "messages": [message]}


class WeakFactory:
    """Makes a Worker per request and keeps only a weak reference to it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.made: list[weakref.ref[Worker]] = []

    def __call__(self) -> Worker:
        worker = Worker(self.client, tools=[weather, book])
        self.made.append(weakref.ref(worker))
        return worker

    def alive(self) -> int:
        gc.collect()
        return sum(ref() is not None for ref in self.made)


def _script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse.text("A short answer."),  # ends
        booking("Booked.")[0],  # pauses for the approval of `book`
        ScriptedResponse.text("word " * 400, chunk_size=5, delay=0.002),  # cut mid-answer
        # The provider refuses mid-answer (not retried): the run fails.
        ScriptedResponse.text("and then", fail_with=AuthenticationError("invalid x-api-key")),
    ]


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
@pytest.mark.parametrize("resumable", [False, True])
async def test_no_worker_outlives_its_request(
    adapter: type, resumable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failed run's error is logged with its traceback, which holds the run's frames:
    # pytest's log capture keeps the record to the test's end (a handler that writes it
    # out, as an application's does, keeps nothing).
    logger = logging.getLogger("llm_worker.ui")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [logging.NullHandler()])
    async with ScriptedModelServer("openai_chat", _script()) as server, server.client() as client:
        factory = WeakFactory(client)
        app = adapter(factory, resumable=resumable)
        async with serve(app) as url, httpx.AsyncClient(timeout=20) as http:
            with anyio.fail_after(30):
                ended = await http.post(url + "/api/chat", json=_body(adapter, "c1"))
                assert ended.status_code == 200
                paused = await http.post(url + "/api/chat", json=_body(adapter, "c2"))
                assert "book" in paused.text
                # The browser goes away after the first delta: the run is cancelled.
                body = _body(adapter, "c3")
                async with http.stream("POST", url + "/api/chat", json=body) as cut:
                    async for chunk in cut.aiter_text():
                        if TEXT[adapter] in chunk:
                            break
                failed = await http.post(url + "/api/chat", json=_body(adapter, "c4"))
                assert ERROR[adapter] in failed.text
        # The server stopped when every request ended (a resumable run goes on after its
        # browser left, to its end); the adapter, which outlives its requests, remains.
        assert len(factory.made) == 4
        assert factory.alive() == 0
        assert len(app.store) == 1  # the pause of c2: its state, not its Worker
