"""Interceptors: code that wraps each run, model request and tool call of a Worker.

Integrations (tracing, durable execution) wrap the Worker's steps without editing its loop.
Each method gets the step's description and `proceed`, the step itself, and returns what
`proceed` returns: by awaiting it (tracing puts a span around it), or from a record of an
earlier execution without awaiting it (a durable run does not do a finished step again).
Interceptors nest in registration order: the first registered is the outermost.

The steps:

- `run`: one `Worker.run` / `resume` / `stream` call, its clean-up included; `proceed` returns
  the `RunResult` or raises what the run raises (`Aborted`, `HookError`, a provider error,
  the task's cancellation).
- `request`: one model request after the on_message_send hooks, its stream retries included;
  `proceed` streams it through the Timeline and returns the `Assembler` holding the answer.
  An interceptor that returns an Assembler of its own instead (a recorded answer) skips the
  stream: no event reaches the handlers, and the answer's calls are handed to the tool batch
  here, as streaming would have.
- `tool_call`: one allowed call's execution, after the before_tool_call hooks and before the
  after_tool_call hooks, the blob store included; `proceed` returns the `ToolResult`.
- `tool_not_run` (told, not wrapped): a call of the batch that was not executed, before the
  after_tool_call hooks see its result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.messages import Request
    from llm_worker.providers._base import LLMClient
    from llm_worker.state import PauseState, RunResult
    from llm_worker.tools import Tool, ToolResult
    from llm_worker.worker._assembler import Assembler

__all__ = ("Interceptor", "RequestStep", "RunStep", "ToolStep", "intercepted")

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class RunStep:
    """One run, as interceptors see it."""

    client: LLMClient
    resumed: PauseState | None
    """The pause this run goes on from (`Worker.resume`), else None."""


@dataclass(slots=True, frozen=True)
class RequestStep:
    """One model request, as interceptors see it."""

    client: LLMClient
    request: Request
    """The request as sent: after the on_message_send hooks."""
    number: int
    """1 for the run's first request, counting across a pause and its resume."""


@dataclass(slots=True, frozen=True)
class ToolStep:
    """One tool call's execution, as interceptors see it."""

    call: ToolCall
    """The call as the tool gets it: the before_tool_call hooks' edits applied."""
    tool: Tool | None
    """The registered tool (None for an unknown name: `proceed` returns an error result)."""
    request: int
    """The number of the request whose answer made the call."""


class Interceptor:
    """Wraps a Worker's steps; override the methods you need (each passes through here)."""

    async def run(self, step: RunStep, proceed: Callable[[], Awaitable[RunResult]]) -> RunResult:
        """Wrap one run."""
        return await proceed()

    async def request(
        self, step: RequestStep, proceed: Callable[[], Awaitable[Assembler]]
    ) -> Assembler:
        """Wrap one model request."""
        return await proceed()

    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """Wrap one tool call's execution."""
        return await proceed()

    def tool_not_run(self, step: ToolStep, outcome: str, result: ToolResult) -> None:
        """Told of a call that was not executed (not wrapped: there is nothing to run).

        `outcome` is `"skipped"` (a hook), `"denied"` (a decision) or `"not_run"` (a
        discarded pause); `result` is what the model reads.
        """


async def intercepted(
    interceptors: Sequence[Interceptor],
    method: str,
    step: Any,
    proceed: Callable[[], Awaitable[T]],
) -> T:
    """Run `proceed` inside every interceptor's `method`, the first registered outermost."""
    if not interceptors:
        return await proceed()
    inner: Callable[[], Awaitable[T]] = proceed
    for interceptor in reversed(interceptors):
        inner = _bind(getattr(interceptor, method), step, inner)
    return await inner()


def _bind(
    method: Callable[[Any, Callable[[], Awaitable[T]]], Awaitable[T]],
    step: Any,
    proceed: Callable[[], Awaitable[T]],
) -> Callable[[], Awaitable[T]]:
    return lambda: method(step, proceed)
