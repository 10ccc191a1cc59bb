"""The per-owner bound of resumable runs, through the real adapters: one owner POSTing runs
of new chat ids and hanging up keeps at most `max_live_per_owner` going; the stopped ones
end with the protocol's stop, a reconnect reads it, and the newest runs finish."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from llm_worker import TextPart, ToolUsePart, Worker
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, ResumableStreams, VercelAIAdapter
from llm_worker.ui._auth import chat_key

from .conftest import scripted, serve
from .test_http import run_tasks
from .test_resumable import PROTOCOLS, Watch, World, held_weather

pytestmark = pytest.mark.anyio

RUNS, BOUND = 5, 2
CALL = ScriptedResponse([TextPart("Checking."), ToolUsePart("", "weather", {"city": "Oslo"})])


def by_header(request: Any, chat_id: str) -> str | None:
    del chat_id
    return request.headers.get("x-user")


@asynccontextmanager
async def world(adapter: Any) -> AsyncIterator[tuple[World, ResumableStreams]]:
    # Every run reaches its held tool first; only the newest BOUND ask a second time.
    script = [CALL] * (RUNS + 1) + [ScriptedResponse.text("Sunny in Oslo.")] * (BOUND + 1)
    streams = ResumableStreams(max_live_per_owner=BOUND)
    async with scripted("anthropic", script) as (_, factory):
        box: list[World] = []

        def make() -> Worker:
            worker = Worker(factory.client, tools=[held_weather(box[0].gate)])
            box[0].workers.append(worker)
            return worker

        app = Watch(adapter(make, resumable=streams, authorize=by_header))
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            box.append(World(http, url, app, app.app))
            yield box[0], streams


def chat(adapter: Any, ident: str) -> dict[str, Any]:
    body = dict(PROTOCOLS[adapter][0])
    body["id" if adapter is VercelAIAdapter else "threadId"] = ident
    return body


def last(events: list[tuple[str, str]]) -> Any:
    return [json.loads(d) for _, d in events if d != "[DONE]"][-1]


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_an_owner_hanging_up_on_new_chats_keeps_only_its_newest_runs_going(
    adapter: Any,
) -> None:
    _, _, waiting, end = PROTOCOLS[adapter]
    async with world(adapter) as (w, streams):
        w.http.headers["x-user"] = "alice"
        await w.until(chat(adapter, "a0"), waiting)  # another owner's run, held too
        w.http.headers["x-user"] = "mallory"
        for n in range(RUNS):
            await w.until(chat(adapter, f"m{n}"), waiting)
        stopped = [await w.read("GET", w.stream_url(f"m{n}")) for n in range(RUNS - BOUND)]
        live = [n for n in range(RUNS) if not streams.get(chat_key("mallory", f"m{n}")).done]  # type: ignore[union-attr]
        alice = streams.get(chat_key("alice", "a0"))
        going = alice is not None and not alice.done
        w.gate.set()
        w.http.headers["x-user"] = "mallory"
        newest = [await w.read("GET", w.stream_url(f"m{n}")) for n in range(RUNS - BOUND, RUNS)]
        w.http.headers["x-user"] = "alice"
        theirs = await w.read("GET", w.stream_url("a0"))
        other = await w.read("GET", w.stream_url("m0"))  # alice asks for mallory's chat
        tasks = run_tasks()
    assert live == list(range(RUNS - BOUND, RUNS))
    assert going  # another owner's run is never stopped
    for status, events in stopped:  # a reconnect to a stopped run reads how it ended
        assert status == 200
        if adapter is VercelAIAdapter:
            assert last(events) == {"type": "abort", "reason": "stopped"}
        else:
            assert last(events)["code"] == "Stopped"
    for status, events in [*newest, theirs]:
        assert status == 200
        assert last(events)["type"] == end
    assert other == (204, [])  # nothing kept under alice's m0: mallory's run is not hers
    assert tasks == []
