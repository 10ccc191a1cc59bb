"""What a Worker is configured with, shared by its runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message, Request, ThinkingConfig, ToolChoice
from llm_worker.timeline import Timeline
from llm_worker.worker._assembler import DEFAULT_MAX_ARGUMENTS
from llm_worker.worker._hookset import HookSet

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore, OutputPolicy
    from llm_worker.collectors import ToolCall
    from llm_worker.guardrails import Guardrail
    from llm_worker.limits import Limits
    from llm_worker.providers._base import LLMClient
    from llm_worker.sessions import Session
    from llm_worker.tools import ErrorFormatter, ToolRegistry, ToolResult
    from llm_worker.worker._context import Compactor
    from llm_worker.worker._intercept import Interceptor
    from llm_worker.worker._output import OutputPlan
    from llm_worker.worker._turn import StreamRetry

__all__ = ("WorkerConfig", "check_limits")


@dataclass(slots=True)
class WorkerConfig:
    """The Worker's settings and registrations; a run reads them, never copies them."""

    client: LLMClient
    registry: ToolRegistry
    policy: OutputPolicy | None  # with the registry: `build_registry` makes both
    stream_retry: StreamRetry
    timeline: Timeline = field(default_factory=Timeline)
    system: str | None = None
    max_requests: int = 50
    max_continuations: int = 3
    max_tokens: int | None = None
    temperature: float | None = None
    thinking: ThinkingConfig | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stop_sequences: list[str] = field(default_factory=lambda: [])
    options: dict[str, Any] = field(default_factory=lambda: {})
    early_tool_start: bool = False
    max_tool_arguments: int = DEFAULT_MAX_ARGUMENTS
    format_tool_error: ErrorFormatter | None = None
    blob_store: BlobStore | None = None
    inspect_name: str | None = None
    hooks: HookSet = field(default_factory=HookSet)
    text_complete: list[Callable[[str], object]] = field(default_factory=lambda: [])
    call_complete: list[Callable[[ToolCall], object]] = field(default_factory=lambda: [])
    sinks: list[Callable[[Any], None]] = field(default_factory=lambda: [])
    interceptors: list[Interceptor] = field(default_factory=lambda: [])
    """Wrappers of each run, request and tool call (tracing, durable runs), outermost first."""
    output: OutputPlan | None = None
    """The structured output asked for and checked (`Worker(output_type=...)`), if any."""
    path: tuple[str, ...] = ()
    """Where this Worker's runs sit in a run tree (`ToolContext.path` of their calls)."""
    context: Compactor | None = None
    """The `ContextPolicy` at work on each request (`Worker(context=...)`), if any."""
    guardrails: list[Guardrail] = field(default_factory=lambda: [])
    """Input and output guardrails (`Worker(guardrails=...)`), in order."""
    prompt_cache: bool = True
    """Ask for prompt caching (`Request.prompt_cache`) and report cache misses."""
    limits: Limits | None = None
    """The budget every run is charged to (`Worker(limits=...)`), if any."""
    session: Session | None = None
    """Where the conversation is kept (`Worker(session=...)`), if anywhere."""

    def __post_init__(self) -> None:
        check_limits(self.max_requests, self.max_continuations, self.max_tool_arguments)
        if self.inspect_name is None and self.blob_store is not None:
            from llm_worker.blobs import InspectTool

            # The built-in inspect tool the blob store brought, under the name it was given.
            builtin = (t.name for t in self.registry if isinstance(t, InspectTool))
            self.inspect_name = next(builtin, None)

    def build_request(self, messages: list[Message]) -> Request:
        """The request for the current history."""
        return Request(
            messages,
            system=self.system,
            tools=self.registry.specs(),
            tool_choice=self.tool_choice,
            parallel_tool_calls=self.parallel_tool_calls,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            stop_sequences=list(self.stop_sequences),
            thinking=self.thinking,
            options=dict(self.options),
            output_schema=self.output.schema
            if self.output is not None and self.output.mode == "native"
            else None,
        )

    async def store_output(self, result: ToolResult) -> ToolResult:
        """Keep a large output in the blob store; the result then carries its summary."""
        if result.is_error or (self.blob_store is None and result.output is None):
            return result
        from llm_worker.blobs import InspectTool, OutputPolicy, externalize

        if isinstance(self.registry.get(result.name), InspectTool):
            return result  # what inspect returns is bounded: storing it again would loop
        # Without a store, a ToolOutput the tool returned is still rendered inline here.
        source = result.output if result.output is not None else result.content
        policy = self.policy or OutputPolicy()
        output = await externalize(source, self.blob_store, policy, inspect=self.inspect_name)
        result.output = output
        result.content = output.text
        return result


def check_limits(requests: int, continuations: int, tool_arguments: int) -> None:
    """Refuse limits a run could never work within.

    Raises:
        ConfigurationError: `max_requests` or `max_tool_arguments` below 1, or
            `max_continuations` below 0.
    """
    if requests < 1 or continuations < 0 or tool_arguments < 1:
        raise ConfigurationError(
            "max_requests and max_tool_arguments must be >= 1, max_continuations >= 0"
        )
