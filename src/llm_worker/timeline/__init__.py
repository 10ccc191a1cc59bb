"""The timeline layer: one flat event stream in, typed per-block lifecycles out to handlers.

Owns the `Handler` protocol and the per-kind block events (`_handlers`), and the `Timeline`
dispatcher with its registrations and scope lifecycle (`_timeline`). The collectors built on
it are the public module `llm_worker.collectors`, in this layer too.

May import: the model layer (`llm_worker.events`, `messages`, `errors`, `_json`) only.
Modules inside import each other directly, never through this package.
"""

from llm_worker.timeline._handlers import (
    Handler,
    TextBlockAbort,
    TextBlockEvent,
    TextBlockStart,
    TextBlockStop,
    ThinkingBlockAbort,
    ThinkingBlockEvent,
    ThinkingBlockStart,
    ThinkingBlockStop,
    ToolUseBlockAbort,
    ToolUseBlockEvent,
    ToolUseBlockStart,
    ToolUseBlockStop,
)
from llm_worker.timeline._timeline import Registration, Timeline

__all__ = (
    "Handler",
    "Registration",
    "TextBlockAbort",
    "TextBlockEvent",
    "TextBlockStart",
    "TextBlockStop",
    "ThinkingBlockAbort",
    "ThinkingBlockEvent",
    "ThinkingBlockStart",
    "ThinkingBlockStop",
    "Timeline",
    "ToolUseBlockAbort",
    "ToolUseBlockEvent",
    "ToolUseBlockStart",
    "ToolUseBlockStop",
)
