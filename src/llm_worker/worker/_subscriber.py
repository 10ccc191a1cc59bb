"""`Worker.subscribe`: one object's event methods registered as the matching handlers.

Also `announce`, which tells sinks and subscribers that a turn starts or ends, and
`completion_handler`: what `on_text_complete` / `on_tool_call_complete` accept — a plain
callable or a `Handler` object, as the Timeline's registrations do — made one callable.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llm_worker.errors import ConfigurationError
from llm_worker.state import TurnEnded, TurnStarted

if TYPE_CHECKING:
    from llm_worker.worker._registration import Registrations

__all__ = ("announce", "completion_handler", "register")

_BLOCKS = ("text_block", "thinking_block", "tool_use_block")
_META = ("usage", "status", "error")


class _ScopedMethod:
    """A subscriber's `on_<kind>(scope, event)` as a Timeline handler with its own scopes."""

    __slots__ = ("_method", "_new_scope")

    def __init__(self, method: Callable[[Any, Any], object], new_scope: Callable[[], Any]) -> None:
        self._method = method
        self._new_scope = new_scope

    def new_scope(self) -> Any:
        return self._new_scope()

    def on_event(self, scope: Any, event: Any) -> None:
        self._method(scope, event)


def _none() -> None:
    return None


def completion_handler(handler: object, point: str) -> Callable[[Any], object]:
    """`handler` as a one-argument callable: a `Handler` gets its one scope now.

    Raises:
        ConfigurationError: `handler` is neither a `Handler` nor a callable — refused at
            registration, not in the middle of a run.
    """
    on_event = getattr(handler, "on_event", None)
    if isinstance(handler, type) and callable(on_event):
        raise ConfigurationError(f"{point} takes a Handler instance, not the class {handler!r}")
    fn = on_event if callable(on_event) else handler
    if inspect.iscoroutinefunction(fn):
        # Called synchronously, mid-stream: an async one would never run.
        raise ConfigurationError(
            f"{point} calls its handler synchronously; {handler!r} is async (use a plain "
            "function, or a hook, or Worker.stream() for async work)"
        )
    if callable(on_event):
        new_scope = getattr(handler, "new_scope", None)
        scope = new_scope() if callable(new_scope) else None
        return functools.partial(on_event, scope)
    if callable(handler):
        return handler
    raise ConfigurationError(
        f"{point} takes a callable (text or call) -> None, or a Handler object with "
        f"new_scope() and on_event(scope, event); got {handler!r}"
    )


def register(worker: Registrations, subscriber: object) -> None:
    """Register each `on_*` method `subscriber` has with `worker`."""
    for kind in _BLOCKS:
        method = getattr(subscriber, f"on_{kind}", None)
        if callable(method):
            new_scope = getattr(subscriber, f"new_{kind}_scope", None)
            handler = _ScopedMethod(method, new_scope if callable(new_scope) else _none)
            getattr(worker.timeline, f"on_{kind}")(handler)
    for kind in _META:
        method = getattr(subscriber, f"on_{kind}", None)
        if callable(method):
            getattr(worker.timeline, f"on_{kind}")(method)
    text_complete = getattr(subscriber, "on_text_complete", None)
    if callable(text_complete):
        worker.on_text_complete(text_complete)
    call_complete = getattr(subscriber, "on_tool_call_complete", None)
    if callable(call_complete):
        worker.on_tool_call_complete(call_complete)


def announce(
    sinks: list[Callable[[Any], None]], subscribers: list[Any], event: TurnStarted | TurnEnded
) -> None:
    """Give a turn's start or end to every sink and to each subscriber that has the method."""
    for sink in sinks:
        sink(event)
    name = "on_turn_end" if isinstance(event, TurnEnded) else "on_turn_start"
    for subscriber in subscribers:
        method = getattr(subscriber, name, None)
        if callable(method):
            method(event.turn)
