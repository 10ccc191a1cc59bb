"""One batch of tool calls: decide (before hooks), execute, check (after hooks), answer.

Order guarantees: before_tool_call hooks run call by call in call order; allowed calls run
concurrently (a tool marked `exclusive` runs alone, after the others); after_tool_call hooks run
in call order; results join the history in call order, and `ToolResultReady` events follow the
call order, not the completion order.

With early start (a Worker option) a call is decided as soon as its block stops, while the
answer still streams, and — if its tool may start early (read-only or idempotent, not exclusive)
— starts at once in the run's task group. The hooks still come first and in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

import llm_worker.tools._messages as say
from llm_worker.errors import Aborted
from llm_worker.hooks import (
    Abort,
    Pause,
    Skip,
    ToolCallContext,
    ToolResultContext,
)
from llm_worker.messages import Message, Part, ToolResultPart
from llm_worker.state import PendingCall, ToolResultReady
from llm_worker.tools import ToolResult, execute_call, tool_meta

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.worker._turn import Run

__all__ = ("Batch",)


class Batch:
    """The tool calls of one answer and what became of them."""

    __slots__ = ("_pause", "_running", "group", "owner", "pending")

    def __init__(self, run: Run, pending: list[PendingCall], group: TaskGroup | None) -> None:
        self.owner = run
        self.pending = pending
        self.group = group
        self._running: dict[int, anyio.Event] = {}
        self._pause: Pause | None = None

    # -- early start, while the answer streams -----------------------------------------------

    async def arrived(self, call: ToolCall) -> None:
        """A tool-use block stopped: record the call; with early start, decide and start it."""
        self.pending.append(PendingCall(call))
        if self.group is None or self._pause is not None:
            return
        index = len(self.pending) - 1
        if any(p.status == "pending" for p in self.pending[:index]):
            return  # an earlier call is undecided: hooks must run in call order
        await self._decide(index, resumed=False)
        pending = self.pending[index]
        tool = self.owner.cfg.registry.get(pending.call.name)
        if pending.status == "allowed" and tool is not None and tool_meta(tool).may_start_early:
            done = self._running[index] = anyio.Event()
            self.group.start_soon(self._execute_one, index, done)

    def may_restart(self) -> bool:
        """Whether the answer may be requested again: no started call had side effects."""
        for index in self._running:
            tool = self.owner.cfg.registry.get(self.pending[index].call.name)
            if tool is None or not tool_meta(tool).may_rerun:
                return False
        return True

    # -- the batch after the answer ------------------------------------------------------

    async def run(self, *, resumed: bool) -> Pause | None:
        """Decide, execute and check every call; append the results. A `Pause` stops it."""
        if self._pause is None:
            for index, pending in enumerate(self.pending):
                if pending.status == "pending":
                    await self._decide(index, resumed=resumed)
                    if self._pause is not None:
                        break
        for done in self._running.values():
            await done.wait()
        if self._pause is not None:
            return self._pause
        await self._execute_allowed()
        await self._after_hooks()
        results = [p.result for p in self.pending if p.result is not None]
        if results:  # a batch without calls (a hand-made pause state) adds no empty message
            self.owner.history.append(Message("user", [_part(r) for r in results]))
        if self.owner.cfg.sinks:
            for result in results:
                for sink in self.owner.cfg.sinks:
                    sink(ToolResultReady(result))
        return None

    async def _decide(self, index: int, *, resumed: bool) -> None:
        cfg = self.owner.cfg
        pending = self.pending[index]
        tool = cfg.registry.get(pending.call.name)
        meta = tool_meta(tool) if tool is not None else None
        ctx = ToolCallContext(pending.call, meta, tool, resumed=resumed, index=index)
        original = dict(pending.call.input)
        decided = await cfg.hooks.chain("before_tool_call", cfg.hooks.before_tool_call, ctx)
        if ctx.call.error is not None and ctx.call.input != original:
            # A hook supplied arguments for a call whose own did not parse: they now stand.
            ctx.call.error = None
        pending.call = ctx.call
        if isinstance(decided, Skip):
            pending.status = "skipped"
            why = f": {decided.reason}" if decided.reason else ""
            pending.result = ToolResult(
                pending.call.id,
                pending.call.name,
                f"Skipped: a before_tool_call hook did not let this call run{why}.",
                is_error=True,
            )
        elif isinstance(decided, Abort):
            await self._abort(decided.reason)
        elif isinstance(decided, Pause):
            self._pause = decided
        else:
            pending.status = "allowed"

    async def _abort(self, reason: str) -> None:
        run = self.owner
        await run.cleanup(reason, "aborted", None)
        raise Aborted(reason)

    async def _execute_allowed(self) -> None:
        registry = self.owner.cfg.registry
        parallel: list[int] = []
        alone: list[int] = []
        for index, pending in enumerate(self.pending):
            if pending.status != "allowed":
                continue
            tool = registry.get(pending.call.name)
            exclusive = tool is not None and not tool_meta(tool).may_run_parallel
            (alone if exclusive else parallel).append(index)
        if parallel:
            async with anyio.create_task_group() as group:
                for index in parallel:
                    group.start_soon(self._execute_one, index, None)
        for index in alone:
            await self._execute_one(index, None)

    async def _execute_one(self, index: int, done: anyio.Event | None) -> None:
        cfg = self.owner.cfg
        pending = self.pending[index]
        try:
            tool = cfg.registry.get(pending.call.name)
            result = await execute_call(tool, pending.call, available=cfg.registry.names)
            try:
                pending.result = await cfg.store_output(result)
            except Exception as exc:  # the tool ran: say so, rather than fail the whole batch
                message = say.not_stored(result.name, len(result.content), exc)
                pending.result = ToolResult(result.tool_use_id, result.name, message, is_error=True)
            pending.status = "done"
        finally:
            if done is not None:
                done.set()

    async def _after_hooks(self) -> None:
        cfg = self.owner.cfg
        for pending in self.pending:
            if pending.status != "done" or pending.result is None:
                continue
            tool = cfg.registry.get(pending.call.name)
            meta = tool_meta(tool) if tool is not None else None
            ctx = ToolResultContext(pending.result, pending.call, meta, tool)
            decided = await cfg.hooks.chain("after_tool_call", cfg.hooks.after_tool_call, ctx)
            pending.result = ctx.result
            if isinstance(decided, Abort):
                await self._abort(decided.reason)

    def partial_results(self, why: str) -> Message | None:
        """The results so far, with the missing ones marked `why` — for a cancelled batch."""
        if not self.pending:
            return None
        parts: list[Part] = []
        for pending in self.pending:
            if pending.result is not None:
                parts.append(_part(pending.result))
            else:
                parts.append(
                    ToolResultPart(
                        pending.call.id,
                        f"No result: the call was {why} before it returned.",
                        is_error=True,
                        name=pending.call.name,
                    )
                )
        return Message("user", parts)


def _part(result: ToolResult) -> ToolResultPart:
    return ToolResultPart(
        result.tool_use_id, result.content, is_error=result.is_error, name=result.name
    )
