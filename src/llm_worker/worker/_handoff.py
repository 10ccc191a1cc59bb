"""`handoff(worker)`: the model hands the conversation over to another Worker.

The second mode of the run tree. Where a sub-agent (`Worker.as_tool`) answers its caller, a
handoff ends the caller's part: once the batch with the handoff call is answered, the other
Worker goes on with the conversation (the history so far, through `filter` if given) in the
same run, its events on the same stream with the root's path `()`, and the run's result is
its answer. Its usage is in the run's, with an entry of its own in `RunResult.children`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_worker.errors import ConfigurationError, ToolError
from llm_worker.messages import Message
from llm_worker.state import RunResult, RunStatus
from llm_worker.tools import ToolMeta
from llm_worker.tools._tool import MetaTool
from llm_worker.tools._toolset import current_call
from llm_worker.worker._agent_tool import child_config
from llm_worker.worker._tree import (
    Forwarder,
    Launch,
    child_run,
    current_node,
    launching,
    parent_limits,
)

if TYPE_CHECKING:
    from llm_worker.state import PendingCall
    from llm_worker.tools._registry import ToolRegistry
    from llm_worker.worker._turn import Run
    from llm_worker.worker._worker import Worker

__all__ = ("Handoff", "HistoryFilter", "handoff", "handover_in", "take_over")

HistoryFilter = Callable[[list[Message]], list[Message]]
"""What the receiving Worker sees of the conversation: the history in, the history it gets."""

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def handoff(
    worker: Worker[Any],
    *,
    name: str | None = None,
    description: str | None = None,
    filter: HistoryFilter | None = None,
) -> Handoff:
    """A tool by which the model hands the conversation over to `worker`.

    ```python
    billing = Worker("openai_responses:gpt-5-mini", tools=[refund], system="Billing desk.")
    front = Worker("anthropic:claude-haiku-4-5", tools=[handoff(billing)])
    result = await front.run("I was charged twice")  # billing's answer, if it was handed over
    ```

    When the model calls it, the call's batch is answered as usual, then `worker` (a fork of
    it, with its own system prompt, tools and model) goes on from the conversation so far —
    passed through `filter` (for instance, to drop the tool calls it cannot read) — and its
    answer is the run's: `RunResult.text` / `output`, the messages it added (also appended
    to the calling Worker's history), its usage added in. Its events reach the same
    `Worker.stream()` with the root's path.

    Args:
        worker: The Worker that takes over.
        name: The tool's name (default `transfer_to_<worker.name>`, or `transfer`).
        description: What the model reads about when to hand over.
        filter: The history the receiving Worker gets, from the history so far.

    Raises:
        ConfigurationError: A bad tool name.
    """
    label = name or (f"transfer_to_{worker.name}" if worker.name else "transfer")
    about = description or f"Hand the conversation over to {worker.name or 'another agent'}."
    return Handoff(worker, ToolMeta(label, about, _NO_ARGUMENTS, effect="read_only"), filter)


@dataclass(slots=True)
class Handover:
    """A handoff the model asked for in this run, taken once its batch is answered."""

    tool: Handoff
    call_id: str


class Handoff(MetaTool):
    """The handoff tool (see `handoff`)."""

    __slots__ = ("filter", "meta", "worker")

    def __init__(self, worker: Worker[Any], meta: ToolMeta, filter: HistoryFilter | None) -> None:
        if filter is not None and not callable(filter):
            raise ConfigurationError("handoff(filter=...) takes a function of the history")
        self.worker, self.meta, self.filter = worker, meta, filter

    async def execute(self, input_json: str) -> str:
        """Ask for the handoff; it happens once the batch is answered.

        Raises:
            ToolError: Called outside a Worker's run, or a second handoff in one answer.
        """
        node, call = current_node(), current_call()
        if node is None or call is None:
            raise ToolError("a handoff works only inside a Worker's run")
        if node.run.tree.handover is not None:
            raise ToolError("the conversation is already being handed over in this answer")
        node.run.tree.handover = Handover(self, call[0])
        return f"Handed over to {self.worker.name or 'another agent'}, who answers from here."


def handover_in(pending: list[PendingCall], registry: ToolRegistry) -> Handover | None:
    """The handoff a resumed batch already asked for (its call ran before the pause).

    A handoff's call that ran beside a sub-agent that paused is answered in the saved
    batch; the handover it asked for lives only in the run, so a resume finds it again here
    (it was lost: the resumed run went on with the calling Worker).
    """
    for p in pending:
        result = p.result
        if p.status != "done" or result is None or result.is_error:
            continue
        tool = registry.get(p.call.name)
        if isinstance(tool, Handoff):
            return Handover(tool, p.call.id)
    return None


async def take_over(run: Run) -> RunResult[Any]:
    """The receiving Worker goes on with the conversation; its answer is the run's."""
    handover, run.tree.handover = run.tree.handover, None
    assert isinstance(handover, Handover)
    tool, node = handover.tool, current_node()
    history = list(run.history) if tool.filter is None else list(tool.filter(list(run.history)))
    target = tool.worker.fork(history)
    # Its events are the conversation's own: the root's path, on the same stream.
    target._cfg = child_config(target._cfg, Forwarder((), run.cfg))  # pyright: ignore[reportPrivateUsage]
    path = (*(node.path if node else ()), handover.call_id)
    # The Worker taking over runs at this level of the tree: below it, it is its own ancestor.
    lineage = (*(node.lineage if node is not None else ()), tool.worker._cfg)  # pyright: ignore[reportPrivateUsage]
    launch = Launch(path, lineage, limits=parent_limits(node))
    status = RunStatus.CANCELLED
    try:
        with launching(launch):
            result = await target._run((), None)  # pyright: ignore[reportPrivateUsage]
        status = result.status
    finally:
        if launch.node is not None:
            run.tree.children.append(child_run(tool.name, launch.node, status))
            run.tree.children.extend(launch.node.run.tree.children)
    run.history.extend(result.messages)
    kept = {"text": result.text, "output": result.output_or_none, "refusal": result.refusal}
    return run.result(result.status, state=result.state, reason=result.reason, **kept)
