"""The tools offered for the next answer: each `enabled=` callable asked before a request."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from llm_worker.errors import HookError
from llm_worker.messages import Message, ToolSpec
from llm_worker.tools._enabled import EnabledContext

if TYPE_CHECKING:
    from llm_worker.events import UsageEvent
    from llm_worker.tools import ToolRegistry

__all__ = ("offered", "only_offered")


async def offered(
    registry: ToolRegistry,
    history: Sequence[Message],
    *,
    requests: int,
    usage: UsageEvent,
    path: tuple[str, ...],
) -> frozenset[str] | None:
    """The names of the tools offered now; `None` when no tool has an `enabled=` callable.

    Raises:
        HookError: An `enabled` callable raised or returned something other than a bool.
    """
    names: list[str] = []
    asked = False
    for name, meta in registry.metas.items():
        if meta.enabled is None:
            names.append(name)
            continue
        asked = True
        ctx = EnabledContext(name, history, requests, usage, path)
        if await _ask(meta.enabled, ctx):
            names.append(name)
    return frozenset(names) if asked else None


async def _ask(check: Callable[[EnabledContext], object], ctx: EnabledContext) -> bool:
    label = getattr(check, "__qualname__", repr(check))
    try:
        answer = check(ctx)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # the application's callable: named, chained
        raise HookError(
            f"enabled= of tool {ctx.tool_name!r} ({label}) raised {type(exc).__name__}: {exc}",
            hook=label,
            kind="enabled",
        ) from exc
    if not isinstance(answer, bool):
        raise HookError(
            f"enabled= of tool {ctx.tool_name!r} ({label}) returned "
            f"{type(answer).__name__}, not True or False",
            hook=label,
            kind="enabled",
        )
    return answer


def only_offered(specs: list[ToolSpec], names: frozenset[str] | None) -> list[ToolSpec]:
    """`specs` without the tools not offered now, in their order."""
    if names is None:
        return specs
    return [spec for spec in specs if spec.name in names]
