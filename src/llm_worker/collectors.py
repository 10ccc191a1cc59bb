"""The built-in Timeline handlers: `TextBlockCollector` and `ToolCallCollector`.

Both collect completed blocks into a store that can be read from outside while they are
registered, and shared: `clone()` gives another collector over the same store (one store,
several handles). Reads and takes are atomic under a lock, so another thread may read
while the Timeline dispatches. An aborted block is never collected: its content is
incomplete. Neither collector raises out of `Timeline.dispatch`.

`ToolCall` is the parsed form of a completed tool-use block; `parse_tool_call` builds one
from the streamed JSON text (the Worker uses it for calls it assembles itself).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import KW_ONLY, dataclass
from typing import Any, Generic, TypeVar

from llm_worker._json import as_dict, json_type, sendable_json
from llm_worker.events import InputJsonDelta, TextDelta
from llm_worker.timeline import (
    TextBlockEvent,
    TextBlockStop,
    ToolUseBlockEvent,
    ToolUseBlockStop,
)

__all__ = ("TextBlockCollector", "ToolCall", "ToolCallCollector", "parse_tool_call")

T = TypeVar("T")

# How much of invalid arguments an error message quotes: enough for the model to see its
# mistake, bounded so a huge broken argument does not flood the next request.
_QUOTE_LIMIT = 200


@dataclass(slots=True)
class ToolCall:
    """A tool call the model made, its arguments parsed.

    Attributes:
        id: The call id the tool result must name.
        name: The tool's name.
        input: The arguments as a JSON object (`{}` when the model sent none, or when they are
            invalid: see `error`).
        raw_input: The arguments' JSON text as streamed.
        error: Why the arguments are invalid (not JSON, or not a JSON object), in words the
            model can act on; `None` when they are valid.
    """

    id: str
    name: str
    input: dict[str, Any]
    _: KW_ONLY
    raw_input: str = ""
    error: str | None = None

    @property
    def valid(self) -> bool:
        """Whether the arguments parsed as a JSON object."""
        return self.error is None


def parse_tool_call(call_id: str, name: str, raw_input: str) -> ToolCall:
    """Build a `ToolCall` from the streamed JSON text of its arguments; never raises.

    Empty or whitespace-only text gives `{}` (models send that for tools without arguments).
    Text that is not JSON, or JSON that is not an object, gives a call with `input={}` and
    `error` set, `raw_input` kept.
    """
    if not raw_input or raw_input.isspace():
        return ToolCall(call_id, name, {}, raw_input=raw_input)
    try:
        # The standard parser rather than orjson: orjson turns integers beyond 64 bits into
        # floats, silently changing the model's arguments; one parse per call is cheap.
        value: Any = json.loads(raw_input, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        return ToolCall(
            call_id, name, {}, raw_input=raw_input, error=_not_json(name, raw_input, exc)
        )
    if _ESCAPED_SURROGATE.search(raw_input) is not None:
        value = sendable_json(value)
    arguments = as_dict(value)
    if not arguments and value != {}:
        kind = json_type(value)
        error = (
            f"the arguments of tool {name!r} must be a JSON object, not {kind}: {_quote(raw_input)}"
        )
        return ToolCall(call_id, name, {}, raw_input=raw_input, error=error)
    return ToolCall(call_id, name, arguments, raw_input=raw_input)


# A surrogate spelled as a JSON escape: the parser decodes a pair into its character, but a
# lone one into a lone surrogate, which no wire can carry (every later request of the run
# would fail). Only then are the arguments walked.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _reject_constant(constant: str) -> Any:
    # NaN and Infinity are not JSON; the standard parser accepts them unless told not to.
    raise ValueError(f"{constant} is not valid JSON")


def _not_json(name: str, raw: str, exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    elif isinstance(exc, RecursionError):
        where = "nested too deeply"
    else:
        where = str(exc)
    return f"the arguments of tool {name!r} are not valid JSON ({where}): {_quote(raw)}"


def _quote(raw: str) -> str:
    if len(raw) <= _QUOTE_LIMIT:
        return repr(raw)
    return f"{raw[:_QUOTE_LIMIT]!r}… ({len(raw)} characters in all)"


class _Store(Generic[T]):
    """The collected items, shared by a collector and its clones."""

    __slots__ = ("items", "lock")

    def __init__(self) -> None:
        self.items: list[T] = []
        self.lock = threading.Lock()

    def append(self, item: T) -> None:
        with self.lock:
            self.items.append(item)

    def take(self) -> list[T]:
        with self.lock:
            items, self.items = self.items, []
        return items

    def copy(self) -> list[T]:
        with self.lock:
            return list(self.items)

    def clear(self) -> None:
        with self.lock:
            self.items = []


class TextBlockCollector:
    """Collects the text of each completed text block (a Timeline text handler).

    One string per stopped block, in order; tool-result blocks, which the Timeline sends to
    text handlers, are collected too. Register with `timeline.on_text_block(collector)`.
    """

    __slots__ = ("_store",)

    def __init__(self) -> None:
        self._store: _Store[str] = _Store()

    def new_scope(self) -> list[str]:
        """A block's scope: its text fragments."""
        return []

    def on_event(self, scope: list[str], event: TextBlockEvent, /) -> None:
        """Append a delta to the block's fragments; at the stop, collect their text."""
        if type(event) is TextDelta:  # the common case first
            scope.append(event.text)
        elif type(event) is TextBlockStop:
            self._store.append("".join(scope))

    def take_collected(self) -> list[str]:
        """The texts collected so far, removing them."""
        return self._store.take()

    def collected(self) -> list[str]:
        """A copy of the texts collected so far."""
        return self._store.copy()

    def has_content(self) -> bool:
        """Whether any collected text is non-empty."""
        return any(self._store.copy())

    def clear(self) -> None:
        """Drop the collected texts."""
        self._store.clear()

    def clone(self) -> TextBlockCollector:
        """Another collector over the same storage."""
        other = TextBlockCollector()
        other._store = self._store
        return other


class ToolCallCollector:
    """Collects a `ToolCall` for each completed tool-use block (a Timeline tool-use handler).

    The arguments are parsed at the block's stop; invalid arguments give a call with `error`
    set rather than an exception. Register with `timeline.on_tool_use_block(collector)`.
    """

    __slots__ = ("_store",)

    def __init__(self) -> None:
        self._store: _Store[ToolCall] = _Store()

    def new_scope(self) -> list[str]:
        """A block's scope: the fragments of the call's JSON arguments."""
        return []

    def on_event(self, scope: list[str], event: ToolUseBlockEvent, /) -> None:
        """Gather the argument fragments; at the stop, parse them into a `ToolCall`."""
        if type(event) is InputJsonDelta:  # the common case first
            scope.append(event.partial_json)
        elif type(event) is ToolUseBlockStop:
            # The stop carries the call's id and name, remembered by the Timeline from the
            # start, so a scope that joined mid-block still gets them.
            self._store.append(parse_tool_call(event.id, event.name, "".join(scope)))

    def take_collected(self) -> list[ToolCall]:
        """The calls collected so far, removing them."""
        return self._store.take()

    def collected(self) -> list[ToolCall]:
        """A copy of the list of calls collected so far."""
        return self._store.copy()

    def has_pending_calls(self) -> bool:
        """Whether calls were collected and not yet taken."""
        return bool(self._store.items)

    def clear(self) -> None:
        """Drop the collected calls."""
        self._store.clear()

    def clone(self) -> ToolCallCollector:
        """Another collector over the same storage."""
        other = ToolCallCollector()
        other._store = self._store
        return other
