"""The run tree: which run a sub-agent runs under, and how its events and usage go up.

A run is a node: the root run (`Worker.run`, `stream`, `resume`) has the path `()`; a
sub-agent's run (`Worker.as_tool`) has its parent's path plus the id of the call that started
it. The node of the running run is a context variable, so a tool call (which runs in the
run's context) finds its parent; `Worker._go` enters a node for every run.

A sub-agent's events go up through a `Forwarder`, the first sink of the child run: it stamps
the child's own events with the child's path (its descendants' carry theirs already), gives
the parent's Timeline a branch per path (each child's blocks in scopes of their own), and hands
the event to the parent's readers (`RunStream`s) and to the parent's own forwarder, so it
reaches the root. The root's events never pass here: their cost is unchanged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_worker._cost import RequestUsage
from llm_worker._run_events import TurnEnded
from llm_worker.errors import PauseStateError, ToolError
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    PingEvent,
    StatusEvent,
    UsageEvent,
)
from llm_worker.hooks import Pause
from llm_worker.state import ChildRun, PauseState, RunStatus
from llm_worker.worker._stream import Channel

if TYPE_CHECKING:
    from llm_worker.state import Decision, PendingCall
    from llm_worker.timeline import Timeline
    from llm_worker.worker._config import WorkerConfig
    from llm_worker.worker._turn import Run

__all__ = (
    "Below",
    "ChildPaused",
    "Forwarder",
    "Launch",
    "Node",
    "check_not_stale",
    "child_run",
    "current_node",
    "entered",
    "forwarder_of",
    "is_reader",
    "launching",
    "parent_limits",
    "route_decisions",
    "tree_usage",
)

Sink = Callable[[Any], None]
Resumed = tuple[PauseState, dict[str, "Decision"]]
"""A paused sub-agent's state and the decisions routed to it."""


@dataclass(slots=True)
class Below:
    """What a run holds of the tree below it (`Run.tree`).

    Attributes:
        children: The sub-agent runs below it (their usage is not in the run's own:
            `Run.result` adds it).
        paused: The sub-agents that paused in this run, by call id.
        resume: The paused sub-agents this run resumes, by call id, with their decisions.
        handover: A handoff the model asked for (a `_handoff.Handover`), taken once its
            batch is answered.
    """

    children: list[ChildRun] = field(default_factory=lambda: [])
    paused: dict[str, PauseState] = field(default_factory=lambda: {})
    resume: dict[str, Resumed] = field(default_factory=lambda: {})
    handover: Any = None

    def totals(self, own: UsageEvent, requests: list[RequestUsage]) -> dict[str, Any]:
        """`RunResult`'s usage, request usage and children: the run's own and the tree's."""
        usage, every = tree_usage(own, requests, self.children)
        return {"usage": usage, "request_usage": every, "children": list(self.children)}

    def saved(self) -> dict[str, Any]:
        """What a `PauseState` keeps of the tree: the paused children and the records."""
        return {"children": dict(self.paused), "child_runs": list(self.children)}


_TIMELINE_EVENTS: frozenset[type] = frozenset(
    {BlockStart, BlockDelta, BlockStop, BlockAbort, UsageEvent, PingEvent, StatusEvent, ErrorEvent}
)


@dataclass(slots=True)
class Node:
    """One running run of the tree.

    Attributes:
        cfg: The running Worker's configuration.
        run: The run (sub-agents' usage is added to its `children`).
        path: The call ids from the root to this run (`()` for the root).
        lineage: The configurations of the Workers from the root down to this one (each
            sub-agent's own Worker's, not its fork's): a Worker found here would be its own
            descendant.
        parent: The run whose tool call launched this one (`None` for the root).
    """

    cfg: WorkerConfig
    run: Run
    path: tuple[str, ...]
    lineage: tuple[WorkerConfig, ...]
    parent: Node | None = None


@dataclass(slots=True)
class Launch:
    """What a sub-agent tool hands its child's run: where in the tree it goes."""

    path: tuple[str, ...]
    lineage: tuple[WorkerConfig, ...]
    node: Node | None = None  # the child's node, once its run has entered it
    limits: tuple[Any, ...] = ()  # the parent run's `Limits`: the child is charged to them too


_node: ContextVar[Node | None] = ContextVar("llm_worker_run_node", default=None)
_launch: ContextVar[Launch | None] = ContextVar("llm_worker_run_launch", default=None)


def current_node() -> Node | None:
    """The node of the run whose code is running (a tool call's run), if any."""
    return _node.get()


@contextmanager
def launching(launch: Launch) -> Generator[None]:
    """The next run entered inside this block is the sub-agent run `launch` describes."""
    token = _launch.set(launch)
    try:
        yield
    finally:
        _launch.reset(token)


