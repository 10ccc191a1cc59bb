# pyright: reportUnnecessaryTypeIgnoreComment=true
"""`add_hooks` and `subscribe` objects, checked by pyright strict (issue #28, 12).

Subclassing `WorkerHooks` or `Subscriber` is the typed route: pyright checks each method a
subclass overrides — the context or event it takes, the scope type, what it returns, plain
`def` where events are delivered synchronously — and a subclass may override any subset.
Each `# pyright: ignore[...]` marks a method the type checker must reject; if pyright stops
rejecting it, the ignore becomes unnecessary and CI fails. The accepted classes also run
under pytest.
"""

from __future__ import annotations

import anyio
import pytest

from llm_worker import (
    StatusEvent,
    TextBlockEvent,
    TextBlockStop,
    TextDelta,
    ThinkingBlockEvent,
    ToolCall,
    ToolUseBlockEvent,
    UsageEvent,
    Worker,
)
from llm_worker.hooks import (
    Abort,
    AbortContext,
    Cancel,
    Finish,
    MessageSendContext,
    Pause,
    Skip,
    Subscriber,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
    WorkerHooks,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

# -- accepted ------------------------------------------------------------------------------------


class Guard(WorkerHooks):
    """A subset of the hook points, one plain and one async."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def before_tool_call(self, ctx: ToolCallContext) -> Skip | None:
        self.calls.append(ctx.call.name)
        return Skip("read-only day") if ctx.call.name == "delete" else None

    async def on_turn_end(self, ctx: TurnEndContext) -> Finish | Pause:
        self.calls.append("end")
        return Finish()


class EveryPoint(WorkerHooks):
    async def on_message_send(self, context: MessageSendContext) -> Cancel | None:
        return None

    async def before_tool_call(self, ctx: ToolCallContext) -> Abort | Pause | None:
        return None

    def after_tool_call(self, ctx: ToolResultContext) -> Abort | None:
        return None

    def on_turn_end(self, ctx: TurnEndContext) -> None:
        return None

    async def on_abort(self, ctx: AbortContext) -> None:
        return None


class Texts(Subscriber[list[str]]):
    """A scope per text block; the meta events; the parameter names are the subclass's."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.usage: list[int | None] = []

    def new_text_block_scope(self) -> list[str]:
        return []

    def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:
        if isinstance(event, TextDelta):
            scope.append(event.text)
        elif isinstance(event, TextBlockStop):
            self.texts.append("".join(scope))

    def on_usage(self, usage: UsageEvent) -> None:
        self.usage.append(usage.output_tokens)


class AllScopes(Subscriber[int, str, bytes]):
    def new_text_block_scope(self) -> int:
        return 0

    def new_thinking_block_scope(self) -> str:
        return ""

    def new_tool_use_block_scope(self) -> bytes:
        return b""

    def on_thinking_block(self, scope: str, event: ThinkingBlockEvent) -> None:
        return None

    def on_tool_use_block(self, scope: bytes, event: ToolUseBlockEvent) -> None:
        return None


class Unscoped(Subscriber):
    """No type arguments: every scope is None."""

    def on_text_block(self, scope: None, event: TextBlockEvent) -> None:
        return None

    def on_tool_call_complete(self, call: ToolCall) -> None:
        return None

    def on_turn_start(self, turn: int) -> None:
        return None


class Duck:
    """No base class: accepted, unchecked (as before)."""

    def on_text_complete(self, text: str) -> None:
        return None

    def before_tool_call(self, ctx: ToolCallContext) -> None:
        return None


# -- rejected ------------------------------------------------------------------------------------


class FinishesBefore(WorkerHooks):
    def before_tool_call(self, ctx: ToolCallContext) -> Finish:  # pyright: ignore[reportIncompatibleMethodOverride]
        return Finish()


class AsyncFinishesBefore(WorkerHooks):
    async def before_tool_call(self, ctx: ToolCallContext) -> Finish | None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class WrongContext(WorkerHooks):
    def after_tool_call(self, ctx: ToolCallContext) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class PausesAfter(WorkerHooks):
    async def after_tool_call(self, ctx: ToolResultContext) -> Pause:  # pyright: ignore[reportIncompatibleMethodOverride]
        return Pause()


class AbortReturns(WorkerHooks):
    def on_abort(self, ctx: AbortContext) -> Abort:  # pyright: ignore[reportIncompatibleMethodOverride]
        return Abort("no")


class WrongScope(Subscriber[list[str]]):
    def on_text_block(self, scope: int, event: TextBlockEvent) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class WrongScopeMade(Subscriber[list[str]]):
    def new_text_block_scope(self) -> int:  # pyright: ignore[reportIncompatibleMethodOverride]
        return 0


class ScopeWithoutTypeArgument(Subscriber):
    def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class WrongEvent(Subscriber):
    def on_usage(self, event: StatusEvent) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class WrongBlockKind(Subscriber):
    def on_tool_use_block(self, scope: None, event: TextBlockEvent) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class AsyncTextComplete(Subscriber):
    async def on_text_complete(self, text: str) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


class AsyncTurnEnd(Subscriber):
    async def on_turn_end(self, turn: int) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        return None


# -- the accepted ones at run time -------------------------------------------------------------


async def test_accepted_classes_register_and_run() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("hello there")]))
    guard, texts = Guard(), Texts()
    worker.add_hooks(guard)
    worker.add_hooks(EveryPoint())
    worker.add_hooks(Duck())
    worker.subscribe(texts)
    worker.subscribe(AllScopes())
    worker.subscribe(Unscoped())
    worker.subscribe(Duck())
    with anyio.fail_after(5):
        result = await worker.run("hi")
    assert result.text == "hello there"
    assert guard.calls == ["end"]
    assert texts.texts == ["hello there"]
    assert texts.usage
