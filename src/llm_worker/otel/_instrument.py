"""The interceptor that traces a Worker: one span per run, request and tool call, and metrics."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

import llm_worker._retries as retries
import llm_worker.otel._names as n
from llm_worker._extras import require_extra
from llm_worker.errors import ConfigurationError
from llm_worker.events import BlockDelta, BlockStart
from llm_worker.messages import Origin
from llm_worker.otel._content import captured
from llm_worker.otel._exceptions import exception_attributes
from llm_worker.otel._spans import (
    answered_by,
    error_type,
    request_attributes,
    response_attributes,
    tool_attributes,
    tool_result_attributes,
    usage_attributes,
)
from llm_worker.state import ContextCompacted, RunStatus

if TYPE_CHECKING:
    from llm_worker.state import PauseState, RunResult
    from llm_worker.tools import ToolResult
    from llm_worker.worker._assembler import Assembler
    from llm_worker.worker._intercept import RequestStep, RunStep, ToolStep

__all__ = ("Instrumentation", "Traced")


@dataclass(slots=True)
class _Timing:
    start: float
    first: float | None = None


# The open request's timing, read by the event sink (same task: the stream runs in it).
_timing: ContextVar[_Timing | None] = ContextVar("llm_worker_otel_timing", default=None)


class Instrumentation:
    """What traces Workers: a tracer, the GenAI histograms, and whether content is recorded.

    Pass one to `Worker(instrument=...)` to choose the providers or content capture;
    `instrument=True` makes one with the global providers.

    Args:
        capture_content: Record prompts, answers, tool arguments and results on the spans,
            in the conventions' form. Off by default. API keys are never recorded.
        content_max_chars: With `capture_content`, the most characters each such attribute
            holds (16,384 by default): a longer one is cut, ends with
            `…[truncated: N chars]`, and `llm_worker.truncated.<attribute>` gives its length N.
        tracer_provider: The tracer provider (the global one when None).
        meter_provider: The meter provider (the global one when None).

    Raises:
        MissingExtraError: `llm-worker[otel]` (opentelemetry-api) is not installed.
        ConfigurationError: `content_max_chars` is not an int >= 64.
    """

    def __init__(
        self,
        *,
        capture_content: bool = False,
        content_max_chars: int = n.CONTENT_MAX_CHARS,
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        self.trace: Any = require_extra("opentelemetry.trace", "otel", feature="tracing")
        metrics: Any = require_extra("opentelemetry.metrics", "otel", feature="tracing")
        self.capture_content = capture_content
        self.content_max_chars = _content_cap(content_max_chars)
        from llm_worker.otel._propagation import propagator

        self.propagator = propagator()
        self.tracer = self.trace.get_tracer(
            "llm_worker", tracer_provider=tracer_provider, schema_url=n.SCHEMA_URL
        )
        meter = metrics.get_meter("llm_worker", meter_provider=meter_provider)
        self.tokens = meter.create_histogram(
            n.TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=n.TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            n.DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=n.SECOND_BUCKETS,
        )
        self.first_chunk = meter.create_histogram(
            n.FIRST_CHUNK,
            unit="s",
            description="Time to receive the first chunk of the response.",
            explicit_bucket_boundaries_advisory=n.SECOND_BUCKETS,
        )
        if _retry_event not in retries.listeners:
            retries.listeners.append(_retry_event)

    @property
    def content(self) -> int | None:
        """The cap on each captured content attribute, or `None` when content is not captured."""
        return self.content_max_chars if self.capture_content else None

    def for_worker(self, name: str | None) -> Traced:
        """The interceptor for one Worker (its name goes on its run spans)."""
        return Traced(self, name)


class Traced:
    """One Worker's tracing interceptor, its hook observer and its event sink.

    It has every method of `Interceptor` without deriving from it: the worker package imports
    this one (when tracing is on), so this one must not import the worker package back.
    """

    def __init__(self, inst: Instrumentation, name: str | None) -> None:
        self.inst = inst
        self.name = name

    async def run(self, step: RunStep, proceed: Callable[[], Awaitable[RunResult]]) -> RunResult:
        """Wrap one run in its `invoke_agent` span."""
        attributes: dict[str, Any] = {
            n.OPERATION: "invoke_agent",
            n.PROVIDER: n.provider_name(step.client.provider),
            n.REQUEST_MODEL: step.client.model,
        }
        if self.name:
            attributes[n.AGENT_NAME] = self.name
        links = self._links(step.resumed)
        span_name = f"invoke_agent {self.name}" if self.name else "invoke_agent"
        with self._span(span_name, attributes, links=links) as span:
            try:
                result = await proceed()
            except BaseException as exc:
                span.set_attribute(n.RUN_STATUS, "cancelled" if _cancelled(exc) else "failed")
                raise
            span.set_attribute(n.RUN_STATUS, result.status.value)
            span.set_attribute(n.RUN_REQUESTS, result.requests)
            span.set_attributes(usage_attributes(result.usage))
            if result.status is RunStatus.PAUSED and result.state is not None:
                result.state.trace_context = self._carrier(span)
            return result

    async def request(
        self, step: RequestStep, proceed: Callable[[], Awaitable[Assembler]]
    ) -> Assembler:
        """Wrap one model request in its `chat {model}` span; record its metrics."""
        inst = self.inst
        client = step.client
        attributes = request_attributes(client, step.request, inst.content)
        metric = {
            n.OPERATION: "chat",
            n.PROVIDER: attributes[n.PROVIDER],
            n.REQUEST_MODEL: client.model,
        }
        timing = _Timing(time.perf_counter())
        token = _timing.set(timing)
        with self._span(
            f"chat {client.model}", attributes, kind=inst.trace.SpanKind.CLIENT
        ) as span:
            try:
                answer = await proceed()
            except BaseException as exc:
                if not _cancelled(exc):
                    metric[n.ERROR_TYPE] = error_type(exc)
                self._timed(span, timing, metric)
                raise
            finally:
                _timing.reset(token)
            if answer.model:
                metric[n.RESPONSE_MODEL] = answer.model
            span.set_attributes(response_attributes(answer, inst.content))
            if answer.origin != Origin(client.provider, client.model):
                # A fallback client's later client answered: name it (and price by it).
                span.set_attributes(answered_by(answer))
                metric[n.RESPONSE_MODEL] = answer.model or answer.origin.model
            if answer.replayed:
                # A recovered durable run's recorded answer: no request was made, so nothing
                # to time and no tokens spent (the first execution counted them).
                span.set_attribute(n.REQUEST_REPLAYED, True)
                return answer
            self._timed(span, timing, metric)
            self._count(answer, metric)
            return answer

    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """Wrap one tool call's execution in its `execute_tool {name}` span."""
        inst = self.inst
        attributes = tool_attributes(step.call, step.tool, inst.content)
        with self._span(f"execute_tool {step.call.name}", attributes) as span:
            result = await proceed()
            span.set_attributes(tool_result_attributes(result, inst.content))
            if result.is_error:
                span.set_status(inst.trace.Status(inst.trace.StatusCode.ERROR))
            return result

    def tool_not_run(self, step: ToolStep, outcome: str, result: ToolResult) -> None:
        """A call that did not execute (skipped, denied, discarded): a span that says so."""
        inst = self.inst
        attributes = tool_attributes(step.call, step.tool, inst.content)
        attributes[n.TOOL_OUTCOME] = outcome
        if inst.content is not None:
            attributes |= captured(n.TOOL_RESULT, result.content, inst.content)
        with inst.tracer.start_as_current_span(
            f"execute_tool {step.call.name}", attributes=attributes
        ):
            pass

    def hook(self, point: str, name: str, result: object, error: BaseException | None) -> None:
        """A hook ran: an event on the span it ran in."""
        attributes: dict[str, Any] = {
            "llm_worker.hook.point": point,
            "llm_worker.hook.name": name,
            "llm_worker.hook.result": "None" if result is None else type(result).__name__,
        }
        if error is not None:
            attributes[n.ERROR_TYPE] = type(error).__name__
        self.inst.trace.get_current_span().add_event(n.HOOK_EVENT, attributes)

    def sink(self, event: object) -> None:
        """Every streamed event: the first content event times the first chunk.

        A context compaction becomes an event on the run's span.
        """
        timing = _timing.get()
        if (
            timing is not None
            and timing.first is None
            and isinstance(event, BlockDelta | BlockStart)
        ):
            timing.first = time.perf_counter()
        elif type(event) is ContextCompacted:
            self.inst.trace.get_current_span().add_event(n.COMPACTED_EVENT, _compacted(event))

    # -- helpers ---------------------------------------------------------------------------

    @contextmanager
    def _span(self, name: str, attributes: dict[str, Any], **options: Any) -> Generator[Any]:
        """A current span that an exception ends as failed (a cancellation is no failure)."""
        with self.inst.tracer.start_as_current_span(
            name,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
            **options,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                if not _cancelled(exc):
                    self._failed(span, exc)
                raise

    def _links(self, resumed: PauseState | None) -> list[Any]:
        if resumed is None or not resumed.trace_context:
            return []
        inst = self.inst
        context = inst.propagator.extract(resumed.trace_context)
        paused = inst.trace.get_current_span(context).get_span_context()
        if not paused.is_valid:
            return []
        return [inst.trace.Link(paused, {"llm_worker.link": "resumed_from"})]

    def _carrier(self, span: Any) -> dict[str, str]:
        carrier: dict[str, str] = {}
        context = self.inst.trace.set_span_in_context(span)
        self.inst.propagator.inject(carrier, context=context)
        return carrier

    def _failed(self, span: Any, exc: BaseException) -> None:
        trace = self.inst.trace
        span.set_attribute(n.ERROR_TYPE, error_type(exc))
        # The exception's message may quote content (a rejected answer): its type says enough.
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}"))
        span.add_event("exception", exception_attributes(exc, self.inst.content))

    def _timed(self, span: Any, timing: _Timing, metric: dict[str, Any]) -> None:
        inst = self.inst
        inst.duration.record(time.perf_counter() - timing.start, metric)
        if timing.first is not None:
            first = timing.first - timing.start
            span.set_attribute(n.TIME_TO_FIRST_CHUNK, first)
            inst.first_chunk.record(first, metric)

    def _count(self, answer: Assembler, metric: dict[str, Any]) -> None:
        usage = answer.usage
        for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            if count is not None:
                self.inst.tokens.record(count, metric | {n.TOKEN_TYPE: kind})


