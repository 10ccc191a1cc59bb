"""The activities of a run on Temporal: one model request, one tool call.

Both run outside the workflow, in whichever process of the name's task queue takes them,
with the Worker registered there under the run's name. They heartbeat while they run, so
Temporal sees a killed process within `heartbeat` seconds and hands the step to another
(a request made again; a tool call again only when it is read-only or idempotent: the
workflow gives any other tool one attempt). Every error they raise is final for Temporal
(`non_retryable`): the library's own retries (HTTP, stream) have run inside.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from temporalio import activity
from temporalio.exceptions import ApplicationError

import llm_worker.tools._messages as say
from llm_worker._log import logger
from llm_worker.collectors import ToolCall
from llm_worker.durable._errors import PayloadTooLargeError
from llm_worker.durable._records import answer_record, tool_record
from llm_worker.durable._serializer import error_record
from llm_worker.durable.temporal._registry import Served, served
from llm_worker.errors import APITimeoutError
from llm_worker.messages import Request
from llm_worker.tools import ToolResult, execute_call
from llm_worker.worker._turn import Run

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from llm_worker.worker._assembler import Assembler
    from llm_worker.worker._config import WorkerConfig

__all__ = (
    "REQUEST",
    "TOOL",
    "check_size",
    "failure",
    "request_activity",
    "request_from",
    "tool_activity",
    "warm_up",
)

REQUEST = "llm-worker.request"
"""The activity type of a model request."""
TOOL = "llm-worker.tool"
"""The activity type of a tool call."""
_log = logger("llm_worker.durable")
T = TypeVar("T")


@cache
def _request_adapter() -> TypeAdapter[Request]:
    from pydantic import TypeAdapter

    return TypeAdapter(Request)


def warm_up() -> None:
    """Build the request's validator now, before this process takes a step.

    Built at a first request, it held the event loop for seconds on a busy machine (pydantic
    builds its schema): the step's heartbeat stopped meanwhile, Temporal took the process for
    dead and made the request again beside the first (a run's first answer asked twice).
    """
    _request_adapter()


def request_record(request: Request) -> dict[str, Any]:
    """A request as JSON data (the request activity's argument)."""
    return _request_adapter().dump_python(request, mode="json")


def request_from(data: object) -> Request:
    """The request `request_record` made."""
    return _request_adapter().validate_python(data)


def failure(exc: BaseException) -> ApplicationError:
    """`exc` as a final Temporal failure carrying its record (rebuilt by `result()`)."""
    return ApplicationError(
        f"{type(exc).__name__}: {exc}",
        error_record(exc),
        type=type(exc).__name__,
        non_retryable=True,
    )


async def _beating(seconds: float, work: Callable[[], Awaitable[T]]) -> T:
    """`work()`, heartbeating every third of `seconds` while it runs."""
    result: list[T] = []

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await anyio.sleep(seconds / 3)

    failed: list[Exception] = []
    async with anyio.create_task_group() as group:
        group.start_soon(beat)
        try:
            result.append(await work())
        except Exception as exc:  # raised here, anyio would wrap it in an ExceptionGroup
            failed.append(exc)
        group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return result[0]


def _config(name: str) -> WorkerConfig:
    parent = served(name).worker
    cfg = parent._cfg  # pyright: ignore[reportPrivateUsage]
    return replace(cfg, early_tool_start=False)  # the calls are activities of their own


@activity.defn(name=REQUEST)
async def request_activity(args: dict[str, Any]) -> dict[str, Any]:
    """Make one model request; return its assembled answer (never a delta)."""
    name = str(args["name"])
    entry = served(name)
    try:
        run = Run(_config(name), [])
        request = request_from(args["request"])
        answer = await _beating(entry.heartbeat, lambda: _within(entry, run, request))
        record = answer_record(answer)
        check_size(record, f"the answer to request {args['number']}", entry.payload_limit)
    except Exception as exc:
        raise failure(exc) from exc
    return record


async def _within(entry: Served, run: Run, request: Request) -> Assembler:
    """The request's attempts, cut at `request_timeout` with a final error.

    Timed out by Temporal instead, the attempt was made again (ten times, each cut at the
    timeout): a request whose stream had started, sent again.
    """
    try:
        with anyio.fail_after(entry.request_timeout):
            return await run._attempts(request)  # pyright: ignore[reportPrivateUsage]
    except TimeoutError:
        raise APITimeoutError(
            f"the model request took over the TemporalWorker's request_timeout "
            f"({entry.request_timeout} s)"
        ) from None


@activity.defn(name=TOOL)
async def tool_activity(args: dict[str, Any]) -> dict[str, Any]:
    """Run one tool call (its output kept by the blob store); return its result."""
    name = str(args["name"])
    entry = served(name)
    try:
        cfg = _config(name)
        given = args["call"]
        call = ToolCall(str(given["id"]), str(given["name"]), dict(given["input"]))
        result = await _beating(entry.heartbeat, lambda: _execute(cfg, call))
        record = tool_record(result)
        try:
            check_size(record, f"the output of tool {call.name!r}", entry.payload_limit)
        except PayloadTooLargeError as exc:  # the tool ran: the model reads why it has nothing
            record = tool_record(ToolResult.error(call.id, str(exc), name=call.name))
    except Exception as exc:
        raise failure(exc) from exc
    return record


async def _execute(cfg: WorkerConfig, call: ToolCall) -> ToolResult:
    """The call run and its output stored, as the Worker runs one (`Batch._execute`)."""
    tool = cfg.registry.get(call.name)
    result = await execute_call(
        tool, call, available=cfg.registry.names, format_error=cfg.format_tool_error
    )
    try:
        return await cfg.store_output(result)
    except Exception as exc:  # the tool ran: say so, rather than fail the run
        _log.warning("the output of call %s could not be stored", call.id, exc_info=exc)
        message = say.not_stored(result.name, len(result.content), exc)
        return ToolResult(
            result.tool_use_id, result.name, message, is_error=True, input=result.input
        )


def check_size(record: object, what: str, limit: int) -> None:
    """Raise `PayloadTooLargeError` when `record` as JSON is over `limit` bytes.

    The server refuses a larger payload in a command (an activity's arguments, a memo): the
    workflow task then fails again and again and the run never ends.
    """
    size = len(json.dumps(record).encode())
    if size > limit:
        raise PayloadTooLargeError(what=what, size=size, limit=limit)
