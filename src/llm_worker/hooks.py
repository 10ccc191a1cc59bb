"""Hooks: step into the Worker's loop.

Before each request, around each tool call, at turn end and on abort:

| hook point | when | context (mutable) | results allowed |
|---|---|---|---|
| on_message_send | before each request | `MessageSendContext` | `Continue`, `Cancel` |
| before_tool_call | before each call | `ToolCallContext` | `Continue`, `Skip`, `Abort`, `Pause` |
| after_tool_call | after every result | `ToolResultContext` | `Continue`, `Abort` |
| on_turn_end | no tool call | `TurnEndContext` | `Finish`, `ContinueWithMessages`, `Pause` |
| on_abort | the run is cancelled, aborted or fails | `AbortContext` | none |

A hook is a function taking the context and returning one of its allowed results; returning
`None` means `Continue` (or `Finish` for on_turn_end). Each result union is a type, so pyright
rejects a hook that could return a result its hook point does not allow; at run time such a
result ends the run with a `HookError` naming the hook, the point and what it allows.

Hooks may be `async def` or plain `def`. A plain one is called directly on the event loop's
thread — not in a worker thread, as sync tools are: hooks edit the context and the history the
loop reads next, and most are quick checks — so it must not block (no network, no sleep; make
it `async def` for those). A timeout cannot interrupt a plain hook: one that ran past its
timeout ends the run with a `HookError` once it returns.

How hooks of one point combine: they run in registration order. Rewrites accumulate — each hook
sees the context as the previous one left it (edited arguments, a masked result). The first
decisive result (`Skip`, `Abort`, `Pause`, `Cancel`, `ContinueWithMessages`) ends the chain and
the later hooks are not called. A hook that raises, or runs past its timeout, ends the run with
a `HookError` naming it, after the on_abort hooks.

What the history receives: the model's calls exactly as it sent them (before_tool_call hooks
rewrite a copy, which the tool, the after hooks and the result see), and a result only once
every after_tool_call hook has seen it — a result whose chain did not finish (an `Abort`, a
hook that raised, a cancellation) is replaced by an error result saying so. A paused call
keeps the model's arguments, so on resume the before_tool_call chain runs on them again and
each rewrite applies once. Beside them the pause state keeps what the hooks that ran before
the pausing one made of them (`PendingCall.rewritten_input`): a `Decision.approve()`, which
skips the hooks, runs those — a sanitizing hook registered before an approval hook has done
its work, once. Register such hooks before the one that pauses.

One object may hold the hooks of several points (`Worker.add_hooks`): subclass `WorkerHooks`
and the type checker checks each method you override. `Subscriber` does the same for the
event methods of `Worker.subscribe`.

Contexts are classes, not positional arguments, so that they can grow new fields without
breaking existing hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, cast

from typing_extensions import TypeVar

from llm_worker.messages import Message, Request

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.events import ErrorEvent, StatusEvent, UsageEvent
    from llm_worker.timeline import TextBlockEvent, ThinkingBlockEvent, ToolUseBlockEvent
    from llm_worker.tools import Tool, ToolMeta, ToolResult

__all__ = (
    "Abort",
    "AbortContext",
    "AfterToolCallHook",
    "AfterToolCallResult",
    "BeforeToolCallHook",
    "BeforeToolCallResult",
    "Cancel",
    "Continue",
    "ContinueWithMessages",
    "Finish",
    "MessageSendContext",
    "OnAbortHook",
    "OnMessageSendHook",
    "OnMessageSendResult",
    "OnTurnEndHook",
    "OnTurnEndResult",
    "Pause",
    "Skip",
    "Subscriber",
    "TextScope",
    "ThinkingScope",
    "ToolCallContext",
    "ToolOutcome",
    "ToolResultContext",
    "ToolUseScope",
    "TurnEndContext",
    "WorkerHooks",
)


@dataclass(slots=True, frozen=True)
class Continue:
    """Go on: pass to the next hook, then proceed as normal."""


@dataclass(slots=True, frozen=True)
class Skip:
    """Do not run this tool call; the model gets an error result saying it was skipped.

    Attributes:
        reason: Told to the model in the result, if given.
    """

    reason: str | None = None


@dataclass(slots=True, frozen=True)
class Abort:
    """End the run with `Aborted(reason)` after the on_abort hooks.

    Attributes:
        reason: Why; carried by the `Aborted` exception.
    """

    reason: str


@dataclass(slots=True, frozen=True)
class Pause:
    """End the run PAUSED; `RunResult.state` holds what `Worker.resume` needs to go on.

    Attributes:
        reason: Why (e.g. "waiting for approval"); kept in the pause state.
    """

    reason: str | None = None


@dataclass(slots=True, frozen=True)
class Cancel:
    """Do not send this request: the run ends CANCELLED (on_abort hooks run).

    Attributes:
        reason: Why.
    """

    reason: str


@dataclass(slots=True, frozen=True)
class Finish:
    """End the turn: the answer is final."""


@dataclass(slots=True, frozen=True)
class ContinueWithMessages:
    """Append these messages to the history and request again (e.g. ask for a fix).

    Attributes:
        messages: The messages to append, usually one user message.
    """

    messages: list[Message]


OnMessageSendResult: TypeAlias = Continue | Cancel
"""What an on_message_send hook may return."""
BeforeToolCallResult: TypeAlias = Continue | Skip | Abort | Pause
"""What a before_tool_call hook may return."""
AfterToolCallResult: TypeAlias = Continue | Abort
"""What an after_tool_call hook may return."""
OnTurnEndResult: TypeAlias = Finish | ContinueWithMessages | Pause
"""What an on_turn_end hook may return."""

ToolOutcome: TypeAlias = Literal["done", "error", "skipped", "denied", "not_run"]
"""What became of a call, as an after_tool_call hook sees it: it ran (`"done"`), ran and failed
or could not run (`"error"`: an exception, bad arguments, an unknown tool, a timeout), a
before_tool_call hook skipped it (`"skipped"`), the application denied it on resume
(`"denied"`), or it never started because its paused run was discarded (`"not_run"`)."""


@dataclass(slots=True)
class MessageSendContext:
    """Input of on_message_send hooks.

    Attributes:
        messages: The messages about to be sent. A new list over the history's messages:
            inserting, removing or replacing items changes this request only; mutating a message
            object in place changes the history too. Every tool call is checked to have its
            result in what is sent — in replaced, inserted and new messages, and in every
            message a hook read out of this list (or `request.messages`) and edited in place,
            which is also told as a `CacheMiss` when the previous request sent it otherwise.
            A message reached another way (the Worker's `history`, a reference kept from an
            earlier request) and edited in place is checked only once the provider refuses
            the request, which then goes once more.
        request: The whole request (system prompt, tools, options) — edit it, or assign a new
            one, for this request only.
        request_number: 1 for the first request of the run, 2 for the next, …
    """

    messages: list[Message]
    request: Request
    request_number: int


@dataclass(slots=True)
class ToolCallContext:
    """Input of before_tool_call hooks.

    Attributes:
        call: The call; edit `call.input` (in place, or assign a new dict) to rewrite the
            arguments the tool receives. It is the hook chain's own copy: the history keeps
            the arguments exactly as the model sent them. Its id and tool name are fixed:
            changing them, or making `input` anything but a dict, is a `HookError`.
        meta: The tool's metadata (`None` when the model named an unknown tool).
        tool: The tool object itself, for access to its state (`None` if unknown); see
            `instance`.
        resumed: True when the call is seen again by `Worker.resume` after a pause — the call
            whose hook paused, or one the application gave a `Decision` — so an approval hook
            can now allow it. A later call of the batch that no hook saw before the pause is
            new to the hooks: `False`. The chain starts again from the model's arguments, so
            each rewrite applies exactly once.
        index: Position of the call in its batch (0-based).
        approved: For a tool marked `requires_approval`: whether the call may run without a
            pause — true once a `Decision.approve()` approved it; a hook may set it (an
            allow-list of safe arguments, say). Tools without the mark ignore it.
    """

    call: ToolCall
    meta: ToolMeta | None
    tool: Tool | None
    _: KW_ONLY
    resumed: bool = False
    index: int = 0
    approved: bool = False

    @property
    def instance(self) -> object | None:
        """The object holding the tool's state (see `tool_instance`)."""
        return tool_instance(self.tool)


