"""Inside a run's workflow: each model request and each tool call is an activity.

`TemporalInterceptor` sits on the Worker's interceptor seam, as DBOS's does. Inside a
Temporal run it sends the request (as sent, after the on_message_send hooks) or the call (as
the before_tool_call hooks left it) to an activity and rebuilds the answer or the result from
what the activity returned; on replay Temporal returns the recorded value without running the
activity. Outside a Temporal run it passes every step through untouched.

Retries: a request is made again only when its process died (its heartbeat stopped); any
error it raised is final, the library's own retries having run inside the activity. A tool
call of a read-only or idempotent tool is retried likewise; any other tool's call gets one
attempt, and a call whose process died gets an error result saying it was interrupted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from llm_worker.durable._records import answer_from, tool_from
from llm_worker.durable._serializer import error_from
from llm_worker.durable._steps import interrupted
from llm_worker.durable.temporal._activities import REQUEST, TOOL, check_size, request_record
from llm_worker.messages import TextPart
from llm_worker.tools import ToolResult, tool_meta
from llm_worker.worker._intercept import Interceptor, RequestStep, ToolStep

if TYPE_CHECKING:
    from llm_worker.durable.temporal._registry import Served
    from llm_worker.worker._assembler import Assembler

__all__ = ("TemporalInterceptor", "TemporalRun", "current", "raised")

_REPLAY_SAFE = frozenset({"read_only", "idempotent"})
_RETRIES = 10  # attempts of a step whose process keeps dying, before the run fails


@dataclass(slots=True)
class TemporalRun:
    """The run a workflow task is running: its name, options and progress."""

    name: str
    served: Served
    progress: list[dict[str, Any]] = field(default_factory=lambda: [])
    """One entry per finished step, as `follow()` reads them."""


_current: ContextVar[TemporalRun | None] = ContextVar("llm_worker_temporal_run", default=None)


def current() -> ContextVar[TemporalRun | None]:
    """The context variable holding the Temporal run this task belongs to, if any."""
    return _current


def _options(run: TemporalRun, timeout: float, attempts: int) -> dict[str, Any]:
    # The activity cuts itself at `timeout` with a final error; Temporal's own timeout (a
    # retry) is for a process that stalled past it.
    return {
        "start_to_close_timeout": timedelta(seconds=timeout + run.served.heartbeat),
        "heartbeat_timeout": timedelta(seconds=run.served.heartbeat),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=0.5), maximum_attempts=attempts
        ),
    }


async def _activity(name: str, args: dict[str, Any], options: dict[str, Any]) -> Any:
    """The activity's result; a cancellation asks Temporal to cancel it and returns at once.

    Shielded: the activity's own cancellation resolves in a later workflow task, and until
    then anyio would deliver its cancellation again at every turn of the loop, never
    letting the workflow task end (Temporal's deadlock detector fails it).
    """
    handle = workflow.start_activity(name, args, **options)
    try:
        return await asyncio.shield(handle)
    except asyncio.CancelledError:
        handle.cancel()
        raise


class TemporalInterceptor(Interceptor):
    """Makes each request and each tool call of a Temporal run an activity."""

    async def request(
        self, step: RequestStep, proceed: Callable[[], Awaitable[Assembler]]
    ) -> Assembler:
        """The request, made by an activity once per run (again only after a crash)."""
        run = _current.get()
        if run is None:
            return await proceed()
        args = {"name": run.name, "request": request_record(step.request), "number": step.number}
        # The request goes into the history whole: tool outputs each under the limit can
        # together be over it (kept in the blob store, each is a summary).
        check_size(args, f"request {step.number} (the conversation sent)", run.served.payload_limit)
        options = _options(run, run.served.request_timeout, _RETRIES)
        try:
            record = await _activity(REQUEST, args, options)
        except ActivityError as exc:  # the run fails as a plain run would
            raise raised(exc) from None
        answer = answer_from(record)
        text = "".join(p.text for p in answer.parts if isinstance(p, TextPart))
        calls = [{"id": c.id, "name": c.name, "input": c.input} for c in answer.calls]
        run.progress.append(
            {"kind": "answer", "request": step.number, "text": text, "calls": calls}
        )
        return answer

    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """The call, run by an activity: a side-effecting tool's at most once."""
        run = _current.get()
        if run is None or step.tool is None:
            return await proceed()  # an unknown tool's error result is the same every time
        safe = tool_meta(step.tool).effect in _REPLAY_SAFE
        call = {"id": step.call.id, "name": step.call.name, "input": step.call.input}
        args = {"name": run.name, "call": call, "request": step.request}
        options = _options(run, run.served.tool_timeout, _RETRIES if safe else 1)
        try:
            result = tool_from(await _activity(TOOL, args, options))
        except ActivityError as exc:
            if not isinstance(exc.cause, TimeoutError):
                raise
            result = interrupted(step)  # its process died running it: maybe it took effect
        run.progress.append(
            {
                "kind": "tool_result",
                "request": step.request,
                "id": step.call.id,
                "name": step.call.name,
                "content": result.content,
                "error": result.is_error,
            }
        )
        return result


def raised(exc: ActivityError) -> BaseException:
    """What the activity raised, rebuilt from its failure's record (else the failure)."""
    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.details:
        return error_from(cause.details[0])
    return exc
