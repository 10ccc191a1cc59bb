"""`execute_call`: one call becomes one result, whatever happens.

Every failure — an unknown tool, arguments that are not JSON or do not validate, a
`ToolError`, any other exception, a timeout — becomes an `is_error` `ToolResult` with a message
the model can act on. Cancellation is never turned into a result: it propagates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

import llm_worker.tools._messages as say
from llm_worker.errors import ToolError
from llm_worker.tools._text import as_output, json_text
from llm_worker.tools._tool import Tool, ToolResult, tool_meta

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall

__all__ = ("execute_call",)


async def execute_call(
    tool: Tool | None, call: ToolCall, *, available: Sequence[str] = ()
) -> ToolResult:
    """Run one call and turn whatever happens into its result.

    The call's arguments are `call.input` (which before_tool_call hooks may have rewritten),
    sent to the tool as JSON text. Every failure becomes an `is_error` result that tells the
    model what to do: an unknown tool (the available names are listed), arguments that were
    not valid JSON (a bounded excerpt is quoted), arguments that do not validate (each bad
    field, what was expected), a `ToolError` (its message), any other exception
    (`<Type>: <message>`, bounded), a call past the tool's timeout.

    Args:
        tool: The tool the call names, or `None` when no tool has that name.
        call: The call.
        available: The names of the tools that exist, for the unknown-tool message.

    Raises:
        Cancellation (`CancelledError`) propagates; it is never made a result.
    """
    if tool is None:
        return _failed(call, say.unknown_tool(call.name, available))
    if call.error is not None:
        return _failed(call, say.unparsed_call(call.name, call.error, call.raw_input))
    try:
        return await _run(tool, call)
    except ToolError as exc:
        return _failed(call, say.tool_error(exc, call.name))
    except Exception as exc:  # any failure of the tool is a result for the model
        return _failed(call, say.raised(exc))


async def _run(tool: Tool, call: ToolCall) -> ToolResult:
    timeout = tool_meta(tool).timeout
    input_json = json_text(call.input)
    if timeout is None:
        return _succeeded(call, await tool.execute(input_json))
    with anyio.move_on_after(timeout):
        return _succeeded(call, await tool.execute(input_json))
    # Reached only when the timeout's own scope caught the cancellation it caused; a
    # cancellation from outside propagates through the scope.
    return _failed(call, say.timed_out(call.name, timeout))


def _failed(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call.id, call.name, message, is_error=True, input=call.input)


def _succeeded(call: ToolCall, value: object) -> ToolResult:
    if type(value) is str:
        return ToolResult(call.id, call.name, value, input=call.input)
    output = as_output(value)  # a hand-written tool may return any value
    if isinstance(output, str):
        return ToolResult(call.id, call.name, output, input=call.input)
    return ToolResult(call.id, call.name, output.text, output=output, input=call.input)