@dataclass(slots=True)
class ToolResultContext:
    """Input of after_tool_call hooks.

    Every result passes through the after hooks — failed, skipped and denied ones too — and
    enters the history only once every hook has seen it.

    Attributes:
        result: The result; edit `result.content` (e.g. to mask secrets), or assign a new
            `ToolResult` for this call (`ToolResult.error(ctx.call.id, ...)`), to change what
            the model reads; anything else (another call's result, non-text content) is a
            `HookError`. `result.output` is the full
            `ToolOutput`; a stored output's content is also in the blob store.
        call: The call the result answers, with the arguments the tool received (after the
            before_tool_call hooks' rewrites).
        meta: The tool's metadata (`None` for an unknown tool).
        tool: The tool object (`None` for an unknown tool); see `instance`.
        outcome: What became of the call: `"done"`, `"error"`, `"skipped"`, `"denied"` or
            `"not_run"` (see `ToolOutcome`).
    """

    result: ToolResult
    call: ToolCall
    meta: ToolMeta | None
    tool: Tool | None
    _: KW_ONLY
    outcome: ToolOutcome = "done"

    @property
    def instance(self) -> object | None:
        """The object holding the tool's state (see `tool_instance`)."""
        return tool_instance(self.tool)

    @property
    def stored(self) -> bool:
        """Whether the output was kept in the blob store (the model sees its summary)."""
        output = self.result.output
        return output is not None and getattr(output, "blob_id", None) is not None