@contextmanager
def entered(cfg: WorkerConfig, run: Run) -> Generator[Node]:
    """Make `run` the running node: a child when a sub-agent tool launched it, else a root."""
    launch = _launch.get()
    if launch is not None and launch.node is None:
        node = Node(cfg, run, launch.path, launch.lineage, _node.get())
        launch.node = node
        _share_limits(run, launch.limits)
    else:
        node = Node(cfg, run, (), (cfg,))
    launch_token = _launch.set(None)  # the run's own tools launch their own children
    token = _node.set(node)
    try:
        yield node
    finally:
        _node.reset(token)
        _launch.reset(launch_token)


def _share_limits(run: Run, limits: tuple[Any, ...]) -> None:
    """Charge a child's run to its parent's `Limits` too: one budget bounds the whole tree."""
    if not limits:
        return
    from llm_worker.limits._budget import budget_for

    own = run.budget.limits if run.budget is not None else []
    run.budget = budget_for(*own, *limits)


def parent_limits(node: Node | None) -> tuple[Any, ...]:
    """The `Limits` a node's run is charged to (its children are charged to them too)."""
    budget = node.run.budget if node is not None else None
    return tuple(budget.limits) if budget is not None else ()


def tree_usage(
    own: UsageEvent, requests: list[RequestUsage], children: list[ChildRun]
) -> tuple[UsageEvent, list[RequestUsage]]:
    """A run's usage and request usage with its sub-agents' added."""
    if not children:
        return own, list(requests)
    total = own
    every = list(requests)
    for child in children:
        total = total + child.usage
        every.extend(child.request_usage)
    return total, every


def child_run(name: str, node: Node, status: RunStatus) -> ChildRun:
    """The record of a finished (or paused, cancelled) sub-agent run: its own requests."""
    run = node.run
    return ChildRun(node.path, name, status, run.usage, run.requests, list(run.request_usage))


class Forwarder:
    """The first sink of a sub-agent's run: its events, stamped with their path, go up."""

    __slots__ = ("_last", "_one", "branches", "channels", "gate", "path", "timeline", "up")

    def __init__(self, path: tuple[str, ...], parent: WorkerConfig) -> None:
        self.path = path
        self.timeline = parent.timeline
        # The parent's readers and its own forwarder; not its other sinks (tracing's time
        # to first chunk is of the parent's own requests).
        self.up: tuple[Sink, ...] = tuple(
            s for s in parent.sinks if is_reader(s) or type(s) is Forwarder
        )
        # The readers' channels up to the root: a chatty child waits for a slow reader.
        self.channels: tuple[Channel, ...] = tuple(
            c for s in self.up for c in _channels(s) if isinstance(c, Channel)
        )
        # The root reader's buffer (a tree has one reader at most): its length, checked once
        # an event, is all the back-pressure costs while the reader keeps up.
        self.gate: deque[Any] | None = self.channels[0].buffer if self.channels else None
        self.branches: dict[tuple[str, ...], Timeline] = {}
        self._last: tuple[tuple[str, ...], Callable[[Any], None]] | None = None  # its dispatch
        self._one = self.up[0] if len(self.up) == 1 else None  # the usual: one sink up

    def __call__(self, event: Any) -> None:
        # Once per event of every sub-agent: kept to attribute reads and direct calls.
        path = event.path
        if not path:  # the child's own event (a descendant's carries its path already)
            path = self.path
            try:
                event.path = path
            except AttributeError:  # a frozen dataclass (GuardrailChecked): new, no one's yet
                object.__setattr__(event, "path", path)
        kind: type[object] = event.__class__
        if kind in _TIMELINE_EVENTS:
            last = self._last
            if last is not None and last[0] is path:  # the hot path: one child's stream
                last[1](event)
            else:
                self._branch(path)(event)
        elif kind is TurnEnded:
            self._ended(path)
        one = self._one
        if one is not None:
            one(event)
        else:
            for sink in self.up:
                sink(event)

    async def paced(self) -> None:
        """Wait while a reader up the tree has `BUFFERED_MAX` events unread.

        A sub-agent's answer is read in its own task, never lent to the root's reader: this
        is its back-pressure, as a root answer's is the reader's own pace.
        """
        for channel in self.channels:
            while channel.full():
                await channel.drained()

    def _branch(self, path: tuple[str, ...]) -> Callable[[Any], None]:
        branch = self.branches.get(path)
        if branch is None:
            branch = self.branches[path] = self.timeline.branch(path)
        self._last = (path, branch.dispatch)
        return branch.dispatch

    def _ended(self, path: tuple[str, ...]) -> None:
        self._last = None
        branch = self.branches.pop(path, None)
        if branch is not None:  # a run that ended mid-block has sent its abort already
            branch.abort_current_block("the sub-agent's run ended")

    def close(self) -> None:
        """The child's run is over: end every branch still open (none, normally)."""
        for path in list(self.branches):
            self._ended(path)


def forwarder_of(sinks: list[Sink]) -> Forwarder | None:
    """The `Forwarder` of a sub-agent's (or a handoff's) run, if it is one."""
    for sink in sinks:
        if isinstance(sink, Forwarder):
            return sink
    return None


