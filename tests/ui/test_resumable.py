"""Resumable runs: a closed connection leaves the run going, a reconnect reads its events again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedResponse
from llm_worker.tools import Tool
from llm_worker.ui import AGUIAdapter, ResumableStreams, VercelAIAdapter, messages_from_ui
from llm_worker.ui._asgi import Receive, Scope, Send
from llm_worker.ui._auth import chat_key

from .conftest import CONSUMERS, booking, consumed, scripted, serve
from .test_http import run_tasks

pytestmark = pytest.mark.anyio

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Oslo?"}]}
VERCEL = {"id": "c1", "messages": [USER], "trigger": "submit-message"}
AGUI = {
    "threadId": "t1",
    "runId": "r1",
    "messages": [{"id": "u1", "role": "user", "content": "Weather in Oslo?"}],
}
# What shows the run is waiting in its tool, and what ends it, per adapter.
PROTOCOLS = {
    VercelAIAdapter: (VERCEL, "c1", "tool-input-available", "finish"),
    AGUIAdapter: (AGUI, "t1", "TOOL_CALL_END", "RUN_FINISHED"),
}
SCRIPT = [
    ScriptedResponse([TextPart("Checking."), ToolUsePart("", "weather", {"city": "Oslo"})]),
    ScriptedResponse.text("Sunny in Oslo."),
]


def held_weather(gate: anyio.Event) -> Tool:
    @tool(effect="read_only")
    async def weather(city: str) -> str:
        """The weather in a city (answers once the test opens the gate)."""
        await gate.wait()
        return f"{city}: sunny"

    return weather


class Watch:
    """Wraps an ASGI app: `closed` is set when a client's disconnect reaches it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.closed = anyio.Event()
        self.finished = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watched() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.closed.set()
            return message

        try:
            await self.app(scope, watched, send)
        finally:
            self.finished.set()


class World:
    """A resumable adapter over a scripted model whose weather tool waits for `gate`."""

    def __init__(self, http: httpx.AsyncClient, url: str, app: Watch, adapter: Any) -> None:
        self.http, self.url, self.app, self.adapter = http, url, app, adapter
        self.gate = anyio.Event()
        self.workers: list[Worker] = []

    def stream_url(self, key: str) -> str:
        return f"{self.url}/{key}/stream"

    async def read(self, method: str, url: str, **kw: Any) -> tuple[int, list[tuple[str, str]]]:
        """A whole response: its status and its (id, data) events."""
        with anyio.fail_after(10):
            response = await self.http.request(method, url, **kw)
        return response.status_code, parse(response.text)

    async def until(self, body: dict[str, Any], marker: str) -> list[tuple[str, str]]:
        """POST `body`, read up to the event holding `marker`, then close the connection."""
        seen: list[tuple[str, str]] = []
        with anyio.fail_after(10):
            async with self.http.stream("POST", self.url, json=body) as response:
                buffer = ""
                async for text in response.aiter_text():
                    buffer += text
                    *whole, buffer = buffer.split("\n\n")
                    seen += parse("\n\n".join(whole))
                    if any(marker in data for _, data in seen):
                        break
            await self.app.closed.wait()  # the server saw the browser go
        return seen


def parse(text: str) -> list[tuple[str, str]]:
    """The (id, data) pairs of an SSE body."""
    events: list[tuple[str, str]] = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            events.append((fields.get("id", ""), fields["data"]))
    return events