@dataclass(slots=True)
class TurnEndContext:
    """Input of on_turn_end hooks.

    Attributes:
        history: The whole history, the final answer last. Editable.
        response: The final assistant message.
        continuations: How many times on_turn_end hooks have continued this run so far.
        resumed: True when seen again by `Worker.resume` after an on_turn_end pause.
        output: The answer's validated output (an instance of the Worker's `output_type`),
            or its text without one; `None` after a refusal. A hook may replace it: the run's
            `RunResult.output` is what it holds when the hooks accept the answer.
    """

    history: list[Message]
    response: Message
    continuations: int = 0
    resumed: bool = False
    output: Any = None

    @property
    def text(self) -> str:
        """The final answer's text."""
        return self.response.text


@dataclass(slots=True)
class AbortContext:
    """Input of on_abort hooks.

    Attributes:
        reason: Why the run ended early, for a person.
        kind: `"cancelled"` (worker.cancel(), a Cancel result or task cancellation),
            `"aborted"` (a hook's Abort) or `"failed"` (an exception).
        error: The exception, when there is one.
    """

    reason: str
    kind: Literal["cancelled", "aborted", "failed"]
    error: BaseException | None = None
    extra: dict[str, Any] = field(default_factory=lambda: {})


OnMessageSendHook: TypeAlias = Callable[
    [MessageSendContext], Awaitable[OnMessageSendResult | None] | OnMessageSendResult | None
]
"""An on_message_send hook (async or plain)."""
BeforeToolCallHook: TypeAlias = Callable[
    [ToolCallContext], Awaitable[BeforeToolCallResult | None] | BeforeToolCallResult | None
]
"""A before_tool_call hook (async or plain)."""
AfterToolCallHook: TypeAlias = Callable[
    [ToolResultContext], Awaitable[AfterToolCallResult | None] | AfterToolCallResult | None
]
"""An after_tool_call hook (async or plain)."""
OnTurnEndHook: TypeAlias = Callable[
    [TurnEndContext], Awaitable[OnTurnEndResult | None] | OnTurnEndResult | None
]
"""An on_turn_end hook (async or plain)."""
OnAbortHook: TypeAlias = Callable[[AbortContext], Awaitable[None] | None]
"""An on_abort hook (async or plain)."""


class WorkerHooks:
    """A base class for one object with a method per hook point (`Worker.add_hooks`).

    Subclass it and override any subset of the methods: the type checker then checks each
    one against its hook point — the context it takes, the results it may return — and
    `add_hooks` registers only the methods you overrode (the defaults do nothing and are
    never called). Each may be `async def` or a plain `def`. An object that does not inherit
    from this class is accepted too (any object with some of these methods), unchecked.

    ```python
    class Guard(WorkerHooks):
        def before_tool_call(self, ctx: ToolCallContext) -> Skip | None:
            return Skip("read-only day") if ctx.call.name == "delete" else None

    worker.add_hooks(Guard())
    ```
    """

    __slots__ = ()

    def on_message_send(
        self, ctx: MessageSendContext, /
    ) -> Awaitable[OnMessageSendResult | None] | OnMessageSendResult | None:
        """Before each request."""
        return None

    def before_tool_call(
        self, ctx: ToolCallContext, /
    ) -> Awaitable[BeforeToolCallResult | None] | BeforeToolCallResult | None:
        """Before each tool call."""
        return None

    def after_tool_call(
        self, ctx: ToolResultContext, /
    ) -> Awaitable[AfterToolCallResult | None] | AfterToolCallResult | None:
        """After each tool call."""
        return None

    def on_turn_end(
        self, ctx: TurnEndContext, /
    ) -> Awaitable[OnTurnEndResult | None] | OnTurnEndResult | None:
        """When an answer has no tool call."""
        return None

    def on_abort(self, ctx: AbortContext, /) -> Awaitable[None] | None:
        """When the run is cancelled, aborted or fails."""
        return None


