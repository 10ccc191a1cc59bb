"""`Worker.subscribe`: one object's event methods registered as the matching handlers.

Also `announce`, which tells sinks and subscribers that a turn starts or ends, and
`completion_handler`: what `on_text_complete` / `on_tool_call_complete` accept — a plain
callable or a `Handler` object, as the Timeline's registrations do — made one callable.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from llm_worker.errors import ConfigurationError
from llm_worker.state import TurnEnded, TurnStarted
from llm_worker.worker._hookset import arity_problem

if TYPE_CHECKING:
    from llm_worker.worker._registration import Registrations

__all__ = ("TurnMethods", "announce", "completion_handler", "declared_methods", "register")

_BLOCKS = ("text_block", "thinking_block", "tool_use_block")
_META = ("usage", "status", "error")


class _ScopedMethod:
    """A subscriber's `on_<kind>(scope, event)` as a Timeline handler with its own scopes."""

    __slots__ = ("_method", "_new_scope", "_where")

    def __init__(
        self, method: Callable[[Any, Any], object], new_scope: Callable[[], Any], where: str
    ) -> None:
        self._method = method
        self._new_scope = new_scope
        self._where = where

    def new_scope(self) -> Any:
        return self._new_scope()

    def on_event(self, scope: Any, event: Any) -> None:
        result = self._method(scope, event)
        if result is not None:
            _not_awaitable(result, self._where)


def _not_awaitable(result: object, where: str) -> None:
    """Refuse, at its first event, a method that returned what should have been awaited.

    A plain function wrapping an async one (a decorator without `markcoroutinefunction`)
    passes the checks at registration, and its work would silently never run.

    Raises:
        ConfigurationError: `result` is awaitable (a coroutine is closed first).
    """
    if not inspect.isawaitable(result):
        return
    close = getattr(result, "close", None)
    if callable(close):
        close()  # never awaited: closed here rather than warned about at collection
    raise ConfigurationError(
        f"subscribe: {where} returned {type(result).__name__}, an awaitable; events are "
        "delivered synchronously, mid-stream, so its work would never run (use a plain "
        "function, or Worker.stream() for async work)"
    )


def _sync_only(method: Callable[..., object], where: str) -> Callable[..., object]:
    """`method`, refusing at its first call to return an awaitable (see `_not_awaitable`)."""

    @functools.wraps(method)
    def call(*args: Any) -> None:
        result = method(*args)
        if result is not None:
            _not_awaitable(result, where)

    return call


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


_SCOPES = {f"on_{kind}": f"new_{kind}_scope" for kind in _BLOCKS}
_TURNS = ("on_turn_start", "on_turn_end")
# What each method is called with: (scope, event) for blocks, one value for the others.
_ARITY: dict[str, int] = {
    **dict.fromkeys(_SCOPES, 2),
    **dict.fromkeys(_SCOPES.values(), 0),
    **dict.fromkeys(
        (*(f"on_{kind}" for kind in _META), "on_text_complete", "on_tool_call_complete", *_TURNS),
        1,
    ),
}


class TurnMethods:
    """A subscriber's `on_turn_start` / `on_turn_end`, each `None` when it has none."""

    __slots__ = ("end", "start")

    def __init__(self, methods: dict[str, Callable[..., object]]) -> None:
        self.start = methods.get("on_turn_start")
        self.end = methods.get("on_turn_end")


def declared_methods(
    obj: object, names: dict[str, int], base: type, what: str, *, sync: bool
) -> dict[str, Callable[..., object]]:
    """The methods of `obj` among `names` (name -> how many arguments), each checked.

    A method a subclass of `base` inherits unchanged is a default that does nothing: left
    out. `None` counts as no method.

    Raises:
        ConfigurationError: `obj` is a class; or a method is not callable, takes other
            arguments, or (with `sync`) is async — nothing is registered then.
    """
    if isinstance(obj, type):
        raise ConfigurationError(f"{what} takes an instance, not the class {obj.__qualname__}")
    found: dict[str, Callable[..., object]] = {}
    for name, arity in names.items():
        method = getattr(obj, name, None)
        if method is None or _inherited(obj, name, base):
            continue
        found[name] = _checked(obj, name, method, arity, what, sync=sync)
    return found


