"""The adapters over real HTTP: a disconnect, and the requests they refuse."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import httpx
import pytest

from llm_worker.errors import MissingExtraError
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, MemoryPauseStore, VercelAIAdapter
from llm_worker.ui._asgi import Receive, Scope, Send

from .conftest import scripted, serve

pytestmark = pytest.mark.anyio

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Tell me a long story"}]}


class Done:
    """Wraps an ASGI app; `finished` is set when a request's handling has returned."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.finished = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            self.finished.set()


def run_tasks() -> list[asyncio.Task[Any]]:
    """Tasks of llm-worker's runs still alive in this loop."""
    return [t for t in asyncio.all_tasks() if "RunStream" in repr(t.get_coro()) and not t.done()]


async def test_a_disconnect_cancels_the_run_and_the_next_request_goes_on() -> None:
    slow = ScriptedResponse.text("Once upon a time " * 200, chunk_size=4, delay=0.01)
    async with scripted("anthropic", [slow, ScriptedResponse.text("Short.")]) as (_, factory):
        app = Done(VercelAIAdapter(factory))
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            body = {"id": "c1", "messages": [USER], "trigger": "submit-message"}
            with anyio.fail_after(10):
                async with http.stream("POST", url, json=body) as response:
                    async for line in response.aiter_lines():
                        if '"text-delta"' in line:
                            break  # the browser tab closes mid-answer
                await app.finished.wait()
            assert run_tasks() == []
            worker = factory.workers[0]
            assert [m.role for m in worker.history] == ["user"]  # no half answer kept
            with anyio.fail_after(10):
                again = await http.post(url, json=body)
            assert '"delta":"Short."' in again.text
            assert again.text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_bad_requests_get_a_status_and_a_reason(adapter: Any) -> None:
    async with scripted("anthropic", []) as (_, factory):
        app = adapter(factory, max_body_bytes=1000)
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                assert (await http.get(url)).status_code == 405
                not_json = await http.post(url, content=b"{nope")
                too_big = await http.post(url, content=b"x" * 2000)
                bad_role = await http.post(
                    url,
                    json={
                        "id": "c",
                        "threadId": "t",
                        "runId": "r",
                        "messages": [{"id": "s", "role": "system", "content": "x", "parts": []}],
                    },
                )
    assert not_json.status_code == 400
    assert "not JSON" in not_json.json()["error"]
    assert too_big.status_code == 413
    assert bad_role.status_code == 400
    assert "system" in bad_role.json()["error"]
    assert factory.workers == []


async def test_a_decision_with_no_paused_run_is_an_error_the_client_shows() -> None:
    approval = {"id": "approval_x", "approved": True}
    assistant = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "tool-book", "toolCallId": "x", "state": "approval-responded",
             "input": {"city": "Kyoto"}, "approval": approval},
        ],
    }  # fmt: skip
    async with (
        scripted("anthropic", []) as (_, factory),
        serve(VercelAIAdapter(factory)) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        body = {"id": "c1", "messages": [USER, assistant], "messageId": "a1"}
        with anyio.fail_after(10):
            response = await http.post(url, json=body)
    assert '"type":"error"' in response.text
    assert "no paused run waits for this chat" in response.text
    assert factory.workers == []  # nothing ran: a forged approval runs no tool


async def test_the_memory_store_is_bounded() -> None:
    from llm_worker import Message, PauseState

    store = MemoryPauseStore(max_entries=2)
    for n in range(5):
        await store.put(f"chat-{n}", PauseState([Message.user("hi")]))
    assert len(store) == 2
    assert await store.take("chat-0") is None
    assert await store.take("chat-4") is not None


def test_a_missing_web_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_worker.ui._serve import web_app

    monkeypatch.setitem(sys.modules, "starlette", None)
    monkeypatch.setitem(sys.modules, "starlette.applications", None)
    with pytest.raises(MissingExtraError, match=r"llm-worker\[web\]"):
        web_app(VercelAIAdapter(lambda: None))  # type: ignore[arg-type, return-value]