TextScope = TypeVar("TextScope", default=None)
"""The scope type of a `Subscriber`'s text blocks (what `new_text_block_scope` makes)."""
ThinkingScope = TypeVar("ThinkingScope", default=None)
"""The scope type of a `Subscriber`'s thinking blocks."""
ToolUseScope = TypeVar("ToolUseScope", default=None)
"""The scope type of a `Subscriber`'s tool-use blocks."""


class Subscriber(Generic[TextScope, ThinkingScope, ToolUseScope]):
    """A base class for one object that receives a Worker's events (`Worker.subscribe`).

    Subclass it and override any subset of the methods: the type checker then checks each
    one — the event type it takes, the scope its `new_*_scope` makes (the type arguments
    are the text, thinking and tool-use scope types, `None` by default), and that it is a
    plain `def` (events are delivered synchronously, mid-stream: an `async def` would never
    run). `subscribe` registers only the methods you overrode, and refuses a block method
    whose scope type argument is not `None` without the `new_*_scope` that makes one (the
    scope would be `None`). An object that does not
    inherit from this class is accepted too (any object with some of these methods),
    checked when it is subscribed, not by the type checker.

    ```python
    class Printer(Subscriber[list[str]]):
        def new_text_block_scope(self) -> list[str]:
            return []  # a fresh list per text block

        def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:
            if isinstance(event, TextDelta):
                scope.append(event.text)

    worker.subscribe(Printer())
    ```
    """

    __slots__ = ()

    def new_text_block_scope(self) -> TextScope:
        """A fresh scope for each text block; without one, the scope is `None`."""
        return cast("TextScope", None)  # the default scope type is None

    def on_text_block(self, scope: TextScope, event: TextBlockEvent, /) -> None:
        """Each event of a text block (tool-result blocks included)."""

    def new_thinking_block_scope(self) -> ThinkingScope:
        """A fresh scope for each thinking block; without one, the scope is `None`."""
        return cast("ThinkingScope", None)  # the default scope type is None

    def on_thinking_block(self, scope: ThinkingScope, event: ThinkingBlockEvent, /) -> None:
        """Each event of a thinking block."""

    def new_tool_use_block_scope(self) -> ToolUseScope:
        """A fresh scope for each tool-use block; without one, the scope is `None`."""
        return cast("ToolUseScope", None)  # the default scope type is None

    def on_tool_use_block(self, scope: ToolUseScope, event: ToolUseBlockEvent, /) -> None:
        """Each event of a tool-use block."""

    def on_usage(self, event: UsageEvent, /) -> None:
        """Each usage snapshot (the last one of an answer is its total)."""

    def on_status(self, event: StatusEvent, /) -> None:
        """Each change of a response's status."""

    def on_error(self, event: ErrorEvent, /) -> None:
        """Each error event of a stream."""

    def on_text_complete(self, text: str, /) -> None:
        """Each finished text block, whole."""

    def on_tool_call_complete(self, call: ToolCall, /) -> None:
        """Each finished tool call, its arguments parsed (as the model sent them)."""

    def on_turn_start(self, turn: int, /) -> None:
        """A run starts (`turn`: its number on this Worker, from 0)."""

    def on_turn_end(self, turn: int, /) -> None:
        """A run ends: finished, paused, cancelled or failed."""


HOOK_POINTS: tuple[str, ...] = (
    "on_message_send",
    "before_tool_call",
    "after_tool_call",
    "on_turn_end",
    "on_abort",
)
"""The hook points, in loop order."""


def tool_instance(tool: object) -> object | None:
    """The object holding a tool's state, for a hook that needs it.

    For an `@tool` method, the instance it is bound to (`FunctionTool.instance`; the class,
    for a classmethod); for a plain `@tool` function, `None`; for a hand-written tool object,
    the object itself.
    """
    if tool is None:
        return None
    from llm_worker.tools import FunctionTool

    if isinstance(tool, FunctionTool):
        return tool.instance
    return tool


def hook_name(hook: object) -> str:
    """A readable name for a hook (its qualified name, or its type's)."""
    name = getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None)
    if name is None:
        func = getattr(hook, "__func__", None)
        name = getattr(func, "__qualname__", None)
    return str(name or type(hook).__qualname__)
