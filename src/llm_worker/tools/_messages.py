"""What the model reads when a tool call fails.

Each message names the tool, says what went wrong in terms the model can act on (which argument,
what was expected, what it sent, which tools exist) and is bounded: whatever the model or a tool
produced is quoted only in part, so a runaway argument or a huge exception message cannot flood
the context window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

__all__ = (
    "cut_short",
    "excerpt",
    "invalid_arguments",
    "invalid_json",
    "malformed_call",
    "not_enabled",
    "not_stored",
    "raised",
    "timed_out",
    "tool_error",
    "unknown_tool",
    "unparsed_call",
)

MAX_ERRORS = 10
"""Validation problems listed in one message; the rest are counted."""
MAX_NAMES = 50
"""Names listed (available tools, a tool's parameters); the rest are counted."""
MAX_VALUE = 80
"""Characters of an offending argument value quoted back."""
MAX_RAW = 200
"""Characters of unparsable argument text quoted back."""
MAX_EXCEPTION = 1000
"""Characters of an exception's message passed on."""


def excerpt(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked with the full length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters in all)"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    more = len(names) - MAX_NAMES
    return f"{shown} and {more} more" if more > 0 else shown


def unknown_tool(name: str, available: Sequence[str]) -> str:
    """The model called a tool that does not exist."""
    if not available:
        return f"There is no tool named {name!r}: no tools are available."
    return (
        f"There is no tool named {name!r}. Available tools: {_names(available)}. "
        "Call one of these by its exact name."
    )


def invalid_json(name: str, error: str, raw_input: str) -> str:
    """The model's argument text for the call did not parse as a JSON object."""
    return (
        f"The arguments for tool {name!r} are not valid JSON ({error}). "
        f"Received: {excerpt(raw_input, MAX_RAW)!r}. "
        "Call the tool again with its arguments as one JSON object."
    )


def malformed_call(reason: str | None, detail: str | None) -> str:
    """The provider refused the model's tool call before any tool saw it.

    Gemini's `MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`, with its
    `finishMessage` as `detail`.
    """
    why = reason or "malformed tool call"
    if detail:
        why = f"{why}: {excerpt(detail, MAX_EXCEPTION)}"
    return (
        f"Your last tool call could not be run: the provider rejected it ({why}). "
        "Call a tool again with its exact name and its arguments as one JSON object, call "
        "fewer tools at once, or answer without calling a tool."
    )


def unparsed_call(name: str, error: str, raw_input: str) -> str:
    """The collector found the call's arguments invalid (`ToolCall.error`); the tool did not run.

    The collector's error usually quotes the text already; the text is quoted here only when
    it does not.
    """
    message = f"The tool {name!r} was not run: {excerpt(error, MAX_EXCEPTION)}."
    if raw_input.strip() and raw_input[:16] not in error:
        message += f" Received: {excerpt(raw_input, MAX_RAW)!r}."
    return f"{message} Call it again with its arguments as one JSON object."


def invalid_arguments(exc: ValidationError, name: str, parameters: Sequence[str] = ()) -> str:
    """Each argument that failed validation, what was expected, and what was sent.

    Args:
        exc: The pydantic error from validating the arguments.
        name: The tool's name.
        parameters: The tool's parameter names, listed when an unknown one was sent.
    """
    errors = exc.errors(include_url=False)
    if len(errors) == 1 and errors[0]["type"] == "json_invalid":
        ctx = errors[0].get("ctx") or {}
        why = str(ctx.get("error") or errors[0]["msg"])
        return invalid_json(name, why, str(errors[0].get("input", "")))
    count = len(errors)
    lines = [
        f"Invalid arguments for tool {name!r} ({count} problem{'' if count == 1 else 's'}); "
        "call it again with corrected arguments:"
    ]
    lines.extend(f"- {_problem(error, parameters)}" for error in errors[:MAX_ERRORS])
    if count > MAX_ERRORS:
        lines.append(f"- and {count - MAX_ERRORS} more")
    return "\n".join(lines)


def _problem(error: ErrorDetails, parameters: Sequence[str]) -> str:
    loc = error["loc"]
    where = ".".join(str(part) for part in loc)
    kind = error["type"]
    if kind == "missing":
        return f"{where}: required, but missing"
    if kind == "extra_forbidden":
        if len(loc) == 1:
            known = _names(parameters) if parameters else "none"
            return f"{where}: not a parameter of this tool (its parameters: {known})"
        return f"{where}: not an accepted field here"
    got = excerpt(repr(error.get("input")), MAX_VALUE)
    if not loc:
        return f"the arguments must be a JSON object (got {got})"
    return f"{where}: {error['msg']} (got {got})"


def tool_error(exc: BaseException, name: str) -> str:
    """A `ToolError`'s own message, as the tool's author wrote it (not cut)."""
    return str(exc) or f"The tool {name!r} failed without saying why."


def raised(exc: BaseException) -> str:
    """`<Type>: <message>` for any other exception a tool raised."""
    message = str(exc)
    kind = type(exc).__name__
    return f"{kind}: {excerpt(message, MAX_EXCEPTION)}" if message else kind


def timed_out(name: str, seconds: float) -> str:
    """The call ran past the tool's timeout."""
    return f"The tool {name!r} timed out after {seconds:g} s without a result."


def cut_short(name: str, why: str, *, side_effect: bool) -> str:
    """A call that was running when its run was cancelled or failed, left without a result.

    Args:
        name: The tool's name.
        why: What happened to the run (`"cancelled"`, `"interrupted"`).
        side_effect: Whether the tool is marked neither read-only nor idempotent.
    """
    message = f"No result: the call of {name!r} was {why} while it ran, before it returned."
    if side_effect:
        message += (
            " It may already have taken effect: check whether it did before calling the tool "
            "again, and do not repeat it blindly."
        )
    return message


def not_stored(name: str, size: int, exc: BaseException) -> str:
    """The call ran, but its large output could not be kept in the blob store."""
    return (
        f"The tool {name!r} ran and returned {size} characters, but its output could not be "
        f"stored ({raised(exc)}), so it is not available. The call itself completed: call it "
        "again only if running it twice is safe."
    )


def not_enabled(name: str, offered: Sequence[str]) -> str:
    """A call of a tool the model was not offered for that answer (`@tool(enabled=...)`)."""
    return (
        f"Tool {name!r} is not enabled at this point of the conversation, so the call did "
        f"not run. Tools available now: {_names(offered) if offered else 'none'}."
    )
