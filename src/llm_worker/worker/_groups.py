"""Task groups of a run whose own error comes out as it is, not wrapped in an exception group."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

__all__ = ("early_group", "unwrapped_group")


@asynccontextmanager
async def early_group(enabled: bool) -> AsyncGenerator[TaskGroup | None, None]:
    """The task group tools started early run in (they outlive the stream), or None."""
    if not enabled:
        yield None
        return
    async with unwrapped_group() as group:
        yield group


@asynccontextmanager
async def unwrapped_group() -> AsyncGenerator[TaskGroup, None]:
    """A task group that re-raises a single error as it is (a run's `HookError`, say)."""
    try:
        async with anyio.create_task_group() as group:
            yield group
    except BaseExceptionGroup as group_error:
        if len(group_error.exceptions) == 1:
            error = group_error.exceptions[0]
            # `from error.__cause__`, not `from None`: keep the error's own chain (a
            # HookError's cause is the exception the hook raised).
            raise error from error.__cause__
        raise
