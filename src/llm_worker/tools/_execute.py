"""`execute_call`: one call becomes one result, whatever happens.

Every failure — an unknown tool, arguments that are not JSON or do not validate, a
`ToolError`, any other exception, a timeout — becomes an `is_error` `ToolResult` with a message
the model can act on. Cancellation is never turned into a result: it propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeAlias

import anyio

import llm_worker.tools._messages as say
from llm_worker._log import logger
from llm_worker.errors import ToolError
from llm_worker.tools._context import ToolContext, running_with
from llm_worker.tools._result import ToolResult
from llm_worker.tools._text import as_output, json_text, split_media
from llm_worker.tools._tool import Tool, tool_meta
from llm_worker.tools._toolset import calling, current_progress

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall

__all__ = ("ErrorFormatter", "execute_call")

ErrorFormatter: TypeAlias = "Callable[[BaseException, ToolCall], str]"
"""Writes what the model reads when a tool raised: `(exception, call) -> text`."""

_log = logger("llm_worker")


async def execute_call(
    tool: Tool | None,
    call: ToolCall,
    *,
    available: Sequence[str] = (),
    format_error: ErrorFormatter | None = None,
    context: ToolContext | None = None,
) -> ToolResult:
    """Run one call and turn whatever happens into its result.

    The call's arguments are `call.input` (which before_tool_call hooks may have rewritten),
    sent to the tool as JSON text. Every failure becomes an `is_error` result that tells the
    model what to do: an unknown tool (the available names are listed), arguments that were
    not valid JSON (a bounded excerpt is quoted), arguments that do not validate (each bad
    field, what was expected), a `ToolError` (its message), any other exception
    (`<Type>: <message>`, bounded, never a traceback — or what `format_error` writes), a call
    past the tool's timeout.

    An exception the tool raised stays on the result (`ToolResult.exception`); one other than
    `ToolError` is also logged with its traceback on the `llm_worker` logger (level ERROR).

    Args:
        tool: The tool the call names, or `None` when no tool has that name.
        call: The call.
        available: The names of the tools that exist, for the unknown-tool message.
        format_error: Writes what the model reads when the tool raised an exception other
            than `ToolError`; if it raises in turn, the default text is used (and logged).
        context: What the run tells the call (usage, blob store, path); the call's id, name
            and progress reporter are filled in here. A tool reads it as a `ToolContext`
            parameter or through `current_tool_context()`.

    Raises:
        Cancellation (`CancelledError`) propagates; it is never made a result.
    """
    if tool is None:
        return _failed(call, say.unknown_tool(call.name, available))
    if call.error is not None:
        return _failed(call, say.unparsed_call(call.name, call.error, call.raw_input))
    try:
        return await _run(tool, call, context)
    except ToolError as exc:
        return _failed(call, say.tool_error(exc, call.name), exc)
    except Exception as exc:  # any failure of the tool is a result for the model
        _log.error("tool %r raised on call %s", call.name, call.id, exc_info=exc)
        return _failed(call, _describe(exc, call, format_error), exc)


def _describe(exc: Exception, call: ToolCall, format_error: ErrorFormatter | None) -> str:
    if format_error is None:
        return say.raised(exc)
    try:
        return format_error(exc, call)
    except Exception as failure:  # the application's formatter must not lose the result
        _log.error("format_tool_error raised on call %s", call.id, exc_info=failure)
        return say.raised(exc)


async def _run(tool: Tool, call: ToolCall, context: ToolContext | None) -> ToolResult:
    timeout = tool_meta(tool).timeout
    input_json = json_text(call.input)
    with calling(call.id, call.name), running_with(_context_of(call, context)):
        if timeout is None:
            return _succeeded(call, await tool.execute(input_json))
        with anyio.move_on_after(timeout):
            return _succeeded(call, await tool.execute(input_json))
    # Reached only when the timeout's own scope caught the cancellation it caused; a
    # cancellation from outside propagates through the scope.
    return _failed(call, say.timed_out(call.name, timeout))


def _context_of(call: ToolCall, given: ToolContext | None) -> ToolContext:
    base = given if given is not None else ToolContext(call_id=call.id, tool_name=call.name)
    # The reporter is bound here, inside `calling`: a tool may hand the context to a task
    # of its own, which the context variables of the call do not reach.
    return replace(base, call_id=call.id, tool_name=call.name, _reporter=current_progress())


_ERROR_CHARS = 16_000  # an error message past this (a server's dump, say) is cut for the model


def _failed(call: ToolCall, message: str, exc: BaseException | None = None) -> ToolResult:
    # The whole message stays on `exception`; the model reads a bounded one.
    if len(message) > _ERROR_CHARS:
        cut = len(message) - _ERROR_CHARS
        message = f"{message[:_ERROR_CHARS]}\n[... {cut} more characters of the error cut]"
    return ToolResult(call.id, call.name, message, is_error=True, input=call.input, exception=exc)


def _succeeded(call: ToolCall, value: object) -> ToolResult:
    if type(value) is str:
        return ToolResult(call.id, call.name, value, input=call.input)
    output = as_output(value)  # a hand-written tool may return any value
    if isinstance(output, str):
        return ToolResult(call.id, call.name, output, input=call.input)
    if isinstance(output, list):
        text, media = split_media(output)
        return ToolResult(call.id, call.name, text, input=call.input, media=media)
    return ToolResult(call.id, call.name, output.text, output=output, input=call.input)
