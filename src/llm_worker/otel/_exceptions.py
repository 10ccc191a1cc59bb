"""The `exception` event of a failed span, with no content unless content is captured.

An exception's message and stack trace may quote what the model said (a structured-output
failure carries the raw answer: its message quotes the value, and the chained rejection the
whole text), so the SDK's `record_exception` would copy content onto the span whatever
`capture_content` says. Here, with capture off, the event holds the exception's type and a
stack trace of frames and exception types only (the program's own source lines, never a
message); with capture on, its message and full stack trace too, each cut to
`content_max_chars` as every captured attribute is.
"""

from __future__ import annotations

import traceback
from typing import Any, Final

from llm_worker.otel._content import captured
from llm_worker.otel._names import CONTENT_MAX_CHARS, TRUNCATED

__all__ = ("exception_attributes",)

EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
_CHAIN: Final = 16  # exceptions of a chain shown at most (a cycle must not loop forever)


def exception_attributes(exc: BaseException, content: int | None) -> dict[str, Any]:
    """The attributes of the `exception` event for `exc`.

    `content` caps the message and stack trace, in characters (`None`: content is not
    captured, and neither is recorded; a stack trace of frames and types is, cut to the
    default cap).
    """
    attributes: dict[str, Any] = {EXCEPTION_TYPE: qualified_name(exc)}
    if content is None:
        return attributes | _tail(EXCEPTION_STACKTRACE, _bare_trace(exc), CONTENT_MAX_CHARS)
    attributes |= captured(EXCEPTION_MESSAGE, _text(exc), content)
    return attributes | _tail(EXCEPTION_STACKTRACE, _full_trace(exc), content)


def qualified_name(exc: BaseException) -> str:
    """`module.Class` of an exception (`Class` alone for a builtin), as the SDK writes it."""
    kind = type(exc)
    module = kind.__module__
    return f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not fail the run being traced
        return f"<{qualified_name(exc)}: unprintable>"


def _full_trace(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(exc))
    except Exception:
        return _bare_trace(exc)


def _bare_trace(exc: BaseException) -> str:
    """The frames of `exc` and of the exceptions it was chained from: no message, no value."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < _CHAIN:
        seen.add(id(current))
        chain.append(current)
        cause = current.__cause__
        current = (
            cause if cause is not None or current.__suppress_context__ else current.__context__
        )
    lines: list[str] = []
    for index, each in enumerate(reversed(chain)):
        if index:
            lines.append("\nThe above exception led to the following exception:\n\n")
        lines.append("Traceback (most recent call last):\n")
        # Frames: file, line, function and the program's source line (never a local value).
        lines.extend(traceback.StackSummary.extract(traceback.walk_tb(each.__traceback__)).format())
        lines.append(f"{qualified_name(each)}\n")
    return "".join(lines)


def _tail(name: str, text: str, cap: int) -> dict[str, Any]:
    """`text` cut to its last `cap` characters: a stack trace's end names what failed."""
    if len(text) <= cap:
        return {name: text}
    marker = f"[truncated: {len(text)} chars]…"
    return {name: marker + text[len(text) - cap + len(marker) :], TRUNCATED + name: len(text)}
