"""The Worker's keyword options as one TypedDict: the typed overloads of `Worker(...)` share it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore, OutputPolicy
    from llm_worker.guardrails import Guardrail
    from llm_worker.limits import Limits
    from llm_worker.messages import Message, ThinkingConfig, ToolChoice
    from llm_worker.otel import Instrumentation
    from llm_worker.sessions import Session
    from llm_worker.tools import ErrorFormatter, Tool, Toolset
    from llm_worker.worker._context_policy import ContextPolicy
    from llm_worker.worker._output import OutputMode
    from llm_worker.worker._turn import StreamRetry

__all__ = ("WorkerOptions",)


class WorkerOptions(TypedDict, total=False):
    """Every keyword of `Worker(...)` but `output_type` (see `Worker` for each)."""

    tools: Iterable[Tool | Toolset]
    system: str | None
    blob_store: BlobStore | None
    output_policy: OutputPolicy | None
    max_requests: int
    max_continuations: int
    max_tokens: int | None
    temperature: float | None
    thinking: ThinkingConfig | None
    tool_choice: ToolChoice | None
    parallel_tool_calls: bool | None
    stop_sequences: Sequence[str]
    options: Mapping[str, Any] | None
    early_tool_start: bool
    stream_retry: StreamRetry | None
    history: Iterable[Message]
    max_tool_arguments: int
    format_tool_error: ErrorFormatter | None
    inspect_tool_name: str
    output_mode: OutputMode
    name: str | None
    instrument: bool | Instrumentation | None
    output_retries: int
    output_tool_name: str
    output_partial_interval: float
    context: ContextPolicy | None
    guardrails: Iterable[Guardrail]
    prompt_cache: bool
    limits: Limits | None
    session: Session | None
