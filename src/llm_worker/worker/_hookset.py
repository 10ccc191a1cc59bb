"""Registered hooks and the chain semantics every hook point shares."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio

from llm_worker._log import logger
from llm_worker.errors import ConfigurationError, HookError
from llm_worker.hooks import (
    Abort,
    AbortContext,
    Cancel,
    Continue,
    ContinueWithMessages,
    Finish,
    MessageSendContext,
    Pause,
    Skip,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
    hook_name,
)

__all__ = ("HookSet", "Registered", "arity_problem", "check")

C = TypeVar("C")
R = TypeVar("R")

# The results each point accepts (its result union in hooks.py, checked at run time too:
# a hook written without type checking can return anything); anything else is a HookError.
_ALLOWED: dict[str, tuple[type, ...]] = {
    "on_message_send": (Continue, Cancel),
    "before_tool_call": (Continue, Skip, Abort, Pause),
    "after_tool_call": (Continue, Abort),
    "on_turn_end": (Finish, ContinueWithMessages, Pause),
    "on_abort": (),
}
# The results that pass to the next hook rather than end the chain.
_PASSING = (Continue, Finish)
_log = logger("llm_worker.hooks")

HookObserver = Callable[[str, str, object, BaseException | None], None]
"""`(point, hook name, result, error)`, called after each hook ran (tracing's span events)."""


@dataclass(slots=True)
class Registered(Generic[C, R]):
    """One registered hook with its name and timeout."""

    fn: Callable[[C], Awaitable[R | None] | R | None]
    name: str
    timeout: float | None


@dataclass(slots=True)
class HookSet:
    """The hooks of one Worker, per point, in registration order."""

    on_message_send: list[Registered[MessageSendContext, Any]] = field(default_factory=lambda: [])
    before_tool_call: list[Registered[ToolCallContext, Any]] = field(default_factory=lambda: [])
    after_tool_call: list[Registered[ToolResultContext, Any]] = field(default_factory=lambda: [])
    on_turn_end: list[Registered[TurnEndContext, Any]] = field(default_factory=lambda: [])
    on_abort: list[Registered[AbortContext, None]] = field(default_factory=lambda: [])
    observers: list[HookObserver] = field(default_factory=lambda: [])
    """Told of every hook call and its result or error; none unless tracing is on."""

    @staticmethod
    def make(
        fn: Callable[[C], Awaitable[R | None] | R | None], timeout: float | None
    ) -> Registered[C, R]:
        """Wrap a hook for registration."""
        if not callable(fn) or isinstance(fn, type):
            raise ConfigurationError(f"a hook must be a function (async or not), got {fn!r}")
        if inspect.isasyncgenfunction(fn):
            raise ConfigurationError(
                f"hook {hook_name(fn)} is an async generator; a hook returns (or awaits) one result"
            )
        problem = arity_problem(fn, 1)
        if problem is not None:
            raise ConfigurationError(f"hook {hook_name(fn)} {problem}")
        return Registered(fn, hook_name(fn), timeout)

    async def chain(
        self,
        point: str,
        hooks: list[Registered[C, Any]],
        ctx: C,
        edits: Callable[[C], str | None] | None = None,
    ) -> Any:
        """Run one point's hooks in order; return the first decisive result, or None.

        `Continue` (or `None`) passes to the next hook; `Finish` also passes on, so that every
        on_turn_end hook gets to check the answer. `edits` says what is wrong with the context
        a hook left (`None`: nothing), checked after each hook so the error names it.
        """
        for hook in hooks:
            try:
                result = check(point, hook.name, await _call(point, hook, ctx))
                problem = edits(ctx) if edits is not None else None
                if problem is not None:
                    raise HookError(
                        f"hook {hook.name} ({point}) {problem}", hook=hook.name, kind=point
                    )
            except HookError as exc:
                self.observe(point, hook.name, None, exc)
                raise
            if self.observers:
                self.observe(point, hook.name, result, None)
            if result is None or isinstance(result, _PASSING):
                continue
            return result
        return None

    async def abort(self, ctx: AbortContext) -> list[BaseException]:
        """Run every on_abort hook (each even if another fails); return their errors."""
        errors: list[BaseException] = []
        for hook in self.on_abort:
            try:
                check("on_abort", hook.name, await _call("on_abort", hook, ctx))
            except HookError as exc:
                self.observe("on_abort", hook.name, None, exc)
                errors.append(exc)
            else:
                if self.observers:
                    self.observe("on_abort", hook.name, None, None)
        return errors

    def observe(self, point: str, name: str, result: object, error: HookError | None) -> None:
        """Tell the observers of one hook call; log a hook's error (`llm_worker.hooks`)."""
        if error is not None:
            _log.warning("%s", error, extra={"hook": name, "hook_point": point})
        for observer in self.observers:
            observer(point, name, result, error)


def arity_problem(fn: Callable[..., object], arity: int) -> str | None:
    """What is wrong with calling `fn` with `arity` positional arguments, or None.

    Checked at registration: a function that cannot take what it is called with would fail
    at its first call, in the middle of a run.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: taken as it is
        return None
    try:
        signature.bind(*([None] * arity))
    except TypeError:
        wanted = {0: "no argument", 1: "one argument", 2: "two arguments (scope, event)"}
        return f"must take {wanted.get(arity, f'{arity} arguments')}; its signature is {signature}"
    return None


def check(point: str, name: str, result: object) -> Any:
    """`result` if hook `name` may return it at `point`; else a HookError saying what may be."""
    allowed = _ALLOWED[point]
    if result is None or isinstance(result, allowed):
        return result
    shown = repr(result)
    if inspect.iscoroutine(result):
        result.close()  # never awaited: closed here rather than warned about at collection
        shown += " (a coroutine: is an `await` missing in the hook?)"
    names = ", ".join(kind.__name__ for kind in allowed)
    raise HookError(
        f"hook {name} returned {shown}, which {point} does not allow (it allows "
        f"{names + ' or None' if names else 'only None'})",
        hook=name,
        kind=point,
    )


async def _call(point: str, hook: Registered[C, Any], ctx: C) -> Any:
    started = anyio.current_time()
    try:
        result = hook.fn(ctx)
        if inspect.isawaitable(result):
            if hook.timeout is None:
                return await result
            # move_on_after, not fail_after: a TimeoutError the hook raises itself (an HTTP
            # call that timed out) must be reported as that, not as the hook's own timeout.
            with anyio.move_on_after(hook.timeout):
                return await result
        # A sync hook cannot be interrupted: it is held to its timeout once it returns.
        elif hook.timeout is None or anyio.current_time() - started <= hook.timeout:
            return result
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        raise HookError(
            f"hook {hook.name} ({point}) raised {type(exc).__name__}: {exc}",
            hook=hook.name,
            kind=point,
        ) from exc
    raise HookError(
        f"hook {hook.name} ({point}) ran past its timeout of {hook.timeout} s",
        hook=hook.name,
        kind=point,
    )