@asynccontextmanager
async def world(adapter: Any, runs: int = 1, **options: Any) -> AsyncIterator[World]:
    async with scripted("anthropic", SCRIPT * runs) as (_, factory):
        box: list[World] = []

        def make() -> Worker:
            worker = Worker(factory.client, tools=[held_weather(box[0].gate)])
            box[0].workers.append(worker)
            return worker

        app = Watch(adapter(make, **({"resumable": True} | options)))
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            box.append(World(http, url, app, app.app))
            yield box[0]


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_a_reconnect_mid_run_reads_on_from_its_last_event_id(adapter: Any) -> None:
    body, key, waiting, end = PROTOCOLS[adapter]
    async with world(adapter) as w:
        first = await w.until(body, waiting)
        assert not w.gate.is_set() and w.workers[0].history[-1].role == "assistant"
        last = first[-1][0]
        rest: list[Any] = []
        async with anyio.create_task_group() as group:

            async def reconnect() -> None:
                if adapter is VercelAIAdapter:
                    rest.append(await w.read("GET", w.stream_url(key), headers=_after(last)))
                else:
                    rest.append(await w.read("POST", w.url, json=body, headers=_after(last)))

            group.start_soon(reconnect)
            w.gate.set()  # the run went on without a reader; now let it finish
        status, events = rest[0]
        _, replay = await w.read("GET", w.stream_url(key))
    assert status == 200
    assert first + events == replay  # nothing lost, nothing twice
    assert all(ident for ident, _ in replay)
    assert end in events[-1][1] or end in events[-2][1]  # Vercel ends with [DONE]
    assert w.workers[0].history[-1].text == "Sunny in Oslo."
    assert len(w.workers) == 1  # the reconnect started no second run


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_after_the_end_a_reconnect_replays_the_kept_log(adapter: Any) -> None:
    body, key, _, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        w.gate.set()
        status, events = await w.read("POST", w.url, json=body)
        assert status == 200
        assert await w.read("GET", w.stream_url(key)) == (200, events)
        after_last = await w.read("GET", w.stream_url(key), headers=_after(events[-1][0]))
        assert after_last == (200, [])
        assert await w.read("GET", w.stream_url(key), headers=_after(events[2][0])) == (
            200,
            events[3:],
        )


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_unknown_chats_and_ids_are_refused(adapter: Any) -> None:
    body, key, _, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        assert await w.read("GET", w.stream_url("nobody")) == (204, [])
        w.gate.set()
        status, events = await w.read("POST", w.url, json=body)
        ident = events[1][0]
        token, _, number = ident.rpartition("-")
        for wrong in (f"other-{number}", f"{token}-999", f"{token}-x", "garbage"):
            response = await w.http.get(w.stream_url(key), headers=_after(wrong))
            assert response.status_code == 404, wrong
        stranger = {**body, "threadId": "t9", "runId": "r9", "id": "c9"}
        response = await w.http.post(w.url, json=stranger, headers=_after(ident))
        assert response.status_code == 404
    assert status == 200
    assert len(w.workers) == 1  # neither refused request started a run


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_two_readers_read_the_same_events(adapter: Any) -> None:
    body, key, waiting, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        first = await w.until(body, waiting)
        bodies: list[Any] = []
        async with anyio.create_task_group() as group:
            for _ in range(2):
                group.start_soon(_collect, w, key, bodies)
            w.gate.set()
    [(status_a, a), (status_b, b)] = bodies
    assert status_a == status_b == 200
    assert a == b
    assert a[: len(first)] == first


async def _collect(w: World, key: str, into: list[Any]) -> None:
    into.append(await w.read("GET", w.stream_url(key)))


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_an_explicit_stop_cancels_the_run_and_ends_every_reader(adapter: Any) -> None:
    body, key, waiting, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        await w.until(body, waiting)
        readers: list[Any] = []
        stops: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(_collect, w, key, readers)
            with anyio.fail_after(10):
                stops.append(await w.http.delete(w.stream_url(key)))
        with anyio.fail_after(10):
            await w.app.finished.wait()
        again = await w.http.delete(w.stream_url(key))
        tasks = run_tasks()
    [stop] = stops
    assert (stop.status_code, stop.json()) == (200, {"stopped": True})
    assert (again.status_code, again.json()) == (404, {"stopped": False})
    [(status, events)] = readers
    assert status == 200
    last = [json.loads(d) for _, d in events if d != "[DONE]"][-1]
    if adapter is VercelAIAdapter:
        assert last == {"type": "abort", "reason": "stopped"}
        assert events[-1][1] == "[DONE]"
    else:
        assert last == {"type": "RUN_ERROR", "message": "the run was stopped", "code": "Stopped"}
    assert tasks == []
    assert not w.gate.is_set()
    assert w.workers[0].history[-1].text != "Sunny in Oslo."


async def test_a_new_message_of_the_chat_stops_its_older_run() -> None:
    async with world(VercelAIAdapter, runs=2) as w:
        await w.until(VERCEL, "tool-input-available")
        old = w.adapter.streams.get(chat_key("", "c1"))
        w.gate.set()
        status, events = await w.read("POST", w.url, json=VERCEL)
    assert old.done
    assert status == 200
    assert json.loads(events[-2][1])["type"] == "finish"


async def test_the_log_is_bounded_and_a_reconnect_to_dropped_events_is_told_so() -> None:
    streams = ResumableStreams(max_events=4, max_bytes=1 << 20)
    async with world(VercelAIAdapter, resumable=streams) as w:
        w.gate.set()
        await w.read("POST", w.url, json=VERCEL)  # may end early: this reader fell behind
        with anyio.fail_after(10):
            await w.app.finished.wait()
        log = streams.get(chat_key("", "c1"))
        assert log is not None and log.done
        gone = await w.http.get(w.stream_url("c1"))
        dropped = await w.http.get(
            w.stream_url("c1"), headers=_after(f"{log.token}-{log.first - 2}")
        )
        status, tail = await w.read(
            "GET", w.stream_url("c1"), headers=_after(f"{log.token}-{log.first - 1}")
        )
    assert log.first > 0 and len(log) == 4
    assert (gone.status_code, dropped.status_code) == (410, 410)
    assert status == 200
    assert [i for i, _ in tail] == [f"{log.token}-{log.first + n}" for n in range(4)]
    assert tail[-1][1] == "[DONE]"


async def test_a_log_keeps_its_bytes_bound() -> None:
    streams = ResumableStreams(max_bytes=400)
    async with world(VercelAIAdapter, resumable=streams) as w:
        w.gate.set()
        await w.read("POST", w.url, json=VERCEL)
        log = streams.get(chat_key("", "c1"))
    assert log is not None and 0 < log.size <= 400


