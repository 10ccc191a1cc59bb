"""The Worker's registration methods: hooks at their points, handlers on its Timeline.

A base class of `Worker`, kept apart so the run loop's module holds the run loop; it reads only
the Worker's configuration (`_cfg`) and its subscriber list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from llm_worker.errors import ConfigurationError
from llm_worker.events import ErrorEvent, StatusEvent, UsageEvent
from llm_worker.hooks import (
    HOOK_POINTS,
    AfterToolCallHook,
    BeforeToolCallHook,
    OnAbortHook,
    OnMessageSendHook,
    OnTurnEndHook,
    WorkerHooks,
)
from llm_worker.timeline import (
    Handler,
    Registration,
    TextBlockEvent,
    ThinkingBlockEvent,
    Timeline,
    ToolUseBlockEvent,
)
from llm_worker.worker._hookset import HookSet
from llm_worker.worker._subscriber import completion_handler, declared_methods, register

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.state import ContextCompacted
    from llm_worker.worker._config import WorkerConfig

__all__ = ("Registrations",)

S = TypeVar("S")
_HOOK_ARITY = dict.fromkeys(HOOK_POINTS, 1)  # each hook takes its context


class Registrations:
    """Hook and handler registration, shared by every `Worker`."""

    _cfg: WorkerConfig
    _subscribers: list[Any]  # each a TurnMethods

    @property
    def timeline(self) -> Timeline:
        """The Timeline the answers stream through (register handlers with `on_*`)."""
        return self._cfg.timeline

    # -- hooks -------------------------------------------------------------------------------

    def add_on_message_send_hook(
        self,
        hook: OnMessageSendHook,
        *,
        timeout: float | None = None,
    ) -> None:
        """Run `hook` before each request (it may edit the messages, or `Cancel`).

        Any hook may be `async def` or a plain `def` (called directly on the event loop's
        thread, so it must be quick); `llm_worker.hooks` has the rules every hook point shares.
        """
        self._cfg.hooks.on_message_send.append(HookSet.make(hook, timeout))

    def add_before_tool_call_hook(
        self,
        hook: BeforeToolCallHook,
        *,
        timeout: float | None = None,
    ) -> None:
        """Run `hook` before each tool call (it may edit the call, `Skip`, `Abort`, `Pause`)."""
        self._cfg.hooks.before_tool_call.append(HookSet.make(hook, timeout))

    def add_after_tool_call_hook(
        self,
        hook: AfterToolCallHook,
        *,
        timeout: float | None = None,
    ) -> None:
        """Run `hook` after each tool call (it may edit the result, or `Abort`)."""
        self._cfg.hooks.after_tool_call.append(HookSet.make(hook, timeout))

    def add_on_turn_end_hook(
        self,
        hook: OnTurnEndHook,
        *,
        timeout: float | None = None,
    ) -> None:
        """Run `hook` on an answer without tool calls (`Finish`, `ContinueWithMessages`, …)."""
        self._cfg.hooks.on_turn_end.append(HookSet.make(hook, timeout))

    def add_on_abort_hook(self, hook: OnAbortHook, *, timeout: float | None = None) -> None:
        """Run `hook` when a run is cancelled, aborted or fails."""
        self._cfg.hooks.on_abort.append(HookSet.make(hook, timeout))

    def add_hooks(self, hooks: object, *, timeout: float | None = None) -> None:
        """Register every hook method of one object (see `llm_worker.hooks.WorkerHooks`).

        Methods looked for: `on_message_send`, `before_tool_call`, `after_tool_call`,
        `on_turn_end`, `on_abort` — each `async def` or plain `def`, taking the context. A
        subclass of `WorkerHooks` is checked by the type checker, and only the methods it
        overrides are registered.

        Raises:
            ConfigurationError: The object has none of them, is a class, or one of them is
                not callable, takes other arguments or is an async generator; nothing is
                registered then.
        """
        methods = declared_methods(hooks, _HOOK_ARITY, WorkerHooks, "add_hooks", sync=False)
        if not methods:
            raise ConfigurationError(
                f"{type(hooks).__name__} has none of the hook methods {', '.join(HOOK_POINTS)}"
            )
        made = {point: HookSet.make(method, timeout) for point, method in methods.items()}
        for point, registered in made.items():
            getattr(self._cfg.hooks, point).append(registered)

    # -- events ------------------------------------------------------------------------------

    def on_text_block(
        self,
        handler: Handler[TextBlockEvent, S] | Callable[[TextBlockEvent], object],
        *,
        root_only: bool = False,
    ) -> Registration:
        """Register a text-block handler on the Timeline (see `Timeline.on_text_block`).

        Sub-agents' blocks reach it too, each with scopes of its own (`path` on its start
        event says whose); `root_only=True` keeps it to this Worker's own blocks.
        """
        return self.timeline.on_text_block(handler, root_only=root_only)

    def on_thinking_block(
        self,
        handler: Handler[ThinkingBlockEvent, S] | Callable[[ThinkingBlockEvent], object],
        *,
        root_only: bool = False,
    ) -> Registration:
        """Register a thinking-block handler on the Timeline."""
        return self.timeline.on_thinking_block(handler, root_only=root_only)

    def on_tool_use_block(
        self,
        handler: Handler[ToolUseBlockEvent, S] | Callable[[ToolUseBlockEvent], object],
        *,
        root_only: bool = False,
    ) -> Registration:
        """Register a tool-use-block handler on the Timeline."""
        return self.timeline.on_tool_use_block(handler, root_only=root_only)

    def on_usage(
        self,
        handler: Handler[UsageEvent, S] | Callable[[UsageEvent], object],
        *,
        root_only: bool = False,
    ) -> Registration:
        """Register a usage handler on the Timeline."""
        return self.timeline.on_usage(handler, root_only=root_only)

    def on_status(
        self,
        handler: Handler[StatusEvent, S] | Callable[[StatusEvent], object],
        *,
        root_only: bool = False,
    ) -> Registration:
        """Register a status handler on the Timeline."""
        return self.timeline.on_status(handler, root_only=root_only)

    def on_error(
        self,
        handler: Handler[ErrorEvent, S] | Callable[[ErrorEvent], object],
        *,
        root_only: bool = False,
    ) -> Registration:
        """Register an error handler on the Timeline."""
        return self.timeline.on_error(handler, root_only=root_only)

    def on_text_complete(self, handler: Handler[str, S] | Callable[[str], object]) -> None:
        """Call the handler with each finished text block.

        `handler` is a plain callable `(text)`, or a `Handler` object (`new_scope()` and
        `on_event(scope, text)`), whose scope is made once, now.

        Raises:
            ConfigurationError: `handler` is neither.
        """
        self._cfg.text_complete.append(completion_handler(handler, "on_text_complete"))

    def on_tool_call_complete(
        self, handler: Handler[ToolCall, S] | Callable[[ToolCall], object]
    ) -> None:
        """Call the handler with each finished tool call (parsed arguments, as the model sent them).

        `handler` is a plain callable `(call)`, or a `Handler` object (`new_scope()` and
        `on_event(scope, call)`), whose scope is made once, now.

        Raises:
            ConfigurationError: `handler` is neither.
        """
        self._cfg.call_complete.append(completion_handler(handler, "on_tool_call_complete"))

    def on_context_compacted(self, handler: Callable[[ContextCompacted], object]) -> None:
        """Call `handler(event)` with each `ContextCompacted` of this Worker's `ContextPolicy`.

        Called synchronously on the send path, as the other event handlers are.

        Raises:
            ConfigurationError: The Worker has no `context=` policy, or `handler` is not
                callable, or is async (it would never run).
        """
        context = self._cfg.context
        if context is None or not callable(handler):
            raise ConfigurationError(
                "on_context_compacted needs a callable and a Worker(context=ContextPolicy(...))"
            )
        context.handlers.append(completion_handler(handler, "on_context_compacted"))

    def subscribe(self, subscriber: object) -> None:
        """Register every event method of one object (see `llm_worker.hooks.Subscriber`).

        Looked for: `on_text_block(scope, event)`, `on_thinking_block(scope, event)`,
        `on_tool_use_block(scope, event)` (with scopes made by `new_text_block_scope()`,
        `new_thinking_block_scope()`, `new_tool_use_block_scope()` if the object has them,
        else `None`), `on_usage`, `on_status`, `on_error`, `on_text_complete`,
        `on_tool_call_complete`, `on_turn_start(turn)` and `on_turn_end(turn)` — each a
        plain `def`, called synchronously as the events happen. A subclass of `Subscriber`
        is checked by the type checker (event and scope types), and only the methods it
        overrides are registered.

        Raises:
            ConfigurationError: The object has none of these methods, is a class, or one of
                them is async, not callable or takes other arguments; every method is
                checked before any is registered, so a refused subscriber leaves nothing
                behind.
        """
        self._subscribers.append(register(self, subscriber))
