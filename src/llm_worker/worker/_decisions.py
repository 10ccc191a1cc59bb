"""What `Worker.resume` and `Worker.discard_pause` do to a paused batch before it goes on.

`apply_decisions` turns the application's `Decision`s into call statuses (checking edited
arguments against each tool's schema first, so a person's mistake reaches the application,
not the model); `not_run` records the calls of a discarded pause as never started.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from llm_worker.collectors import parse_tool_call
from llm_worker.errors import PauseStateError
from llm_worker.state import PendingCall
from llm_worker.tools import ToolResult, check_arguments

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore
    from llm_worker.collectors import ToolCall
    from llm_worker.messages import Message
    from llm_worker.state import Decision, PauseState
    from llm_worker.tools import ToolRegistry

__all__ = (
    "apply_decisions",
    "check_not_paused",
    "check_not_resumed",
    "loaded_outputs",
    "not_json",
    "not_run",
    "seen_on_resume",
)


def apply_decisions(
    state: PauseState, decisions: Mapping[str, Decision], registry: ToolRegistry
) -> list[PendingCall]:
    """Copies of the state's pending calls with the decisions applied; the state is untouched.

    Raises:
        PauseStateError: A decision names a call that is not pending, or its edited
            arguments do not fit the tool.
    """
    ids = {p.call.id for p in state.pending}
    unknown = sorted(set(decisions) - ids)
    if unknown:
        raise PauseStateError(f"decisions name calls that are not pending: {', '.join(unknown)}")
    sent = {u.id: u.input for u in state.history[-1].tool_uses} if state.history else {}
    # The first pending call is the one whose hook paused; the later ones never reached the
    # hooks, so an approval cannot stand in for them: they still run (a sanitizing rewrite).
    unseen = {p.call.id for p in state.pending if p.status == "pending"} - seen_on_resume(state, {})
    out: list[PendingCall] = []
    for p in state.pending:
        # Copies, call and result included: hooks and decisions edit them (an after hook
        # masks a result in place), never the caller's state, which may be resumed again.
        call = dataclasses.replace(p.call, input=copy.deepcopy(p.call.input))
        result = None if p.result is None else dataclasses.replace(p.result)
        rewritten = copy.deepcopy(p.rewritten_input)
        copied = PendingCall(call, p.status, result, p.approved, rewritten)
        decision = decisions.get(call.id)
        if decision is not None and p.status in ("pending", "allowed"):
            if p.status == "allowed" and not decision.skip_hooks and call.id in sent:
                copied.call = _as_sent(call, sent[call.id])
            if call.id in unseen:
                decision = dataclasses.replace(decision, skip_hooks=False)
            _decide(copied, decision, registry)
        out.append(copied)
    return out


def _as_sent(call: ToolCall, arguments: dict[str, Any]) -> ToolCall:
    """`call` with the model's arguments again, where an allowed call carries the hooks' rewrites.

    Sent through the hooks once more, an allowed call starts from what the model sent, as a
    pending one does: else each rewrite would apply twice. Arguments that did not parse fail
    again as they did (the raw text is kept).
    """
    if call.raw_input:
        parsed = parse_tool_call(call.id, call.name, call.raw_input)
        if parsed.error is not None:
            return parsed
    return dataclasses.replace(call, input=copy.deepcopy(arguments), error=None)


def _decide(pending: PendingCall, decision: Decision, registry: ToolRegistry) -> None:
    call = pending.call
    if not decision.allow:
        pending.status = "denied"
        text = f"Denied: {decision.reason}"
        pending.result = ToolResult(call.id, call.name, text, is_error=True, input=call.input)
        return
    pending.approved = True  # a tool that requires approval now has it
    # Skipping the hooks, the call runs what the hooks before the pause made of it; through
    # the hooks again, it starts from the model's arguments, so no rewrite applies twice.
    rewritten = pending.rewritten_input if decision.skip_hooks else None
    pending.rewritten_input = None
    if decision.input is not None:
        edit = cast("object", decision.input)  # a caller without type checking
        if not isinstance(edit, dict):
            raise PauseStateError(
                f"cannot resume: Decision.approve(input=...) for call {call.id} must be a dict "
                f"(a JSON object of arguments), not {type(edit).__name__}"
            )
        base = call.input if rewritten is None else rewritten
        arguments: dict[str, Any] = {**(base if decision.merge else {}), **decision.input}
        _check_edit(call.id, call.name, arguments, registry)
        # The application's arguments stand, where the model's did not parse too.
        pending.call = dataclasses.replace(call, input=arguments, error=None)
    elif rewritten is not None:
        # A hook's arguments stand, where the model's did not parse too (as in a run).
        pending.call = dataclasses.replace(call, input=rewritten, error=None)
    pending.status = "allowed" if decision.skip_hooks else "pending"


def _check_edit(call_id: str, name: str, arguments: dict[str, Any], registry: ToolRegistry) -> None:
    tool = registry.get(name)
    # JSON values only: the arguments go into ToolResult.input and any later pause state.
    problem = not_json(arguments, "arguments")
    if problem is None and tool is not None:
        problem = check_arguments(tool, arguments)
    if problem is not None:
        raise PauseStateError(
            f"cannot resume: the arguments Decision.approve(input=...) gives call {call_id} "
            f"do not fit tool {name!r}: {problem}"
        )


def not_json(value: object, where: str) -> str | None:
    """Where `value` holds what JSON has no form for (a set, bytes, NaN), or `None`."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where}: {value!r} is not a JSON number"
    if isinstance(value, list):
        items = cast("list[object]", value)
        found = (not_json(item, f"{where}[{i}]") for i, item in enumerate(items))
    elif isinstance(value, dict):
        fields = cast("dict[object, object]", value)
        if any(not isinstance(key, str) for key in fields):
            return f"{where}: JSON object keys are strings"
        found = (not_json(item, f"{where}.{key}") for key, item in fields.items())
    else:
        return f"{where}: {type(value).__name__} is not a JSON value"
    return next((problem for problem in found if problem is not None), None)