async def test_a_log_counts_the_bytes_it_sends_as_it_keeps_and_drops_events() -> None:
    # Sizes are worked out again when an event is dropped: UTF-8 bytes, not characters.
    streams = ResumableStreams(max_events=3)
    log = streams.open("k", "r")
    texts = ['data: {"delta":"plain"}\n\n', 'data: {"delta":"é✓😀"}\n\n'] * 3
    for n, text in enumerate(texts):
        log.append(text)
        kept = [f"id: {log.token}-{i}\n{t}" for i, t in enumerate(texts[: n + 1])][-3:]
        assert log.size == sum(len(k.encode()) for k in kept)
        assert log.texts() == texts[: n + 1][-3:]
    assert log.first == 3


async def test_a_finished_run_expires() -> None:
    now = [0.0]
    streams = ResumableStreams(keep_seconds=60, clock=lambda: now[0])
    async with world(VercelAIAdapter, resumable=streams) as w:
        w.gate.set()
        await w.read("POST", w.url, json=VERCEL)
        now[0] = 59.0
        kept = await w.http.get(w.stream_url("c1"))
        now[0] = 61.0
        expired = await w.http.get(w.stream_url("c1"))
    assert kept.status_code == 200
    assert expired.status_code == 204
    assert len(streams) == 0


async def test_finished_logs_past_max_runs_go_oldest_first() -> None:
    streams = ResumableStreams(max_runs=1)
    async with world(VercelAIAdapter, runs=2, resumable=streams) as w:
        w.gate.set()
        await w.read("POST", w.url, json=VERCEL)
        await w.read("POST", w.url, json={**VERCEL, "id": "c2"})
        first = await w.http.get(w.stream_url("c1"))
        second = await w.http.get(w.stream_url("c2"))
    assert (first.status_code, second.status_code) == (204, 200)


async def test_the_ai_clients_resume_stream_reads_the_run_the_network_cut_off(
    node_modules: Path,
) -> None:
    plan = [
        {"send": "Weather in Oslo?", "dropAfter": "tool-input-available"},
        {"resume": True},
        {"resumeChat": "nobody"},
    ]
    async with world(VercelAIAdapter) as w:
        outs: list[dict[str, Any]] = []
        async with anyio.create_task_group() as group:
            group.start_soon(_consume, node_modules, w.url, plan, outs)
            with anyio.fail_after(30):
                await w.app.closed.wait()  # the network dropped the answer mid-run
            w.gate.set()
    [out] = outs
    assert out["drops"] == ["chat: network error"]
    assert out["status"] == "ready"
    assert messages_from_ui(out["messages"]) == w.workers[0].history
    assert w.workers[0].history[-1].text == "Sunny in Oslo."
    assert [p["type"] for p in out["messages"][1]["parts"]].count("tool-weather") == 1
    replayed = [c["type"] for c in out["chunks"]]  # the GET's, each checked by the schema
    assert (replayed[0], replayed[-1], replayed.count("start")) == ("start", "finish", 1)
    assert len(out["requests"]) == 1  # one POST; the rest came by resumeStream's GET
    assert messages_from_ui(out["assembled"]) == w.workers[0].history[1:]
    assert out["others"] == [{"status": "ready", "messages": []}]  # 204: nothing to resume
    assert len(w.workers) == 1


async def test_an_approval_round_trip_works_the_same_on_a_resumable_adapter(
    node_modules: Path,
) -> None:
    plan = [{"send": "Book Kyoto if sunny"}, {"approve": True}]
    script = booking("Booked.")
    async with consumed(
        CONSUMERS["vercel"], node_modules, "gemini", script, plan, resumable=True
    ) as run:
        out, _, factory, adapter = run
    assert messages_from_ui(out["messages"]) == factory.workers[1].history
    assert out["messages"][1]["parts"][-1]["text"] == "Booked."
    assert len(adapter.store) == 0


async def _consume(node_modules: Path, url: str, plan: Any, into: list[Any]) -> None:
    into.append(await CONSUMERS["vercel"].consume(node_modules, url, plan))


async def test_web_app_routes_the_reconnect_and_the_stop_to_a_resumable_adapter() -> None:
    from llm_worker.ui._serve import make_adapter, web_app

    async with scripted("anthropic", list(SCRIPT)) as (_, factory):
        adapter = make_adapter(factory, "vercel", resumable=True)
        async with serve(web_app(adapter)) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                response = await http.post(f"{url}/api/chat", json=VERCEL)
                replay = await http.get(f"{url}/api/chat/c1/stream")
                unknown = await http.get(f"{url}/api/chat/c2/stream")
                stop = await http.delete(f"{url}/api/chat/c1/stream")
    assert response.status_code == 200
    assert parse(replay.text) == parse(response.text)
    assert (unknown.status_code, stop.status_code) == (204, 404)  # c1 had finished


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_events"):
        ResumableStreams(max_events=0)


def _after(ident: str) -> dict[str, str]:
    return {"last-event-id": ident}
