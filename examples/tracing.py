"""OpenTelemetry traces and metrics of a Worker run, and what the run cost.

`Worker(..., instrument=True)` (with `llm-worker[otel]`) puts an `invoke_agent` span around the
run, a `chat {model}` span around each request and an `execute_tool {name}` span around each
tool call, by the GenAI semantic conventions, and records the token-usage, duration and
time-to-first-chunk histograms. The application brings the SDK and an exporter: here the
console exporter, one line per span as it ends (children end before their run). With
`llm-worker[cost]`, `result.cost` prices the run with the genai-prices table.

Run: `python examples/tracing.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import sys

import anyio
from _common import model
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.events import UsageEvent
from llm_worker.otel import Instrumentation
from llm_worker.testing import ScriptedResponse

SHOWN = (
    "gen_ai.operation.name",
    "gen_ai.agent.name",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.tool.call.id",
    "llm_worker.tool.outcome",
    "llm_worker.run.status",
)


def one_line(span: ReadableSpan) -> str:
    """The console exporter prints each span as JSON by default; one line reads better here."""
    attributes = span.attributes or {}
    shown = " ".join(f"{k.split('.', 1)[1]}={attributes[k]!r}" for k in SHOWN if k in attributes)
    indent = "" if span.parent is None else "  "
    return f"{indent}{span.name}: {shown}\n"


@tool(effect="read_only")
def get_weather(city: str) -> str:
    """Get the current weather of a city."""
    return f"Sunny, 21 °C in {city}"


SCRIPT = [
    ScriptedResponse(
        [ToolUsePart("call_1", "get_weather", {"city": "Kyoto"})],
        usage=UsageEvent(input_tokens=420, output_tokens=38, cache_read_input_tokens=300),
    ),
    ScriptedResponse.text(
        "It is sunny and 21 °C in Kyoto.", usage=UsageEvent(input_tokens=480, output_tokens=14)
    ),
]


async def main() -> None:
    tracer_provider = TracerProvider()
    console = ConsoleSpanExporter(out=sys.stdout, formatter=one_line)
    tracer_provider.add_span_processor(SimpleSpanProcessor(console))
    metrics = InMemoryMetricReader()
    tracing = Instrumentation(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[metrics])
    )
    async with model(SCRIPT, name="claude-sonnet-4-5") as (client, _):
        worker = Worker(client, tools=[get_weather], name="weather", instrument=tracing)
        result = await worker.run("What is the weather in Kyoto?")
    print(f"answer: {result.text}")
    data = metrics.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = list(metric.data.data_points)
                counts = sum(getattr(p, "count", 0) for p in points)
                print(f"metric {metric.name}: {counts} values")
    cost = result.cost
    print(f"cost: ${cost:.6f}" if cost is not None else "cost: unknown model")


if __name__ == "__main__":
    anyio.run(main)