async def loaded_outputs(pending: list[PendingCall], store: BlobStore | None) -> list[PendingCall]:
    """`pending` with the stored outputs of a state read from JSON loaded from `store`.

    Raises:
        PauseStateError: A result names a blob `store` does not have (or there is no store).
        BlobError: The store could not be read.
    """
    if all(p.result is None or p.result.output is None for p in pending):
        return pending  # and the blob modules stay unloaded
    from llm_worker._pause_outputs import loaded_outputs as load

    return await load(pending, store)


def not_run(pending: PendingCall, reason: str) -> PendingCall:
    """`pending` as a discarded pause leaves it: a call that never started says so."""
    if pending.status not in ("pending", "allowed"):
        return pending  # it ran, or was skipped or denied: its own result says so
    call = pending.call
    text = f"Not run: this call never started; its paused run was discarded ({reason})."
    result = ToolResult(call.id, call.name, text, is_error=True, input=call.input)
    return PendingCall(call, "not_run", result)


def check_not_resumed(history: list[Message], state: PauseState | None) -> None:
    """Refuse a state this history has already gone on from (resumed, or discarded).

    Its calls would run a second time (side effects included), and the history since the
    pause would be dropped.

    Raises:
        PauseStateError: `history` starts with the state's history and then answers one of
            its paused calls.
    """
    if state is None:
        return
    start = len(state.history)
    if state.at != "before_tool_call" or len(history) <= start:
        return
    ids = {p.call.id for p in state.pending}
    answered = any(r.tool_use_id in ids for m in history[start:] for r in m.tool_results)
    if answered and history[:start] == state.history:
        raise PauseStateError(
            "this pause state was already resumed or discarded in this Worker: its calls "
            "have results in the history; resuming it again would run them twice (resume "
            "the state the last run returned, or use a new Worker to retry from this one)"
        )


def seen_on_resume(state: PauseState, decisions: Mapping[str, Decision]) -> frozenset[str]:
    """Ids of the calls the hooks see as `resumed`: the one whose hook paused, and decided ones.

    A later call of the batch never reached the hooks before the pause: it stays new to them,
    so an approval hook asks about it instead of letting it through unseen.
    """
    paused = [p.call.id for p in state.pending if p.status == "pending"][:1]
    return frozenset([*decisions, *paused])


def check_not_paused(state: PauseState | None) -> None:
    """Refuse a new run while the last one is paused.

    Raises:
        PauseStateError: `state` is the last run's pause: a new run would answer its calls
            "interrupted", when they never started.
    """
    if state is None:
        return
    waiting = [f"{p.call.id} ({p.call.name})" for p in state.pending]
    what = f"calls {', '.join(waiting)} never ran" if waiting else "its answer awaits"
    raise PauseStateError(
        f"this Worker's last run paused at {state.at} and {what}: resume it with "
        "worker.resume(result.state), or drop it with await worker.discard_pause() "
        "before starting a new run"
    )
