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

from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, TypeVar

from llm_worker.events import (
    InputJsonDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ThinkingMetadata,
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


@dataclass(slots=True, frozen=True)
class TextBlockAbort:
    """A text block ends abnormally (stream failure, cancellation, a broken stream).

    Attributes:
        index: Position of the block in the answer.
        reason: Why it was aborted.
    """

    index: int
    reason: str


@dataclass(slots=True, frozen=True)
class ThinkingBlockStart:
    """A thinking block begins.

    Attributes:
        index: Position of the block in the answer.
        metadata: The block's metadata (redacted data, reasoning item id).
    """

    index: int
    metadata: ThinkingMetadata = field(default_factory=ThinkingMetadata)


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


@dataclass(slots=True, frozen=True)
class ThinkingBlockAbort:
    """A thinking block ends abnormally.

    Attributes:
        index: Position of the block in the answer.
        reason: Why it was aborted.
    """

    index: int
    reason: str


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
