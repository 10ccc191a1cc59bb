"""One batch of tool calls: decide (before hooks), execute, check (after hooks), answer.

Order guarantees: before_tool_call hooks run call by call in call order; allowed calls run
concurrently (a tool marked `exclusive` runs alone, after the others); after_tool_call hooks run
in call order, for every result (failed, skipped and denied ones too); results join the history
in call order, and `ToolResultReady` events follow the call order, not the completion order.

What the history receives:

- the model's own calls: the before_tool_call chain works on a copy of each call, so the
  arguments a hook rewrites reach the tool, the after hooks and the result, never the
  assistant message (replays and signatures depend on it);
- a result only once every after_tool_call hook has seen it. When the batch ends early (an
  `Abort`, a hook that raises, a cancellation), a result the chain did not finish is replaced
  by an error result saying so, never its content: a masking hook that did not get to run must
  not leak what it would have masked.

With early start (a Worker option) a call is decided as soon as its block stops, while the
answer still streams, and — if its tool may start early (read-only or idempotent, not exclusive)
— starts at once in the run's task group. The hooks still come first and in order.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import anyio
from anyio.abc import TaskGroup

import llm_worker.tools._messages as say
from llm_worker._log import logger
from llm_worker._tokens import leaf_providers
from llm_worker.errors import Aborted
from llm_worker.hooks import (
    Abort,
    Pause,
    Skip,
    ToolCallContext,
    ToolOutcome,
    ToolResultContext,
)
from llm_worker.messages import DocumentPart, ImagePart, Message, Part, ToolResultPart
from llm_worker.state import PendingCall, ToolResultReady
from llm_worker.tools import Tool, ToolResult, execute_call, tool_meta
from llm_worker.worker._carry import CallKey, Carried, call_key
from llm_worker.worker._decisions import not_json
from llm_worker.worker._guard import input_gate_open
from llm_worker.worker._intercept import ToolStep, intercepted
from llm_worker.worker._media_check import media_keep, sendable_results
from llm_worker.worker._steering import skipped_result
from llm_worker.worker._tree import children_paused

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.worker._turn import Run

__all__ = ("Batch",)

_log = logger("llm_worker.blobs")


class Batch:
    """The tool calls of one answer and what became of them."""

    __slots__ = (
        "_carried",
        "_checked",
        "_pause",
        "_running",
        "_started",
        "decided",
        "group",
        "owner",
        "pending",
    )

    def __init__(
        self,
        run: Run,
        pending: list[PendingCall],
        group: TaskGroup | None,
        decided: frozenset[str] = frozenset(),
    ) -> None:
        self.owner = run
        self.pending = pending
        self.group = group
        # On resume, the calls the hooks may treat as seen before: the one whose hook paused
        # and those the application gave a Decision. A later call never reached the hooks; it
        # is new to them (`resumed=False`), so an approval hook asks about it too.
        self.decided = decided
        self._running: dict[int, anyio.Event] = {}
        self._pause: Pause | None = None
        # Calls whose tool was started, and results every after hook has seen (by index).
        self._started: set[int] = set()
        self._checked: set[int] = set()
        self._carried: dict[CallKey, Carried] = {}  # early runs of a withdrawn answer

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
        if pending.status == "allowed" and tool is not None and self._may_start_early(tool):
            done = self._running[index] = anyio.Event()
            self.group.start_soon(self._execute_one, index, done)

    def _may_start_early(self, tool: Tool) -> bool:
        meta = tool_meta(tool)
        gate = self.owner.gate
        if gate is not None and gate.pending and meta.effect != "read_only":
            return False  # it runs in the batch, once the input guardrails passed
        return meta.may_start_early

    def may_restart(self) -> bool:
        """Whether the answer may be requested again: no started call had side effects."""
        for index in self._running:
            tool = self.owner.cfg.registry.get(self.pending[index].call.name)
            if tool is None or not tool_meta(tool).may_rerun:
                return False
        return True

    def restarted(self) -> Batch:
        """The batch of an answer that replaces this one mid-stream (a fallback client's).

        The calls this batch started early are carried: the new answer's identical call takes
        their result instead of starting the tool again.
        """
        batch = Batch(self.owner, [], self.group)
        batch._carried = dict(self._carried)
        for index, done in self._running.items():
            pending = self.pending[index]
            batch._carried.setdefault(call_key(pending.call), Carried(done, pending))
        return batch

    # -- the batch after the answer ------------------------------------------------------

    async def run(self, *, resumed: bool) -> Pause | None:
        """Decide, execute and check every call; append the results. A `Pause` stops it."""
        if self._pause is None:
            for index, pending in enumerate(self.pending):
                if pending.status == "pending":
                    seen = pending.call.id in self.decided
                    await self._decide(index, resumed=resumed and seen)
                    if self._pause is not None:
                        break
        for done in self._running.values():
            await done.wait()
        if self._pause is not None:
            return self._pause
        await self._execute_allowed()
        waiting = children_paused(self.owner, self.pending)
        if waiting is not None:  # a sub-agent paused: its call waits for the resume
            return waiting
        await self._after_hooks()
        self._media_checked()
        results = [p.result for p in self.pending if p.result is not None]
        if results:  # a batch without calls (a hand-made pause state) adds no empty message
            self.owner.history.append(Message("user", [r.to_part() for r in results]))
        if self.owner.cfg.sinks:
            for result in results:
                for sink in self.owner.cfg.sinks:
                    sink(ToolResultReady(result))
        return None

    def _media_checked(self) -> None:
        """Take out of each result the media the provider would refuse (the model reads why)."""
        owner = self.owner
        results = [p.result for p in self.pending]
        keep = media_keep(owner.cfg)
        checked = sendable_results(results, leaf_providers(owner.cfg.client), _beside(owner), keep)
        for pending, result in zip(self.pending, checked, strict=True):
            pending.result = result

    async def _decide(self, index: int, *, resumed: bool) -> None:
        cfg = self.owner.cfg
        pending = self.pending[index]
        if self._not_offered(pending):
            return
        tool = cfg.registry.get(pending.call.name)
        meta = tool_meta(tool) if tool is not None else None
        # The hooks' own copy: the model's call (in the history, in a pause state) stays as
        # it was sent, nested values included.
        call = dataclasses.replace(pending.call, input=copy.deepcopy(pending.call.input))
        ctx = ToolCallContext(
            call, meta, tool, resumed=resumed, index=index, approved=pending.approved
        )
        decided = await cfg.hooks.chain(
            "before_tool_call", cfg.hooks.before_tool_call, ctx, _call_edits(pending.call)
        )
        pending.approved = ctx.approved
        if decided is None and meta is not None and meta.requires_approval and not ctx.approved:
            decided = _approval_pause(pending.call)
        if isinstance(decided, Pause):
            # The call keeps the model's arguments: on resume the chain starts over from them,
            # so a rewrite made before the pause is not applied twice. The rewrites of the
            # hooks that ran are kept beside them, for a decision that skips the hooks.
            changed = ctx.call.input != pending.call.input
            pending.rewritten_input = ctx.call.input if changed else None
            self._pause = decided
            return
        pending.rewritten_input = None  # the call now carries the rewrites
        if ctx.call.error is not None and ctx.call.input != pending.call.input:
            # A hook supplied arguments for a call whose own did not parse: they now stand.
            ctx.call.error = None
        pending.call = ctx.call
        if isinstance(decided, Skip):
            pending.status = "skipped"
            why = f": {decided.reason}" if decided.reason else ""
            message = f"Skipped: a before_tool_call hook did not let this call run{why}."
            pending.result = ToolResult(
                call.id, call.name, message, is_error=True, input=ctx.call.input
            )
        elif isinstance(decided, Abort):
            await self._abort(decided.reason)
        else:
            pending.status = "allowed"

    def _not_offered(self, pending: PendingCall) -> bool:
        """A call of a registered tool its answer was not offered: an error result naming it."""
        offered = self.owner.offered
        name = pending.call.name
        if offered is None or name in offered or name not in self.owner.cfg.registry:
            return False  # an unknown tool's call gets execute_call's own message
        names = [n for n in self.owner.cfg.registry.names if n in offered]
        call = pending.call
        pending.status = "not_run"
        pending.result = ToolResult(
            call.id, name, say.not_enabled(name, names), is_error=True, input=call.input
        )
        return True

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
        tool = cfg.registry.get(pending.call.name)
        # Every call passes here: none with an effect starts before the input guardrails pass.
        read_only = tool is not None and tool_meta(tool).effect == "read_only"
        carried = self._carried.pop(call_key(pending.call), None) if self._carried else None
        try:
            if carried is not None:  # started already, on a withdrawn answer
                self._started.add(index)
                pending.result = await carried.result_for(pending.call)
                pending.status = "done"
                return
            await input_gate_open(self.owner, read_only=read_only)
            if self._steered(pending):
                return
            self._started.add(index)
            step = ToolStep(pending.call, tool, self.owner.requests)
            proceed = lambda: self._execute(tool, pending.call)  # noqa: E731
            budget = self.owner.budget
            refused = budget.tool_call() if budget is not None else None
            if refused is not None:  # over a limit: the model reads why; the next request raises
                proceed = lambda: _refused(pending.call, refused)  # noqa: E731
            else:
                self.owner.tool_calls += 1
            try:
                pending.result = await intercepted(cfg.interceptors, "tool_call", step, proceed)
            except Exception as exc:  # an interceptor's fault: the model reads it, the run goes on
                pending.result = ToolResult(
                    pending.call.id,
                    pending.call.name,
                    f"the call could not be completed: {type(exc).__name__}: {exc}",
                    is_error=True,
                    input=pending.call.input,
                    exception=exc,
                )
            pending.status = "done"
        finally:
            if done is not None:
                done.set()

    def _steered(self, pending: PendingCall) -> bool:
        """A steer is queued: this call, not started yet, is skipped (the model reads why).

        A call the application decided on resume runs as decided: the person saw it after
        the steer was sent.
        """
        queue = self.owner.queue
        if queue is None or not queue.steers or pending.call.id in self.owner.decided:
            return False
        pending.result = skipped_result(pending.call)
        pending.status = "not_run"
        return True

    async def _execute(self, tool: Tool | None, call: ToolCall) -> ToolResult:
        cfg = self.owner.cfg
        result = await execute_call(
            tool,
            call,
            available=cfg.registry.names,
            format_error=cfg.format_tool_error,
            context=self.owner.tool_context(),
        )
        try:
            return await cfg.store_output(result)
        except Exception as exc:  # the tool ran: say so, rather than fail the whole batch
            _log.warning("the output of call %s could not be stored", call.id, exc_info=exc)
            message = say.not_stored(result.name, len(result.content), exc)
            return ToolResult(
                result.tool_use_id,
                result.name,
                message,
                is_error=True,
                input=result.input,
                exception=exc,
            )

    async def _after_hooks(self) -> None:
        cfg = self.owner.cfg
        for index, pending in enumerate(self.pending):
            if pending.result is None or index in self._checked:
                continue
            tool = cfg.registry.get(pending.call.name)
            meta = tool_meta(tool) if tool is not None else None
            outcome = _outcome(pending)
            if cfg.interceptors and outcome in ("skipped", "denied", "not_run"):
                step = ToolStep(pending.call, tool, self.owner.requests)
                for interceptor in cfg.interceptors:
                    interceptor.tool_not_run(step, outcome, pending.result)
            ctx = ToolResultContext(pending.result, pending.call, meta, tool, outcome=outcome)
            decided = await cfg.hooks.chain(
                "after_tool_call", cfg.hooks.after_tool_call, ctx, _result_edits(pending.call)
            )
            if isinstance(decided, Abort):
                await self._abort(decided.reason)
            pending.result = _settled(ctx.result, pending.call)
            self._checked.add(index)

    def partial_results(self, why: str) -> Message | None:
        """The results so far, with the missing ones marked `why` — for a cancelled batch.

        Only results every after hook has seen are kept; the others say what happened.
        A call cut short while it ran says so; for a tool with side effects, the model also
        reads that the effect may have happened and that the call must not be blindly repeated.
        """
        if not self.pending:
            return None
        # With no after hook registered, every result has been seen by all of them.
        unchecked_ok = not self.owner.cfg.hooks.after_tool_call
        kept = [
            p.result if unchecked_ok or index in self._checked else None
            for index, p in enumerate(self.pending)
        ]
        provider = leaf_providers(self.owner.cfg.client)
        checked = sendable_results(kept, provider, _beside(self.owner), media_keep(self.owner.cfg))
        parts: list[Part] = []
        for index, pending in enumerate(self.pending):
            result = checked[index]
            if result is not None:
                parts.append(result.to_part())
            else:
                text = self._missing(index, why)
                parts.append(
                    ToolResultPart(pending.call.id, text, is_error=True, name=pending.call.name)
                )
        return Message("user", parts)

    def _missing(self, index: int, why: str) -> str:
        pending = self.pending[index]
        ran = pending.status == "done" or index in self._started
        if pending.result is not None:
            did = "ran" if ran else "did not run"
            return (
                f"Result withheld: the call {did}, but the run was {why} before every "
                "after_tool_call hook had checked its result."
            )
        if ran:
            return say.cut_short(pending.call.name, why, side_effect=self._has_side_effect(index))
        return f"Not run: this call never started, because the run was {why} first."

    def _has_side_effect(self, index: int) -> bool:
        tool = self.owner.cfg.registry.get(self.pending[index].call.name)
        return tool is not None and not tool_meta(tool).may_rerun


async def _refused(call: ToolCall, why: str) -> ToolResult:
    return ToolResult(call.id, call.name, why, is_error=True, input=call.input)


def _beside(run: Run) -> list[Message]:
    """The messages a batch's results will be sent with: the run's last request's, or history.

    The history for a batch resumed before any request of its run. A `ContextPolicy` sends
    fewer messages than the history holds (a summary's turns leave with their images), so
    the history's media would refuse images the next request has room for.
    """
    return run.history if run.sent is None else run.sent


def _outcome(pending: PendingCall) -> ToolOutcome:
    status = pending.status
    if status in ("skipped", "denied", "not_run"):
        return status
    return "error" if pending.result is not None and pending.result.is_error else "done"


def _call_edits(model: ToolCall) -> Callable[[ToolCallContext], str | None]:
    """What a before hook may not do: change the id or tool, non-dict input, non-bool approved."""

    def problem(ctx: ToolCallContext) -> str | None:
        call = cast("object", ctx.call)
        if getattr(call, "id", None) != model.id or getattr(call, "name", None) != model.name:
            return (
                f"changed which call ctx.call is (model's call: {model.id} {model.name}); "
                "a hook may rewrite call.input only"
            )
        arguments: object = getattr(call, "input", None)
        if not isinstance(arguments, dict):
            return f"set call.input to {type(arguments).__name__}, not a JSON object (a dict)"
        unfit = not_json(ctx.call.input, "call.input")
        if unfit is not None:  # the arguments go into the result and any pause state as JSON
            return f"rewrote the arguments into what JSON cannot hold ({unfit})"
        approved = cast("object", ctx.approved)
        if not isinstance(approved, bool):  # "no" is truthy: it would approve the call
            return f"set ctx.approved to {approved!r}, not True or False"
        return None

    return problem


def _result_edits(call: ToolCall) -> Callable[[ToolResultContext], str | None]:
    """What an after hook may not leave: no ToolResult, non-text content, another call's."""

    def problem(ctx: ToolResultContext) -> str | None:
        result = cast("object", ctx.result)  # hooks run without type checking too
        if not isinstance(result, ToolResult):
            return f"set ctx.result to {type(result).__name__}, not a ToolResult"
        content = cast("object", result.content)
        if not isinstance(content, str):
            return f"set result.content to {type(content).__name__}, not text (a str)"
        if not _all_media(cast("object", result.media)):
            return "set result.media to something other than a list of ImagePart / DocumentPart"
        if result.tool_use_id != call.id:
            return (
                f"set a result for call {result.tool_use_id!r} in ctx.result, which answers "
                f"call {call.id!r}"
            )
        return None

    return problem


def _all_media(media: object) -> bool:
    items = cast("list[object]", media) if isinstance(media, list) else None
    return items is not None and all(isinstance(m, ImagePart | DocumentPart) for m in items)


def _settled(result: ToolResult, call: ToolCall) -> ToolResult:
    # A hook may build a new result (`ToolResult.error(ctx.call.id, ...)`) without a name.
    if not result.name:
        result.name = call.name
    return result


def _approval_pause(call: ToolCall) -> Pause:
    # The reason is for the application (RunResult.reason), which decides by call id.
    return Pause(f"{call.name} requires approval (call {call.id})")
