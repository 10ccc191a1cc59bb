"""An OpenTelemetry SDK with in-memory exporters, and ways to read what they got."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_worker.otel import Instrumentation


@dataclass
class Telemetry:
    """One test's tracer and meter providers and what they exported."""

    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def instrumentation(self, *, capture_content: bool = False, **options: Any) -> Instrumentation:
        return Instrumentation(
            capture_content=capture_content,
            **options,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
        )

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span

    def points(self, metric: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        found: list[HistogramDataPoint] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found += [
                            p for p in m.data.data_points if isinstance(p, HistogramDataPoint)
                        ]
        return found


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def names(spans: Sequence[ReadableSpan]) -> list[str]:
    return [s.name for s in spans]
