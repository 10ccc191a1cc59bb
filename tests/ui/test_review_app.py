"""Review probes of the request core, the error text and resumable runs (both protocols)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.errors import ConfigurationError
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, ResumableStreams, VercelAIAdapter, messages_from_ui
from llm_worker.ui._auth import chat_key
from llm_worker.ui._resumable import RunLog
from llm_worker.ui._store import MemoryPauseStore

from .conftest import CONSUMERS, PROVIDERS, booking, consumed, scripted, serve
from .test_errors import BODIES, SECRET, leaky
from .test_resumable import AGUI, PROTOCOLS, VERCEL, world
from .test_review_adapters import chunks
from .test_review_hooks import JsonStore

pytestmark = pytest.mark.anyio

ADAPTERS = [VercelAIAdapter, AGUIAdapter]


def failing_factory(exc: Exception) -> Any:
    def make(body: Any) -> Worker:
        raise exc

    return make


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("kind", [ValueError, TypeError, ConfigurationError, RuntimeError])
async def test_a_failing_worker_factory_shows_no_internals(adapter: Any, kind: Any) -> None:
    app = adapter(failing_factory(kind(f"cannot open {SECRET}")))
    async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(10):
            response = await http.post(url, json=BODIES[adapter])
    assert response.status_code >= 500
    assert "hunter2" not in response.text
    assert "/srv/app" not in response.text


@tool(effect="read_only")
def lookup_db(city: str) -> str:
    """Looks a city up in the database."""
    raise RuntimeError(f"cannot reach {SECRET} for {city}")


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_tools_exception_text_reaches_the_browser_only_as_the_model_reads_it(
    adapter: Any,
) -> None:
    # A failed call's error result is part of the conversation the browser keeps and sends
    # back, so the browser shows exactly what the model read: `Worker(format_tool_error=)`
    # decides it for both (masking only the browser's copy would break the round trip).
    script = [
        ScriptedResponse([TextPart("Checking."), ToolUsePart("", "lookup_db", {"city": "Oslo"})]),
        ScriptedResponse.text("Sorry."),
    ]
    async with scripted("anthropic", script) as (_, factory):

        def make() -> Worker:
            return Worker(
                factory.client,
                tools=[lookup_db],
                format_tool_error=lambda exc, call: f"{call.name} failed",
            )

        app = adapter(make)
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                response = await http.post(url, json=BODIES[adapter])
    assert "Sorry." in response.text
    assert "lookup_db failed" in response.text
    assert "hunter2" not in response.text


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("number", ["\u00b2", "9" * 5000, "-1", " 1"])
async def test_a_hostile_last_event_id_is_refused_not_a_server_error(
    adapter: Any, number: str
) -> None:
    body, key, _, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        w.gate.set()
        status, events = await w.read("POST", w.url, json=body)
        token = events[0][0].rpartition("-")[0]
        with anyio.fail_after(10):
            hostile = {b"last-event-id": f"{token}-{number}".encode("latin-1")}
            response = await w.http.get(w.stream_url(key), headers=hostile)
    assert status == 200
    assert response.status_code == 404


class SlowClose(Worker):
    """A Worker whose closing waits for `gate` (a client whose pool closes slowly)."""

    gate: anyio.Event
    closing: anyio.Event

    async def aclose(self) -> None:
        self.closing.set()
        await self.gate.wait()
        await super().aclose()


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_stop_while_the_ended_run_closes_adds_nothing_after_its_end(adapter: Any) -> None:
    body, key, _, _ = PROTOCOLS[adapter]
    gate, closing = anyio.Event(), anyio.Event()
    async with scripted("anthropic", [ScriptedResponse.text("Hi.")]) as (_, factory):

        def make() -> Worker:
            worker = SlowClose(factory.client)
            worker.gate, worker.closing = gate, closing
            return worker

        app = adapter(make, resumable=True)
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                async with http.stream("POST", url, json=body) as response:
                    await closing.wait()  # every event was sent; the Worker is closing
                    stop = await http.delete(f"{url}/{key}/stream")
                    gate.set()
                    first = await response.aread()
                replay = await http.get(f"{url}/{key}/stream")
    ends = [c["type"] for c in chunks(replay.text)][-1:]
    assert ends == (["finish"] if adapter is VercelAIAdapter else ["RUN_FINISHED"])
    assert replay.text.endswith("data: [DONE]\n\n") == (adapter is VercelAIAdapter)
    assert first.decode() == replay.text
    assert stop.status_code in (200, 404)  # the run had not closed yet: "stopped" is moot


async def test_chat_requests_without_an_id_do_not_stop_each_other() -> None:
    anonymous = {k: v for k, v in VERCEL.items() if k != "id"}
    async with world(VercelAIAdapter, runs=2) as w:
        seen: list[str] = []

        async def post(started: anyio.Event) -> None:
            async with w.http.stream("POST", w.url, json=anonymous) as response:
                text = ""
                async for piece in response.aiter_text():
                    text += piece
                    if '"type":"start"' in text:
                        started.set()
                seen.append(text)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for _ in range(2):
                    started = anyio.Event()
                    group.start_soon(post, started)
                    await started.wait()  # each run began (and was kept, if it was)
                w.gate.set()
    assert len(seen) == 2
    for text in seen:
        assert '"type":"abort"' not in text
        assert "Sunny in Oslo." in "".join(c.get("delta", "") for c in chunks(text))


@pytest.mark.parametrize("run_id", ["r1", "r2"])
async def test_an_ag_ui_resume_reusing_the_paused_runs_id_resumes_it_on_a_resumable_adapter(
    run_id: str,
) -> None:
    store = MemoryPauseStore()
    async with scripted("anthropic", booking("Booked.")) as (_, factory):
        app = AGUIAdapter(factory, store=store, resumable=True)
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                first = await http.post(url, json=AGUI)
                [end] = [c for c in chunks(first.text) if c["type"] == "RUN_FINISHED"]
                [interrupt] = end["outcome"]["interrupts"]
                answer = {"interruptId": interrupt["id"], "status": "resolved"}
                resume = [{**answer, "payload": {"approved": True}}]
                second = await http.post(url, json={**AGUI, "runId": run_id, "resume": resume})
                replay = await http.get(f"{url}/t1/stream")
    texts = [c["delta"] for c in chunks(second.text) if c["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(texts) == "Booked."
    assert replay.text == second.text  # the kept log is the resumed run's
    assert len(factory.workers) == 2
    assert len(store) == 0


async def test_a_20k_delta_run_reaches_its_connected_reader_whole_and_its_log_stays_bounded() -> (
    None
):
    text = "".join(chr(0x41 + i % 26) for i in range(20_000))
    streams = ResumableStreams()
    script = [ScriptedResponse.text(text, chunk_size=1)]
    async with scripted("anthropic", script) as (_, factory):
        app = VercelAIAdapter(factory, resumable=streams)
        async with serve(app) as url, httpx.AsyncClient(timeout=30) as http:
            with anyio.fail_after(60):
                response = await http.post(url, json=VERCEL)
                replay = await http.get(f"{url}/c1/stream")
    deltas = [c["delta"] for c in chunks(response.text) if c["type"] == "text-delta"]
    assert "".join(deltas) == text
    assert response.text.endswith("data: [DONE]\n\n")
    log = streams.get(chat_key("", "c1"))
    assert log is not None and len(log) == streams.max_events and log.size <= streams.max_bytes
    assert replay.status_code == 410  # the start was dropped: a replay from it is refused


async def test_finished_logs_past_the_total_byte_budget_go_oldest_first() -> None:
    streams = ResumableStreams()
    async with world(VercelAIAdapter, runs=2, resumable=streams) as w:
        w.gate.set()
        await w.read("POST", w.url, json=VERCEL)
        one = streams.get(chat_key("", "c1"))
        assert one is not None
        streams.max_total_bytes = one.size * 3 // 2  # room for one run's log, not two
        await w.read("POST", w.url, json={**VERCEL, "id": "c2"})
        first = await w.http.get(w.stream_url("c1"))
        second = await w.http.get(w.stream_url("c2"))
    assert (first.status_code, second.status_code) == (204, 200)


def gated_book(gate: anyio.Event, entered: anyio.Event) -> Any:
    @tool(requires_approval=True)
    async def book(city: str) -> str:
        """Book a trip (a person approves each call; answers once the test opens the gate)."""
        entered.set()
        await gate.wait()
        return f"booked {city}"

    return book


@dataclass
class Booking:
    """A served adapter whose model calls `book` (approval first, then held), then answers."""

    server: Any
    url: str
    http: httpx.AsyncClient
    gate: anyio.Event  # opens the held book call
    entered: anyio.Event  # set when book runs


@asynccontextmanager
async def booking_site(
    adapter: Any, answer: str, provider: str = "anthropic", **options: Any
) -> AsyncIterator[Booking]:
    gate, entered = anyio.Event(), anyio.Event()
    pause = ScriptedResponse([TextPart("Booking."), ToolUsePart("", "book", {"city": "Kyoto"})])
    async with scripted(provider, [pause, ScriptedResponse.text(answer)]) as (server, factory):
        app = adapter(lambda: Worker(factory.client, tools=[gated_book(gate, entered)]), **options)
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                yield Booking(server, url, http, gate, entered)


@pytest.mark.parametrize("resumable", [False, True])
async def test_a_resumed_run_cut_off_in_its_tool_leaves_the_chat_usable(resumable: bool) -> None:
    async with booking_site(VercelAIAdapter, "Hello again.", resumable=resumable) as b:
        first = await b.http.post(b.url, json=VERCEL)
        resume = answer_of(VercelAIAdapter, first.text)(1)
        async with b.http.stream("POST", b.url, json=resume):
            await b.entered.wait()
            if resumable:
                await b.http.delete(f"{b.url}/c1/stream")
        # the browser stopped (or the stop call): the part stays approval-responded
        user = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Hi?"}]}
        after = await b.http.post(b.url, json={**resume, "messages": [*resume["messages"], user]})
        sent = json.loads(b.server.requests[-1].body)
    blocks = [b for m in sent["messages"] for b in m["content"] if isinstance(b, dict)]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    assert uses == [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    errors = [c for c in chunks(after.text) if c["type"] == "error"]
    assert errors == []
    assert "Hello again." in "".join(c.get("delta", "") for c in chunks(after.text))


@contextmanager
def _held(base_url: str) -> Iterator[None]:
    # Bound and not listening: a connection to the port is refused, and the port is not free
    # for another server to listen on (SO_REUSEADDR: the closed server's connections may still
    # be in TIME_WAIT on it).
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", urlsplit(base_url).port or 80))
        yield


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("resumable", [False, True])
async def test_an_unreachable_provider_shows_a_fixed_sentence_and_no_address(
    adapter: Any, provider: str, resumable: bool
) -> None:
    from llm_worker.providers._http import RetryPolicy

    async with ScriptedModelServer(provider, []) as model:
        client = model.client(api_key="sk-secret-key-1234", retry=RetryPolicy.disabled())
        base_url = model.base_url
    # the model server is gone: connecting to its port is refused — while this socket holds
    # the port (bound, not listening), so no other test's server can take it meanwhile (one
    # did under load: the request reached it and came back a 422)
    body = {**BODIES[adapter], "id": "c1"}
    with _held(base_url):
        async with client:
            app = adapter(lambda: Worker(client), resumable=resumable)
            async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
                with anyio.fail_after(10):
                    response = await http.post(url, json=body)
    text = response.text
    assert "could not be reached" in text
    assert "sk-secret" not in text and "127.0.0.1" not in text


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_hooks_exception_is_masked_on_a_resumable_run_and_its_replay(adapter: Any) -> None:
    body, key, _, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        w.adapter.worker_factory = leaky(w.adapter.worker_factory)
        status, events = await w.read("POST", w.url, json=body)
        replay = await w.read("GET", w.stream_url(key))
    assert status == 200
    assert replay == (200, events)
    text = "\n".join(d for _, d in events)
    assert "hunter2" not in text and "An error occurred." in text


@pytest.mark.parametrize("chat_id", ["чат 🚀", "a%41b", "100%"])
@pytest.mark.parametrize("routed", [False, True])
async def test_a_chat_id_of_any_text_reconnects_to_its_own_run(chat_id: str, routed: bool) -> None:
    from urllib.parse import quote

    from llm_worker.ui._serve import web_app

    async with scripted("anthropic", [ScriptedResponse.text("Hi.")] * 2) as (_, factory):
        adapter = VercelAIAdapter(factory, resumable=True)
        app = web_app(adapter) if routed else adapter
        async with serve(app) as root, httpx.AsyncClient(timeout=10) as http:
            url = f"{root}/api/chat" if routed else root
            with anyio.fail_after(10):
                first = await http.post(url, json={**VERCEL, "id": chat_id})
                await http.post(url, json={**VERCEL, "id": "other"})
                replay = await http.get(f"{url}/{quote(chat_id, safe='')}/stream")
    assert replay.status_code == 200
    assert replay.text == first.text


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_reader_the_bounds_left_behind_is_told_so_not_cut_off_mid_answer(
    adapter: Any,
) -> None:
    log = RunLog("c1", "r1", max_events=2, max_bytes=1 << 20)
    reader = log.read(0, adapter.behind)  # a reader still at the first event
    for n in range(5):
        log.append(f"data: {n}\n\n")
    log.close(0.0)
    got = [text async for text in reader]
    assert log.first == 3
    last = [c for c in chunks("".join(got))][-1]
    assert last["type"] in ("error", "RUN_ERROR")
    assert "fell too far behind" in last.get("errorText", last.get("message", ""))


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_reconnect_to_an_adapter_that_keeps_no_runs_finds_nothing_to_resume(
    adapter: Any,
) -> None:
    from llm_worker.ui._serve import web_app

    async with scripted("anthropic", []) as (_, factory):
        app = web_app(adapter(factory))
        async with serve(app) as root, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                resume = await http.get(f"{root}/api/chat/c1/stream")
                stop = await http.delete(f"{root}/api/chat/c1/stream")
    assert resume.status_code == 204  # what the ai client's resumeStream() reads as "none"
    assert (stop.status_code, stop.json()) == (404, {"stopped": False})


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_disconnect_in_a_tool_call_of_the_default_adapter_leaves_no_task(
    adapter: Any,
) -> None:
    from .test_http import run_tasks

    body, _, waiting, _ = PROTOCOLS[adapter]
    async with world(adapter, runs=2, resumable=False) as w:
        await w.until(body, waiting)  # the run waits in its tool; the browser goes away
        with anyio.fail_after(10):
            await w.app.finished.wait()  # the ASGI call returned: the run was cancelled
        tasks = run_tasks()
        [worker] = w.workers
        w.gate.set()
        status, events = await w.read("POST", w.url, json=body)  # the chat goes on
    assert tasks == []
    uses = [u.id for m in worker.history for u in m.tool_uses]
    assert uses == [r.tool_use_id for m in worker.history for r in m.tool_results]
    assert status == 200 and "Sunny in Oslo." in "".join(d for _, d in events)


HOSTILE: list[Any] = [
    [],
    "text",
    None,
    {"id": 5, "threadId": ["t"], "runId": {}, "messages": "x"},
    {"id": "c1", "threadId": "t1", "runId": "r1", "messages": [{"role": "user"}]},
    {"id": "c1", "threadId": "t1", "runId": "r1", "messages": [], "resume": "yes"},
    {"id": "c1", "threadId": "t1", "runId": "r1", "messages": [7, None, "u"]},
    {"id": "\u0000" * 1000, "threadId": "\ud7ff", "runId": "x", "messages": [[[[]]]]},
    {"id": "c1", "threadId": "t1", "runId": "r1", "resume": [{"interruptId": "x" * 100_000}]},
]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
async def test_a_hostile_body_gets_a_client_error_or_a_whole_answer(
    adapter: Any, body: Any
) -> None:
    async with world(adapter) as w:
        w.gate.set()
        with anyio.fail_after(10):
            response = await w.http.post(w.url, json=body)
            nested = await w.http.post(w.url, content=b"[" * 100_000 + b"]" * 100_000)
    assert 400 <= nested.status_code < 500
    assert response.status_code < 500, response.text
    if response.status_code == 200:  # an AG-UI input with no usable message still runs
        last = chunks(response.text)[-1]["type"]
        assert last in ("finish", "error", "RUN_FINISHED", "RUN_ERROR"), response.text
    else:
        assert len(w.workers) == 0


async def test_the_ai_clients_resume_stream_after_an_approvals_answer_was_cut_off(
    node_modules: Path,
) -> None:
    plan = [
        {"send": "Book Kyoto if sunny"},
        {"approve": True, "dropAfter": "tool-output-available"},
        {"resume": True},
    ]
    async with consumed(
        CONSUMERS["vercel"], node_modules, "gemini", booking("Booked."), plan, resumable=True
    ) as run:
        out, _, factory, _ = run
    assert out["drops"] == ["chat: network error"]
    assert messages_from_ui(out["messages"]) == factory.workers[1].history
    assert out["messages"][1]["parts"][-1]["text"] == "Booked."


async def test_an_ag_ui_resume_cut_off_in_its_tool_leaves_the_thread_usable() -> None:
    store = JsonStore()
    options = {"store": store, "resumable": True}
    async with booking_site(AGUIAdapter, "Hello again.", "openai_responses", **options) as b:
        first = await b.http.post(b.url, json=AGUI)
        [snapshot] = [c for c in chunks(first.text) if c["type"] == "MESSAGES_SNAPSHOT"]
        body = {**answer_of(AGUIAdapter, first.text)(1), "messages": snapshot["messages"]}
        async with b.http.stream("POST", b.url, json=body):
            await b.entered.wait()
            stop = await b.http.delete(f"{b.url}/t1/stream")
        user = {"id": "u2", "role": "user", "content": "Hi?"}
        again = {**AGUI, "runId": "r3", "messages": [*snapshot["messages"], user]}
        after = await b.http.post(b.url, json=again)
        sent = json.loads(b.server.requests[-1].body)
    assert stop.json() == {"stopped": True}
    calls = [i["call_id"] for i in sent["input"] if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in sent["input"] if i.get("type") == "function_call_output"]
    assert calls == outputs  # the cut-off call is answered in the history the provider gets
    assert [c for c in chunks(after.text) if c["type"] == "RUN_ERROR"] == []
    texts = [c["delta"] for c in chunks(after.text) if c["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(texts) == "Hello again."
    assert store.saved == {}


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_double_submitted_answer_does_not_stop_the_resumed_run(adapter: Any) -> None:
    async with booking_site(adapter, "Booked.", resumable=True) as b:
        first = await b.http.post(b.url, json=BODIES_KEPT[adapter])
        answer = answer_of(adapter, first.text)
        async with b.http.stream("POST", b.url, json=answer(1)) as running:
            await b.entered.wait()  # the approved call runs
            twice = await b.http.post(b.url, json=answer(2))  # the same answer again
            b.gate.set()
            text = (await running.aread()).decode()
    assert "no paused run waits" in twice.text
    assert "Booked." in text
    assert '"abort"' not in text and '"Stopped"' not in text


BODIES_KEPT: dict[Any, dict[str, Any]] = {VercelAIAdapter: VERCEL, AGUIAdapter: AGUI}


def answer_of(adapter: Any, text: str) -> Any:
    """The body approving the first turn's paused call (`n` numbers an AG-UI run)."""
    if adapter is AGUIAdapter:
        [end] = [c for c in chunks(text) if c["type"] == "RUN_FINISHED"]
        interrupt = end["outcome"]["interrupts"][0]["id"]
        resume = [{"interruptId": interrupt, "status": "resolved", "payload": {"approved": True}}]
        return lambda n: {**AGUI, "runId": f"r{n + 1}", "resume": resume}
    [ask] = [c for c in chunks(text) if c["type"] == "tool-approval-request"]
    part = {
        "type": "tool-book",
        "toolCallId": ask["toolCallId"],
        "state": "approval-responded",
        "input": {"city": "Kyoto"},
        "approval": {"id": ask["approvalId"], "approved": True},
    }
    [start] = [c["messageId"] for c in chunks(text) if c["type"] == "start"]
    assistant = {"id": start, "role": "assistant", "parts": [part]}
    body = {**VERCEL, "messages": [VERCEL["messages"][0], assistant], "messageId": start}
    return lambda n: body


