"""What a Timeline handler is, and the per-kind block events it receives.

A handler is an object with `new_scope()` and `on_event(scope, event)` (the [`Handler`][]
protocol), or a plain callable `(event) -> object` when no scope is needed. Each block kind has
its own lifecycle of events:

| kind | start | delta | end |
|---|---|---|---|
| text (and tool result) | `TextBlockStart` | `TextDelta` | `TextBlockStop` / `TextBlockAbort` |
| thinking | `ThinkingBlockStart` | `ThinkingDelta` | `ThinkingBlockStop` / `ThinkingBlockAbort` |
| tool use | `ToolUseBlockStart` | `InputJsonDelta` | `ToolUseBlockStop` / `ToolUseBlockAbort` |
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, TypeVar

from llm_worker.errors import ConfigurationError
from llm_worker.events import (
    BlockStart,
    BlockType,
    InputJsonDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ThinkingMetadata,
    ToolResultMetadata,
    ToolUseMetadata,
)

__all__ = (
    "Handler",
    "TextBlockAbort",
    "TextBlockEvent",
    "TextBlockStart",
    "TextBlockStop",
    "ThinkingBlockAbort",
    "ThinkingBlockEvent",
    "ThinkingBlockStart",
    "ThinkingBlockStop",
    "ToolUseBlockAbort",
    "ToolUseBlockEvent",
    "ToolUseBlockStart",
    "ToolUseBlockStop",
)

E_contra = TypeVar("E_contra", contravariant=True)
S = TypeVar("S")


class Handler(Protocol[E_contra, S]):
    """A handler of one kind of event, with a scope type of its own.

    `E_contra` is the kind's event type (`TextBlockEvent`, `UsageEvent`, …), fixed by the
    registration method; `S` is the handler's scope type, fixed by `new_scope`. The type
    checker rejects a handler registered for the wrong kind and one whose `on_event` does not
    take the scope `new_scope` makes.
    """

    def new_scope(self) -> S:
        """A fresh scope: called at each block start (meta handlers: once, at registration)."""
        ...

    def on_event(self, scope: S, event: E_contra, /) -> None:
        """Handle one event with the scope of the block (or of the registration)."""
        ...


# -- the per-kind block events ------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class TextBlockStart:
    """A text block (or a tool-result block) begins.

    Attributes:
        index: Position of the block in the answer.
        tool_use_id: For a `TOOL_RESULT` block, the id of the call it answers; else `None`.
    """

    index: int
    tool_use_id: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class TextBlockStop:
    """A text block ends normally.

    Attributes:
        index: Position of the block in the answer.
        stop_reason: Why the response stopped (on the response's last block only).
        raw_stop_reason: The provider's own spelling of the stop reason.
    """

    index: int
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class TextBlockAbort:
    """A text block ends abnormally (stream failure, cancellation, a broken stream).

    Attributes:
        index: Position of the block in the answer.
        reason: Why it was aborted.
    """

    index: int
    reason: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class ThinkingBlockStart:
    """A thinking block begins.

    Attributes:
        index: Position of the block in the answer.
        metadata: The block's metadata (redacted data, reasoning item id).
    """

    index: int
    metadata: ThinkingMetadata = field(default_factory=ThinkingMetadata)
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class ThinkingBlockStop:
    """A thinking block ends normally.

    Attributes:
        index: Position of the block in the answer.
        stop_reason: Why the response stopped (on the response's last block only).
        raw_stop_reason: The provider's own spelling of the stop reason.
    """

    index: int
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class ThinkingBlockAbort:
    """A thinking block ends abnormally.

    Attributes:
        index: Position of the block in the answer.
        reason: Why it was aborted.
    """

    index: int
    reason: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class ToolUseBlockStart:
    """A tool-use block begins.

    Attributes:
        index: Position of the block in the answer.
        id: The call id (empty when the stream never started the block).
        name: The tool's name (empty when the stream never started the block).
    """

    index: int
    id: str
    name: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class ToolUseBlockStop:
    """A tool-use block ends normally; the arguments are complete.

    Attributes:
        index: Position of the block in the answer.
        id: The call id, as given at the start.
        name: The tool's name, as given at the start.
        stop_reason: Why the response stopped (on the response's last block only).
        raw_stop_reason: The provider's own spelling of the stop reason.
    """

    index: int
    id: str
    name: str
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


@dataclass(slots=True, frozen=True)
class ToolUseBlockAbort:
    """A tool-use block ends abnormally; its arguments are incomplete.

    Attributes:
        index: Position of the block in the answer.
        id: The call id, as given at the start.
        name: The tool's name, as given at the start.
        reason: Why it was aborted.
    """

    index: int
    id: str
    name: str
    reason: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls the block came through (`()`: the root run's own block)."""


TextBlockEvent: TypeAlias = TextBlockStart | TextDelta | TextBlockStop | TextBlockAbort
"""What a text-block handler receives (tool-result blocks included)."""

ThinkingBlockEvent: TypeAlias = (
    ThinkingBlockStart | ThinkingDelta | ThinkingBlockStop | ThinkingBlockAbort
)
"""What a thinking-block handler receives."""

ToolUseBlockEvent: TypeAlias = (
    ToolUseBlockStart | InputJsonDelta | ToolUseBlockStop | ToolUseBlockAbort
)
"""What a tool-use-block handler receives."""


def start_event(event: BlockStart, path: tuple[str, ...]) -> object:
    """The handler event a `BlockStart` opens its block with."""
    meta = event.metadata
    if event.block_type is BlockType.TOOL_USE:
        if isinstance(meta, ToolUseMetadata):
            return ToolUseBlockStart(event.index, meta.id, meta.name, path=path)
        return ToolUseBlockStart(event.index, "", "", path=path)
    if event.block_type is BlockType.THINKING:
        if isinstance(meta, ThinkingMetadata):
            return ThinkingBlockStart(event.index, meta, path=path)
        return ThinkingBlockStart(event.index, path=path)
    if isinstance(meta, ToolResultMetadata):
        return TextBlockStart(event.index, meta.tool_use_id, path=path)
    return TextBlockStart(event.index, path=path)


def implicit_start(block_type: BlockType, index: int, path: tuple[str, ...]) -> object:
    """The start a block opened by a delta (no `BlockStart`) is given."""
    if block_type is BlockType.TOOL_USE:
        return ToolUseBlockStart(index, "", "", path=path)
    if block_type is BlockType.THINKING:
        return ThinkingBlockStart(index, path=path)
    return TextBlockStart(index, path=path)


def check_handler(handler: object) -> None:
    """Refuse what cannot be a handler: async functions, classes, non-callables."""
    # Dispatch is synchronous: an async handler would only make coroutines nobody awaits, and
    # a Handler class (not an instance) fails at the first event; both are refused here.
    on_event = getattr(handler, "on_event", None)
    fn = on_event if on_event is not None and not isinstance(handler, type) else handler
    if inspect.iscoroutinefunction(fn):
        raise ConfigurationError(
            f"{handler!r} is async; Timeline handlers are called synchronously for each event "
            "(define it with plain def, and hand slow work to a task or a queue)"
        )
    if isinstance(handler, type) or not (callable(handler) or on_event is not None):
        raise ConfigurationError(
            f"{handler!r} is not a handler: pass a function or an instance with "
            "new_scope() and on_event()"
        )
