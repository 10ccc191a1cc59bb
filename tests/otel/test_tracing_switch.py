"""Turning tracing on and off: per Worker, globally, and without the extra installed."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import anyio
import pytest

import llm_worker
from llm_worker import Worker
from llm_worker.errors import MissingExtraError
from llm_worker.otel import instrument, uninstrument
from llm_worker.providers import AnthropicClient, RetryPolicy
from llm_worker.testing import ScriptedClient, ScriptedResponse, WireResponse, WireServer
from llm_worker.testing._wire_anthropic import encode
from support.telemetry import Telemetry
from test_public_api import run_and_print

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_global() -> Iterator[None]:
    yield
    uninstrument()


def registered(worker: Worker) -> tuple[int, int, int]:
    cfg = worker._cfg  # pyright: ignore[reportPrivateUsage]
    return len(cfg.interceptors), len(cfg.sinks), len(cfg.hooks.observers)


def test_off_registers_nothing_and_loads_no_opentelemetry() -> None:
    assert registered(Worker(ScriptedClient([]))) == (0, 0, 0)
    assert registered(Worker(ScriptedClient([]), instrument=False)) == (0, 0, 0)
    code = (
        "from llm_worker import Worker\n"
        "from llm_worker.testing import ScriptedClient, ScriptedResponse\n"
        "Worker(ScriptedClient([ScriptedResponse.text('a')])).run_sync('hi')"
    )
    loaded = run_and_print(code, "sorted(sys.modules)")
    assert [m for m in loaded if m.startswith("opentelemetry")] == []


def test_on_registers_one_interceptor_sink_and_hook_observer() -> None:
    t = Telemetry()
    assert registered(Worker(ScriptedClient([]), instrument=t.instrumentation())) == (1, 1, 1)
    assert registered(Worker(ScriptedClient([]), instrument=True)) == (1, 1, 1)


async def test_instrument_traces_every_worker_made_after_it(no_global: None) -> None:
    t = Telemetry()
    before = Worker(ScriptedClient([ScriptedResponse.text("a")]))
    inst = llm_worker.instrument(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider)
    assert inst is not None
    after = Worker(ScriptedClient([ScriptedResponse.text("b")]), name="helper")
    opted_out = Worker(ScriptedClient([ScriptedResponse.text("c")]), instrument=False)
    with anyio.fail_after(10):
        for worker in (before, after, opted_out):
            await worker.run("go")
    assert [s.name for s in t.spans()] == ["invoke_agent helper", "chat scripted"]
    uninstrument()
    assert registered(Worker(ScriptedClient([]))) == (0, 0, 0)


@pytest.mark.parametrize("module", ["opentelemetry.trace", "opentelemetry.metrics"])
def test_without_the_extra_tracing_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str, no_global: None
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as caught:
        Worker(ScriptedClient([]), instrument=True)
    assert caught.value.extra == "otel"
    with pytest.raises(MissingExtraError):
        instrument()


async def test_http_retries_are_events_on_the_one_request_span() -> None:
    t = Telemetry()
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    busy = WireResponse(body, status=529, content_type="application/json")
    answer = WireResponse(encode(ScriptedResponse.text("hi"), model="m"))
    async with WireServer([busy, answer]) as server:
        retry = RetryPolicy(initial_delay=0.0, jitter=0.0)
        client = AnthropicClient(model="m", api_key="k" * 20, base_url=server.base_url, retry=retry)
        async with client:
            worker = Worker(client, instrument=t.instrumentation())
            with anyio.fail_after(10):
                result = await worker.run("go")
    assert result.text == "hi"
    chat = t.one("chat m")  # one logical request: the retry is inside its span
    [event] = chat.events
    assert event.name == "llm_worker.retry"
    assert dict(event.attributes or {}) == {
        "llm_worker.retry.kind": "http",
        "llm_worker.retry.attempt": 1,
        "llm_worker.retry.wait": 0.0,
        "error.type": "overloaded_error",
        "http.response.status_code": 529,
    }