async def test_an_answer_carrying_more_events_than_the_log_keeps_streams_its_run_whole() -> None:
    streams = ResumableStreams()
    async with booking_site(VercelAIAdapter, "Booked.", resumable=streams) as b:
        first = await b.http.post(b.url, json=VERCEL)
        paused = streams.get(chat_key("", "c1"))
        assert paused is not None
        streams.max_events = len(paused) - 3  # the carried events overflow the next log
        b.gate.set()
        second = await b.http.post(b.url, json=answer_of(VercelAIAdapter, first.text)(1))
    kinds = [c["type"] for c in chunks(second.text)]
    assert kinds[0] == "start" and kinds[-1] == "finish"
    assert "Booked." in "".join(c.get("delta", "") for c in chunks(second.text))


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_worker_cancel_in_a_tool_call_ends_a_resumable_run_and_its_readers(
    adapter: Any,
) -> None:
    body, key, waiting, _ = PROTOCOLS[adapter]
    async with world(adapter) as w:
        await w.until(body, waiting)  # the browser left; the run waits in its tool
        readers: list[Any] = []
        async with anyio.create_task_group() as group:
            group.start_soon(_read_stream, w, key, readers)
            w.workers[0].cancel()  # the application cancels the run itself
        with anyio.fail_after(10):
            await w.app.finished.wait()
    [(status, events)] = readers
    kinds = [json.loads(d)["type"] for _, d in events if d != "[DONE]"]
    assert status == 200
    assert kinds[-1] in ("finish", "abort", "RUN_FINISHED", "RUN_ERROR"), kinds
    assert (events[-1][1] == "[DONE]") == (adapter is VercelAIAdapter)
    assert not w.gate.is_set()


async def _read_stream(w: Any, key: str, into: list[Any]) -> None:
    into.append(await w.read("GET", w.stream_url(key)))
