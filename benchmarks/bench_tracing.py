"""What tracing costs: a Worker with `instrument=` on against the same Worker with it off.

Run: `uv run python benchmarks/bench_tracing.py`

Tracing on uses the OpenTelemetry SDK with a SimpleSpanProcessor into an in-memory exporter
and an in-memory metric reader: the library's own cost plus the SDK's, without any network.
Both sides run `ScriptedClient` scripts, so no I/O enters either. Reported per request (turns
of N text-only requests) and per tool call (one request making K calls, minus a request).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.messages import Part
from llm_worker.otel import Instrumentation
from llm_worker.testing import ScriptedClient, ScriptedResponse

REQUESTS = 20
CALLS = 20


@tool
async def echo(n: int) -> int:
    """Echo a number."""
    return n


def instrumentation() -> tuple[Instrumentation, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    inst = Instrumentation(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return inst, exporter


def requests_script() -> list[Any]:
    # REQUESTS answers: each but the last asks for one more turn through a no-op tool call.
    call: list[Part] = [ToolUsePart("", "echo", {"n": 1})]
    asks = [ScriptedResponse(list(call)) for _ in range(REQUESTS - 1)]
    return [*asks, ScriptedResponse.text("ok")]


def calls_script() -> list[Any]:
    calls: list[Part] = [ToolUsePart("", "echo", {"n": i}) for i in range(CALLS)]
    return [ScriptedResponse(calls), ScriptedResponse.text("done")]


async def cpu_per_turn(make: Callable[[], Worker], rounds: int = 30) -> float:
    best = float("inf")
    for _ in range(5):
        workers = [make() for _ in range(rounds)]
        start = time.process_time()
        for worker in workers:
            await worker.run("go")
        best = min(best, (time.process_time() - start) / rounds)
    return best


async def main() -> None:
    inst, exporter = instrumentation()

    def plain(script: Callable[[], list[Any]]) -> Callable[[], Worker]:
        return lambda: Worker(ScriptedClient(script()), tools=[echo])

    def traced(script: Callable[[], list[Any]]) -> Callable[[], Worker]:
        return lambda: Worker(ScriptedClient(script()), tools=[echo], instrument=inst)

    off_req = await cpu_per_turn(plain(requests_script))
    on_req = await cpu_per_turn(traced(requests_script))
    exporter.clear()
    off_calls = await cpu_per_turn(plain(calls_script))
    on_calls = await cpu_per_turn(traced(calls_script))
    # The requests turn makes REQUESTS requests and REQUESTS - 1 tool calls; the calls turn
    # makes 2 requests and CALLS tool calls.
    per_request_and_call = (on_req - off_req) / REQUESTS
    per_call = ((on_calls - off_calls) - 2 * per_request_and_call) / CALLS
    per_request = per_request_and_call - per_call * (REQUESTS - 1) / REQUESTS
    print(
        f"{REQUESTS}-request turn: off {off_req * 1e3:.2f} ms, on {on_req * 1e3:.2f} ms; "
        f"{CALLS}-call turn: off {off_calls * 1e3:.2f} ms, on {on_calls * 1e3:.2f} ms"
    )
    print(
        f"tracing on (SDK, in-memory exporter): {per_request * 1e6:.0f} µs per request, "
        f"{per_call * 1e6:.0f} µs per tool call"
    )


if __name__ == "__main__":
    asyncio.run(main())