def _content_cap(chars: object) -> int:
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < n.CONTENT_MIN_CHARS:
        raise ConfigurationError(
            f"content_max_chars must be an int >= {n.CONTENT_MIN_CHARS}, not {chars!r}"
        )
    return chars


def _cancelled(exc: BaseException) -> bool:
    return isinstance(exc, anyio.get_cancelled_exc_class())


def _retry_event(retry: retries.Retry) -> None:
    trace: Any = require_extra("opentelemetry.trace", "otel", feature="tracing")
    attributes: dict[str, Any] = {
        "llm_worker.retry.kind": retry.kind,
        "llm_worker.retry.attempt": retry.attempt,
        "llm_worker.retry.wait": retry.wait,
        n.ERROR_TYPE: retry.error_type,
    }
    if retry.status is not None:
        attributes["http.response.status_code"] = retry.status
    trace.get_current_span().add_event(n.RETRY_EVENT, attributes)


def _compacted(event: ContextCompacted) -> dict[str, Any]:
    # Counts only: the summary is conversation content, never an attribute.
    return {
        "llm_worker.context.tokens_before": event.tokens_before,
        "llm_worker.context.tokens_after": event.tokens_after,
        "llm_worker.context.window_tokens": event.window_tokens,
        "llm_worker.context.stages": list(event.stages),
        "llm_worker.context.tool_results": event.tool_results,
        "llm_worker.context.thinking_parts": event.thinking_parts,
        "llm_worker.context.messages_replaced": event.messages_replaced,
    }