def _inherited(obj: object, name: str, base: type) -> bool:
    default = getattr(base, name, None)
    if default is None or not isinstance(obj, base):
        return False
    own = getattr(obj, "__dict__", {})
    return name not in own and getattr(type(obj), name, None) is default


def _checked(
    obj: object, name: str, method: object, arity: int, what: str, *, sync: bool
) -> Callable[..., object]:
    where = f"{what}: {type(obj).__qualname__}.{name}"
    if not callable(method):
        raise ConfigurationError(f"{where} is {type(method).__name__}, not a method")
    if sync and _is_async(method):
        raise ConfigurationError(
            f"{where} is async; events are delivered synchronously, mid-stream, so it would "
            "never run (define it with plain def, and hand slow work to a task or a queue, "
            "or use Worker.stream())"
        )
    problem = arity_problem(method, arity)
    if problem is not None:
        raise ConfigurationError(f"{where} {problem}")
    return method


def _is_async(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):  # partials too
        return True
    # An object whose __call__ is async (not a function itself) is async too.
    call = None if inspect.isroutine(fn) else inspect.getattr_static(type(fn), "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)


def _scope_types(obj: object, base: type) -> tuple[object, ...]:
    """The scope type arguments of `base` (`Subscriber[...]`) in `obj`'s class, or `()`."""
    for cls in type(obj).__mro__:
        for parent in cls.__dict__.get("__orig_bases__", ()):
            if typing.get_origin(parent) is base:
                return typing.get_args(parent)
    return ()


def _check_scopes(
    obj: object, methods: dict[str, Callable[..., object]], types: tuple[object, ...]
) -> None:
    """Refuse a block method typed with a scope no `new_*_scope` makes.

    `Subscriber[list[str]]` types `on_text_block`'s scope as a list, and pyright takes an
    override that appends to it; without `new_text_block_scope` the scope is `None`, and
    the first text event would fail mid-stream.

    Raises:
        ConfigurationError: Such a method, naming it and the scope type.
    """
    for (event, scope), declared in zip(_SCOPES.items(), types, strict=False):
        if event not in methods or scope in methods:
            continue
        if declared is None or declared is type(None) or isinstance(declared, TypeVar):
            continue
        raise ConfigurationError(
            f"subscribe: {type(obj).__qualname__}.{event} takes a {declared!r} scope "
            f"(its Subscriber type argument), but the class has no {scope}() to make one: "
            "without it the scope is None"
        )


def register(worker: Registrations, subscriber: object) -> TurnMethods:
    """Register each `on_*` method `subscriber` has with `worker`, all checked first.

    Raises:
        ConfigurationError: `subscriber` has none of the methods, or one of them is not
            fit (see `declared_methods`); nothing is registered then.
    """
    from llm_worker.hooks import Subscriber

    methods = declared_methods(subscriber, _ARITY, Subscriber, "subscribe", sync=True)
    _check_scopes(subscriber, methods, _scope_types(subscriber, Subscriber))
    owner = type(subscriber).__qualname__
    methods = {
        name: m if name in _SCOPES or name in _SCOPES.values() else _sync_only(m, f"{owner}.{name}")
        for name, m in methods.items()
    }
    if not any(name.startswith("on_") for name in methods):
        names = ", ".join(n for n in _ARITY if n.startswith("on_"))
        raise ConfigurationError(
            f"subscribe: {type(subscriber).__qualname__} has none of the methods {names}"
        )
    for event, scope in _SCOPES.items():
        method = methods.get(event)
        if method is not None:
            handler = _ScopedMethod(method, methods.get(scope, _none), f"{owner}.{event}")
            getattr(worker.timeline, event)(handler)
    for kind in _META:
        method = methods.get(f"on_{kind}")
        if method is not None:
            getattr(worker.timeline, f"on_{kind}")(method)
    for name in ("on_text_complete", "on_tool_call_complete"):
        method = methods.get(name)
        if method is not None:
            getattr(worker, name)(method)
    return TurnMethods(methods)


def announce(
    sinks: list[Callable[[Any], None]],
    subscribers: list[TurnMethods],
    event: TurnStarted | TurnEnded,
) -> None:
    """Give a turn's start or end to every sink and to each subscriber that has the method."""
    for sink in sinks:
        sink(event)
    ended = isinstance(event, TurnEnded)
    for subscriber in subscribers:
        method = subscriber.end if ended else subscriber.start
        if method is not None:
            method(event.turn)
