"""The steps of a durable run: each model request and each tool call is a DBOS step.

`DurableInterceptor` sits on the Worker's interceptor seam. Inside a durable run it records
each request's assembled answer (never its deltas) and each tool call's result; a recovered
run gets them back instead of asking the model or running the tool again. Outside a durable
run it passes every step through untouched.

A tool call leaves two records: "started", then its result. A recovered run that finds the
first without the second knows the call was running when its process died: it runs the call
again only when the tool is read-only or idempotent, and otherwise answers it with an error
result saying it was interrupted.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from llm_worker.durable._errors import RecordError
from llm_worker.durable._records import answer_from, answer_record, tool_from, tool_record
from llm_worker.errors import ConfigurationError
from llm_worker.messages import TextPart
from llm_worker.tools import ToolResult, tool_meta
from llm_worker.worker._intercept import Interceptor, RequestStep, ToolStep

if TYPE_CHECKING:
    from llm_worker.worker._assembler import Assembler

__all__ = ("PROGRESS", "Attempt", "DurableInterceptor", "current", "refuse_steps", "step")

T = TypeVar("T")

PROGRESS = "llm-worker.progress"
"""The DBOS stream key of a run's progress entries."""

_REPLAY_SAFE = frozenset({"read_only", "idempotent"})


@dataclass(slots=True)
class Attempt:
    """One execution of a durable run's workflow (a recovery is another one)."""

    run_id: str
    token: str
    """Unique to this execution: a "started" record holding another token was left by an
    earlier execution that died before the call finished."""
    engine: Any
    """The `dbos.DBOS` class."""
    lock: anyio.Lock
    """Tool steps one at a time: step records are matched by their order on replay."""


_current: ContextVar[Attempt | None] = ContextVar("llm_worker_durable_attempt", default=None)
_refused: ContextVar[str | None] = ContextVar("llm_worker_durable_step_refused", default=None)
"""Why `step()` may not run in this task (a Temporal workflow sets it), if it may not."""


def refuse_steps(why: str) -> None:
    """Make `step()` raise `ConfigurationError(why)` in this task and those it starts."""
    _refused.set(why)


def current() -> ContextVar[Attempt | None]:
    """The context variable holding the durable run this task belongs to, if any."""
    return _current


async def step(fn: Callable[[], Awaitable[T]] | Callable[[], T], *, name: str) -> T:
    """Run a hook's side effect as a durable step: once per run, its result recorded.

    Hooks run inside a durable run's workflow, again on recovery, so they must be
    deterministic. What is not (a clock, a random number, a call to another service) goes
    through `step`: the first execution runs `fn` and records what it returns; a recovered
    run gets the recorded value back without calling `fn`. Outside a durable run, `fn` is
    simply called. The value must be JSON data (it is stored as JSON, never pickled).

    Raises:
        ConfigurationError: Called in a run on Temporal, where a hook's side effect belongs
            in a tool (an activity): `fn` would run again, differently, on every replay.

    Args:
        fn: The side effect: a function or an async function of no argument.
        name: The step's name, the same on every execution (DBOS checks it on replay).
    """
    attempt = _current.get()
    refused = _refused.get()
    if refused is not None:  # calling fn here would replay differently: never silently
        raise ConfigurationError(refused)
    if attempt is None:
        value = fn()
        return await cast("Awaitable[T]", value) if inspect.isawaitable(value) else value
    result: T = await recorded(attempt, name, attempt.engine.run_step_async({"name": name}, fn))
    return result


async def recorded(attempt: Attempt, step: str, value: Awaitable[T]) -> T:
    """`await value` (a step), a refused record naming the run and step."""
    try:
        return await value
    except RecordError as exc:
        raise exc.at(attempt.run_id, step) from None


def _rebuilt(attempt: Attempt, step: str, build: Callable[[], T]) -> T:
    """A record's object, its wrong shape (a corrupted row) a `RecordError`."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, OverflowError, IndexError, AttributeError) as exc:
        raise RecordError(f"it is malformed ({exc!r})", run_id=attempt.run_id, step=step) from None


class DurableInterceptor(Interceptor):
    """Records each request's answer and each tool call's result as DBOS steps."""

    async def request(
        self, step: RequestStep, proceed: Callable[[], Awaitable[Assembler]]
    ) -> Assembler:
        """Make the request once per run; a recovered run gets the recorded answer."""
        attempt = _current.get()
        if attempt is None:
            return await proceed()
        live: list[Assembler] = []

        async def execute() -> dict[str, Any]:
            answer = await proceed()
            live.append(answer)
            return answer_record(answer)

        options = {"name": f"llm-worker request {step.number}"}
        record = await recorded(
            attempt, options["name"], attempt.engine.run_step_async(options, execute)
        )
        answer = (
            live[0] if live else _rebuilt(attempt, options["name"], lambda: answer_from(record))
        )
        text = "".join(p.text for p in answer.parts if isinstance(p, TextPart))
        calls = [{"id": c.id, "name": c.name, "input": c.input} for c in answer.calls]
        entry = {"kind": "answer", "request": step.number, "text": text, "calls": calls}
        await attempt.engine.write_stream_async(PROGRESS, entry)
        return answer

    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """Run the call once per run; one interrupted by a crash runs again only if safe."""
        attempt = _current.get()
        if attempt is None or step.tool is None:
            return await proceed()  # an unknown tool's error result is the same every time
        name = f"llm-worker tool {step.call.name} {step.call.id}"
        safe = tool_meta(step.tool).effect in _REPLAY_SAFE
        async with attempt.lock:
            token = attempt.token
            started = await recorded(
                attempt,
                f"{name} started",
                attempt.engine.run_step_async({"name": f"{name} started"}, _echo(token)),
            )
            live: list[ToolResult] = []

            async def execute() -> dict[str, Any]:
                if started != token and not safe:
                    return tool_record(interrupted(step))
                result = await proceed()
                live.append(result)
                return tool_record(result)

            record = await recorded(
                attempt, name, attempt.engine.run_step_async({"name": name}, execute)
            )
            result = live[0] if live else _rebuilt(attempt, name, lambda: tool_from(record))
            entry = {
                "kind": "tool_result",
                "request": step.request,
                "id": step.call.id,
                "name": step.call.name,
                "content": result.content,
                "error": result.is_error,
            }
            await attempt.engine.write_stream_async(PROGRESS, entry)
        return result


def _echo(token: str) -> Callable[[], Awaitable[str]]:
    async def started() -> str:
        return token

    return started


def interrupted(step: ToolStep) -> ToolResult:
    """The error result of a side-effecting call its process died running."""
    name = step.call.name
    return ToolResult.error(
        step.call.id,
        f"The call to {name} was interrupted: the process running it stopped before it "
        f"finished. It was not run again because {name} is neither read-only nor idempotent, "
        "so it may or may not have taken effect: check before calling it again.",
        name=name,
    )
