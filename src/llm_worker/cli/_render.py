"""Live terminal rendering of a Worker's events with rich.

Text as it streams, thinking dimmed, tool calls with their arguments as they stream, a spinner
while the model is awaited or tools run (on a terminal only), each tool result (a stored
output's summary marked as such), and the usage at the end of each turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from llm_worker.blobs import StoredOutput
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    InputJsonDelta,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.state import (
    RunCompleted,
    RunEvent,
    RunResult,
    RunStatus,
    ToolCallComplete,
    ToolResultReady,
    TurnStarted,
)
from llm_worker.tools import ToolResult

__all__ = ("Renderer", "usage_line")

_MAX_RESULT_LINES = 14
_MAX_LINE = 160


class Renderer:
    """Prints a run's events as they arrive; call it with every event of `Worker.stream`.

    Args:
        console: Where the answer's text goes.
        info: Where everything else goes (thinking, tool calls, results, usage); `console`
            unless given — `llm-worker run` sends it to stderr so stdout holds only the answer.
    """

    def __init__(self, console: Console, *, info: Console | None = None) -> None:
        self.console = console
        self.info = info or console
        self._line_open: Console | None = None  # the console whose cursor is mid-line
        self._status: Status | None = None
        self._calls = 0  # tool calls of the current answer, not run yet
        self._error: str | None = None  # a stream error not yet followed by a retry or failure
        self._spinning = ""  # the spinner's text, kept while a question hides it
        self.answer_rendered = asyncio.Event()
        """Set once the current answer's last event is on screen (cleared when the next
        request starts): a hook that prints waits for it, so that its lines come after the
        answer's — the Worker runs hooks while `Worker.stream` hands the events over."""
        self._routes: dict[type, Callable[[Any], None]] = {
            BlockStart: self._start,
            BlockDelta: self._delta,
            BlockStop: self._stop,
            BlockAbort: self._abort,
            StatusEvent: self._status_event,
            ErrorEvent: self._error_event,
            ToolCallComplete: self._call_complete,
            ToolResultReady: self._result,
            RunCompleted: self._completed,
            TurnStarted: self._turn_started,
        }

    def __call__(self, event: RunEvent) -> None:
        """Render one event (the ones without a visible form are passed over)."""
        route = self._routes.get(type(event))
        if route is not None:
            route(event)

    # -- output helpers ------------------------------------------------------------------

    def _write(self, console: Console, text: str, style: str | None = None) -> None:
        """Write streamed text without a line break (markup-free, so `[` stays `[`)."""
        self.stop_spinner()
        if self._line_open is not None and self._line_open is not console:
            self._end_line()
        console.print(text, end="", style=style, markup=False, highlight=False, soft_wrap=True)
        self._line_open = None if text.endswith("\n") else console

    def _end_line(self) -> None:
        if self._line_open is not None:
            self._line_open.print()
            self._line_open = None

    def line(self, markup: str) -> None:
        """Print one line of rich markup on the info console, after any open line."""
        self._end_line()
        self.info.print(markup, highlight=False)

    def spin(self, text: str) -> None:
        """Show a spinner (terminal only) until the next streamed output."""
        if not self.info.is_terminal:
            return
        self._spinning = text
        if self._status is None:
            self._end_line()
            self._status = self.info.status(text, spinner="dots")
            self._status.start()
        else:
            self._status.update(text)

    def stop_spinner(self) -> None:
        """Remove the spinner (before writing a partial line or asking a question)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def resume_spinner(self) -> None:
        """Show again the spinner `stop_spinner` removed (after a question was answered)."""
        if self._spinning:
            self.spin(self._spinning)

    # -- events --------------------------------------------------------------------------

    def _turn_started(self, _event: TurnStarted) -> None:
        self.spin("waiting for the model…")

    def _start(self, event: BlockStart) -> None:
        self._end_line()
        if event.block_type is BlockType.THINKING:
            self._write(self.info, "thinking: ", "dim")
        elif isinstance(event.metadata, ToolUseMetadata):
            self._write(self.info, f"→ {event.metadata.name} ", "bold cyan")

    def _delta(self, event: BlockDelta) -> None:
        delta = event.delta
        if isinstance(delta, TextDelta):
            self._write(self.console, delta.text)
        elif isinstance(delta, ThinkingDelta):
            self._write(self.info, delta.text, "dim italic")
        elif isinstance(delta, InputJsonDelta):
            self._write(self.info, delta.partial_json, "cyan")

    def _stop(self, _event: BlockStop) -> None:
        self._end_line()

    def _abort(self, event: BlockAbort) -> None:
        self._write(self.info, f" [{event.reason}]", "yellow")
        self._end_line()

    def _status_event(self, event: StatusEvent) -> None:
        if event.status is ResponseStatus.STARTED:
            self.answer_rendered.clear()
            if self._error is not None:
                self.line(
                    f"[yellow]↻ the answer broke off ({escape(self._error)}); asking again[/]"
                )
                self._error = None
            return
        if event.status is ResponseStatus.COMPLETED and self._calls:
            self.spin(f"running {self._calls} tool call{'s' if self._calls > 1 else ''}…")
        self.answer_rendered.set()

    def _error_event(self, event: ErrorEvent) -> None:
        # Shown only if the request is retried; a failure that ends the run is reported once,
        # by the command, from the exception.
        self._end_line()
        self._error = event.message

    def _call_complete(self, _event: ToolCallComplete) -> None:
        self._calls += 1

    def _result(self, event: ToolResultReady) -> None:
        self._calls = 0
        self._spinning = ""
        self.stop_spinner()
        result = event.result
        self.line(_result_header(result))
        for text in _clip(result.content):
            self.info.print(f"  │ {escape(text)}", style="dim", highlight=False, soft_wrap=True)
        for part in result.media:  # shown as what it is; its bytes go to the model only
            shown = f"  │ [{part.type}: {part.media_type or part.url}]"
            self.info.print(escape(shown), style="dim", highlight=False, soft_wrap=True)

    def _completed(self, event: RunCompleted) -> None:
        self._spinning = ""
        self.stop_spinner()
        result = event.result
        if result.status is RunStatus.CANCELLED:
            self.line(f"[yellow](turn cancelled{_reason(result)})[/]")
        elif result.status is RunStatus.PAUSED:
            self.line(f"[yellow](paused{_reason(result)})[/]")
        self.line(f"[dim]{usage_line(result)}[/]")


def _result_header(result: ToolResult) -> str:
    name = escape(result.name)
    if result.is_error:
        return f"[red]← {name} failed[/]"
    if isinstance(result.output, StoredOutput):
        return f"[green]← {name}[/] [dim](large: stored as a blob; the model sees this summary)[/]"
    return f"[green]← {name}[/]"


def _clip(text: str) -> list[str]:
    """At most `_MAX_RESULT_LINES` lines of at most `_MAX_LINE` characters, marked if cut."""
    lines = text.splitlines() or [""]
    shown = [ln if len(ln) <= _MAX_LINE else ln[:_MAX_LINE] + "…" for ln in lines]
    if len(shown) > _MAX_RESULT_LINES:
        more = len(shown) - _MAX_RESULT_LINES
        shown = [*shown[:_MAX_RESULT_LINES], f"… ({more} more lines)"]
    return shown


def _reason(result: RunResult) -> str:
    # The reason of a plain `Worker.cancel()` (Ctrl-C) says nothing the user does not know.
    if not result.reason or result.reason.startswith("cancelled by worker.cancel"):
        return ""
    return f": {escape(result.reason)}"


def usage_line(result: RunResult) -> str:
    """`usage: 3 requests · input 3546 tokens (2528 cached) · output 201 tokens · cost $0.01`."""
    usage: UsageEvent = result.usage
    cached = usage.cache_read_input_tokens
    parts = [
        f"{result.requests} request{'s' if result.requests != 1 else ''}",
        f"input {usage.input_tokens or 0} tokens" + (f" ({cached} cached)" if cached else ""),
        f"output {usage.output_tokens or 0} tokens",
    ]
    if usage.reasoning_tokens:
        parts.append(f"reasoning {usage.reasoning_tokens} tokens")
    cost = cost_text(result)
    if cost is not None:
        parts.append(cost)
    return "usage: " + " · ".join(parts)


def cost_text(result: RunResult) -> str | None:
    """`cost $0.01011`, `cost unknown` (a model without a price), or None (no `cost` extra)."""
    from llm_worker.errors import MissingExtraError

    try:
        cost = result.cost
    except MissingExtraError:
        return None  # the extra is optional: the line shows what it can
    return "cost unknown" if cost is None else f"cost ${float(cost):.4g}"
