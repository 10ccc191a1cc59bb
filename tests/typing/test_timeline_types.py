# pyright: reportUnnecessaryTypeIgnoreComment=true
"""The Timeline's type safety, checked by pyright strict (CI runs it on tests/typing).

Each `# pyright: ignore[...]` marks a registration the type checker must reject; if it stops
being rejected, the ignore becomes unnecessary and pyright fails. The tests also run under
pytest, so the accepted registrations are exercised for real.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_worker import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    TextBlockCollector,
    TextBlockEvent,
    TextBlockStop,
    TextDelta,
    TextMetadata,
    Timeline,
    ToolCallCollector,
    ToolUseBlockEvent,
    UsageEvent,
)


@dataclass
class Buffer:
    parts: list[str] = field(default_factory=lambda: [])


class TextPrinter:
    """A text handler whose scope is a Buffer."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def new_scope(self) -> Buffer:
        return Buffer()

    def on_event(self, scope: Buffer, event: TextBlockEvent) -> None:
        if isinstance(event, TextDelta):
            scope.parts.append(event.text)
        elif isinstance(event, TextBlockStop):
            self.done.append("".join(scope.parts))


class WrongScope:
    """new_scope makes an int, on_event expects a Buffer."""

    def new_scope(self) -> int:
        return 0

    def on_event(self, scope: Buffer, event: TextBlockEvent) -> None:
        scope.parts.append(str(event))


class ToolHandler:
    def new_scope(self) -> None:
        return None

    def on_event(self, scope: None, event: ToolUseBlockEvent) -> None:
        del scope, event


class UsageTotals:
    """A meta handler: one scope for its whole registration."""

    def new_scope(self) -> list[UsageEvent]:
        return []

    def on_event(self, scope: list[UsageEvent], event: UsageEvent) -> None:
        scope.append(event)


def print_text(event: TextBlockEvent) -> None:
    del event


def only_deltas(event: TextDelta) -> None:
    del event


def test_correct_registrations_pass() -> None:
    timeline = Timeline()
    printer = TextPrinter()
    timeline.on_text_block(printer)
    timeline.on_text_block(TextBlockCollector())
    timeline.on_tool_use_block(ToolCallCollector())
    timeline.on_tool_use_block(ToolHandler())
    timeline.on_usage(UsageTotals())
    timeline.on_text_block(print_text)
    timeline.on_text_block(lambda event: None)
    timeline.on_usage(lambda event: event.input_tokens)
    timeline.dispatch(BlockStart(0, BlockType.TEXT, TextMetadata()))
    timeline.dispatch(BlockDelta(0, TextDelta("hi")))
    timeline.dispatch(BlockStop(0, BlockType.TEXT))
    assert printer.done == ["hi"]


def test_wrong_registrations_are_rejected() -> None:
    timeline = Timeline()
    # A text handler is not a tool-use handler.
    timeline.on_tool_use_block(TextPrinter())  # pyright: ignore[reportArgumentType]
    timeline.on_tool_use_block(TextBlockCollector())  # pyright: ignore[reportArgumentType]
    timeline.on_text_block(ToolCallCollector())  # pyright: ignore[reportArgumentType]
    timeline.on_thinking_block(TextBlockCollector())  # pyright: ignore[reportArgumentType]
    # A plain function must accept every event of the kind.
    timeline.on_tool_use_block(print_text)  # pyright: ignore[reportArgumentType]
    timeline.on_text_block(only_deltas)  # pyright: ignore[reportArgumentType]
    # A usage handler is not a text handler.
    timeline.on_text_block(UsageTotals())  # pyright: ignore[reportArgumentType]
    # new_scope's type must be what on_event takes.
    timeline.on_text_block(WrongScope())  # pyright: ignore[reportArgumentType]
    assert timeline.current_block is None