def _channels(sink: Sink) -> tuple[object, ...]:
    """The readers' channels a sink leads to (a Forwarder's, up to the root)."""
    if isinstance(sink, Forwarder):
        return sink.channels
    return (getattr(sink, "__self__", None),)


def is_reader(sink: Sink) -> bool:
    """Whether a sink is a `RunStream`'s (its reader's, not the run's own bookkeeping)."""
    return isinstance(getattr(sink, "__self__", None), Channel)  # a trio stream's too


# -- nested pause ------------------------------------------------------------------------------


class ChildPaused(ToolError):
    """A sub-agent's run paused: its call waits, and the run that called it pauses too.

    Raised by the sub-agent tool; the batch takes it back out of the call's result (the
    model never reads it).
    """

    def __init__(self, state: PauseState, reason: str | None) -> None:
        super().__init__(f"the sub-agent paused: {reason or 'no reason given'}")
        self.state = state
        self.reason = reason


def children_paused(run: Run, pending: list[PendingCall]) -> Pause | None:
    """Take the paused sub-agents out of a batch's results: their calls wait, unanswered."""
    reasons: list[str] = []
    for p in pending:
        result = p.result
        if result is not None and isinstance(result.exception, ChildPaused):
            run.tree.paused[p.call.id] = result.exception.state
            p.status, p.result = "allowed", None
            reasons.append(result.exception.reason or f"sub-agent call {p.call.id} paused")
    return Pause("; ".join(reasons)) if reasons else None


def route_decisions(
    state: PauseState, decisions: Mapping[str, Decision]
) -> tuple[dict[str, Decision], dict[str, Resumed]]:
    """Split a resume's decisions: this run's own, and each paused sub-agent's.

    A decision is keyed by a call id (held by one run of the tree) or by a path, the call
    ids from this run down joined by `/` (`"call_a/call_b"`).

    Raises:
        PauseStateError: A decision names no call of its branch, or a call id more than one
            run of the tree holds.
    """
    own_ids = {p.call.id for p in state.pending}
    routed: dict[str, Resumed] = {cid: (child, {}) for cid, child in state.children.items()}
    own: dict[str, Decision] = {}
    for key, decision in decisions.items():
        first, _, rest = key.partition("/")
        if rest and first in routed:
            routed[first][1][rest] = decision
            continue
        holders = [c for c, (s, _) in routed.items() if key in _call_ids(s)]
        if len(holders) + (key in own_ids) > 1:
            # Call ids are the providers' (or made up per answer): two runs may share one.
            raise PauseStateError(
                f"a decision names call {key!r}, which more than one run of the tree holds: "
                "key it by its path ('<call id>/.../<call id>')"
            )
        if key in own_ids or not routed:
            own[key] = decision  # apply_decisions says so when it is no call of this run
        elif not holders:
            raise PauseStateError(f"a decision names call {key!r}, which no run of the tree holds")
        else:
            routed[holders[0]][1][key] = decision
    for child, below in routed.values():  # checked whole before anything runs, at any depth
        _check_below(child, below)
    return own, routed


def _check_below(state: PauseState, decisions: dict[str, Decision]) -> None:
    """Refuse a paused sub-agent's decisions that name no call of its part of the tree.

    Raised inside the resumed tree, the error would answer the sub-agent's call (its
    approvals lost) while the rest of the tree ran on.
    """
    if not decisions:
        return
    own, _ = route_decisions(state, decisions)
    ids = {p.call.id for p in state.pending}
    stray = next((k for k in own if k not in ids), None)
    if stray is not None:
        raise PauseStateError(f"a decision names call {stray!r}, which no run of the tree holds")


def _call_ids(state: PauseState) -> set[str]:
    ids = {p.call.id for p in state.pending}
    for child in state.children.values():
        ids |= _call_ids(child)
    return ids


def check_not_stale(current: PauseState | None, state: PauseState) -> None:
    """Refuse an older state of the pause this Worker holds now (a tree resumed, paused again).

    A resumed tree may pause again on the same batch (one branch decided, another still
    waiting): the history alone then does not show that the older state was resumed, and
    resuming it would run again what the branch decided before did, side effects included.

    Raises:
        PauseStateError: `state` waits on a call, at any depth, that `current` has answered.
    """
    if current is None or current is state or current.history != state.history:
        return
    if _answered_since(state, current):
        raise PauseStateError(
            "this pause state was already resumed in this Worker: the tree paused again, "
            "and calls it waits on have results since; resuming it would run them twice "
            "(resume the state the last run returned)"
        )


def _answered_since(old: PauseState, new: PauseState) -> bool:
    done = {p.call.id for p in new.pending if p.result is not None}
    if any(p.result is None and p.call.id in done for p in old.pending):
        return True
    return any(
        cid in new.children and _answered_since(child, new.children[cid])
        for cid, child in old.children.items()
    )
