"""Toolsets (sources of tools that change while a Worker runs) and progress reports of calls.

A [`Toolset`][] is an object the Worker accepts among its tools, whose tools it asks for
before each model request: an MCP server, whose list may change at any time, is one. A tool
reports progress with [`report_progress`][]; the Worker turns each report into a
`ToolProgress` event of `Worker.stream()`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from llm_worker.tools._tool import Tool

__all__ = (
    "ProgressSink",
    "Toolset",
    "calling",
    "current_progress",
    "report_progress",
    "reporting_progress",
)


@runtime_checkable
class Toolset(Protocol):
    """A source of tools whose list may change: give one to `Worker(tools=[...])`.

    The Worker calls `list_tools()` before each model request and offers the model what it
    returns then; keep it cheap when nothing changed (return the same list).
    """

    async def list_tools(self) -> Sequence[Tool]:
        """The tools as they are now."""
        ...


ProgressSink: TypeAlias = "Callable[[str, str, float, float | None, str | None], None]"
"""Receives `(tool_use_id, tool_name, progress, total, message)` for each report."""

_sink: ContextVar[ProgressSink | None] = ContextVar("llm_worker_progress_sink", default=None)
_call: ContextVar[tuple[str, str] | None] = ContextVar("llm_worker_tool_call", default=None)


@contextmanager
def reporting_progress(sink: ProgressSink) -> Generator[None]:
    """Send the progress reports of the calls run inside this block (and its tasks) to `sink`."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


@contextmanager
def calling(tool_use_id: str, name: str) -> Generator[None]:
    """Mark the code inside as running call `tool_use_id` of tool `name`."""
    token = _call.set((tool_use_id, name))
    try:
        yield
    finally:
        _call.reset(token)


def current_call() -> tuple[str, str] | None:
    """The `(tool_use_id, tool_name)` of the call whose code is running; `None` outside one."""
    return _call.get()


def current_progress() -> Callable[[float, float | None, str | None], None] | None:
    """A reporter bound to the running call, to use from another task; `None` outside one.

    A callback that runs in another task (an MCP session's reader) has lost the call's
    context: capture the reporter while the call runs and hand it over.
    """
    sink, call = _sink.get(), _call.get()
    if sink is None or call is None:
        return None
    tool_use_id, name = call

    def report(progress: float, total: float | None = None, message: str | None = None) -> None:
        sink(tool_use_id, name, progress, total, message)

    return report


def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Report how far the running tool call is: a `ToolProgress` event of `Worker.stream()`.

    Does nothing outside a Worker's tool call.

    Args:
        progress: How much is done (grows with each report).
        total: How much there is to do, when known.
        message: What is happening, for a person.
    """
    report = current_progress()
    if report is not None:
        report(progress, total, message)
