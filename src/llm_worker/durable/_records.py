"""What a durable run records: plain JSON data, never a delta, never a pickled object.

A request step records the assembled answer (message, parsed calls, usage, response id,
stop); a tool step the result the model reads; the workflow the run's input, its decisions
and its `RunResult`. Records are read back by this process or another one, of the same
llm-worker version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.collectors import ToolCall
from llm_worker.events import USAGE_FIELDS, BlockStop, BlockType, StopReason, UsageEvent
from llm_worker.messages import Message, Origin, ToolResultPart
from llm_worker.state import ChildRun, Decision, PauseState, RunResult, RunStatus
from llm_worker.tools import ToolResult
from llm_worker.worker._assembler import Assembler
from llm_worker.worker._output import OutputPlan, Rejected, answer_output
from llm_worker.worker._tree import ChildPaused

__all__ = (
    "answer_from",
    "answer_record",
    "decisions_from",
    "decisions_record",
    "messages_record",
    "run_from",
    "run_record",
    "tool_from",
    "tool_record",
)


def messages_record(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as JSON data."""
    return [m.to_dict() for m in messages]


def _messages(data: object) -> list[Message]:
    return [Message.from_dict(m) for m in as_list(data)]


def _usage_record(usage: UsageEvent) -> dict[str, int]:
    return {name: value for name in USAGE_FIELDS if (value := getattr(usage, name)) is not None}


def _usage(data: object) -> UsageEvent:
    fields = as_dict(data)
    return UsageEvent(**{k: v for k, v in fields.items() if k in USAGE_FIELDS})


def answer_record(answer: Assembler) -> dict[str, Any]:
    """One request step's record: the assembled answer, what a replay needs of it."""
    stop = answer.stop
    return {
        "origin": [answer.origin.provider, answer.origin.model],
        "message": answer.message.to_dict(),
        "calls": [
            {"id": c.id, "name": c.name, "input": c.input, "raw": c.raw_input, "error": c.error}
            for c in answer.calls
        ],
        "usage": _usage_record(answer.usage),
        "response_id": answer.response_id,
        "stop": None
        if stop is None
        else {
            "index": stop.index,
            "type": stop.block_type.value,
            "reason": None if stop.stop_reason is None else stop.stop_reason.value,
            "raw": stop.raw_stop_reason,
            "sequence": stop.stop_sequence,
            "message": stop.stop_message,
        },
    }


def answer_from(data: object) -> Assembler:
    """The Assembler a recorded answer stands for."""
    record = as_dict(data)
    provider, model = (str(x) for x in as_list(record["origin"]))
    calls = [
        ToolCall(
            str(c["id"]),
            str(c["name"]),
            as_dict(c["input"]),
            raw_input=as_str(c["raw"]) or "",
            error=as_str(c["error"]),
        )
        for c in map(as_dict, as_list(record["calls"]))
    ]
    stop = None
    if record["stop"] is not None:
        s = as_dict(record["stop"])
        reason = as_str(s["reason"])
        stop = BlockStop(
            int(s["index"]),
            BlockType(str(s["type"])),
            None if reason is None else StopReason(reason),
            as_str(s["raw"]),
            as_str(s["sequence"]),
            as_str(s["message"]),
        )
    return Assembler.recorded(
        Origin(provider, model),
        Message.from_dict(record["message"]),
        calls,
        _usage(record["usage"]),
        response_id=as_str(record["response_id"]),
        stop=stop,
    )


def tool_record(result: ToolResult) -> dict[str, Any]:
    """One tool step's record: what the model reads of the result, its media included."""
    record: dict[str, Any] = {
        "id": result.tool_use_id,
        "name": result.name,
        "content": result.content,
        "error": result.is_error,
        "input": result.input,
    }
    if result.media:  # images and documents: kept as the message model writes them
        part = ToolResultPart(result.tool_use_id, "", media=list(result.media))
        record["media"] = Message("user", [part]).to_dict()
    if isinstance(result.exception, ChildPaused):  # a sub-agent's pause: its tree is the record
        paused = result.exception
        record["child_paused"] = {"state": paused.state.to_dict(), "reason": paused.reason}
    return record


def tool_from(data: object) -> ToolResult:
    """The ToolResult a recorded tool step stands for (its `output` object is not kept)."""
    r = as_dict(data)
    raw_input = r.get("input")
    result = ToolResult(
        str(r["id"]),
        str(r["name"]),
        str(r["content"]),
        is_error=r["error"] is True,
        input=None if raw_input is None else as_dict(raw_input),
    )
    if r.get("media") is not None:
        result.media = list(Message.from_dict(r["media"]).tool_results[0].media)
    paused = r.get("child_paused")
    if paused is not None:  # the batch pauses on it again, as the live run did
        body = as_dict(paused)
        state = PauseState.from_dict(body["state"])
        result.exception = ChildPaused(state, as_str(body.get("reason")))
    return result


def run_record(result: RunResult[Any], plan: OutputPlan | None = None) -> dict[str, Any]:
    """A run's result as JSON data (the workflow's return value), its output as `plan` dumps it.

    The output is recorded, not only the final answer: the output tool may have accepted
    arguments a before_tool_call hook or an edited approval rewrote, which the history (the
    model's own) does not hold.
    """
    output = None
    if plan is not None and result.status is RunStatus.FINISHED and result.refusal is None:
        output = plan.dump(result.output)
    return {
        "output": output,
        "status": result.status.value,
        "text": result.text,
        "messages": messages_record(result.messages),
        "usage": _usage_record(result.usage),
        "requests": result.requests,
        "state": None if result.state is None else result.state.to_dict(),
        "reason": result.reason,
        "stop_reason": None if result.stop_reason is None else result.stop_reason.value,
        "response_ids": list(result.response_ids),
        "refusal": result.refusal,
        "children": [c.to_dict() for c in result.children],
    }


def run_from(data: object, plan: OutputPlan | None = None) -> RunResult[Any]:
    """The RunResult a recorded run stands for, its output checked again by `plan`.

    The output is the recorded one validated again, an instance of the output type in any
    process; a record without one (from an earlier version) or whose output no longer fits
    gets the final answer's, validated again.
    """
    r = as_dict(data)
    stop = as_str(r["stop_reason"])
    result: RunResult[Any] = RunResult(
        RunStatus(str(r["status"])),
        text=str(r["text"]),
        messages=_messages(r["messages"]),
        usage=_usage(r["usage"]),
        requests=int(r["requests"]),
        state=None if r["state"] is None else PauseState.from_dict(r["state"]),
        reason=as_str(r["reason"]),
        stop_reason=None if stop is None else StopReason(stop),
        response_ids=[str(x) for x in as_list(r["response_ids"])],
        refusal=as_str(r.get("refusal")),
        # Absent from records of earlier versions: a run without sub-agents.
        children=[ChildRun.from_dict(c) for c in as_list(r.get("children"))],
    )
    if result.status is RunStatus.FINISHED and result.refusal is None:
        result.output = _output(result, plan, r.get("output"))
    return result


def _output(result: RunResult[Any], plan: OutputPlan | None, recorded: object) -> object:
    if plan is None:
        return result.text
    if recorded is not None:
        try:
            return plan.load(recorded)
        except Rejected:
            pass  # the output type changed since: the final answer is checked as it stands
    final = next(m for m in reversed(result.messages) if m.role == "assistant")
    return answer_output(plan, final)


def decisions_record(decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """Decisions by call id, as JSON data (what `decide` sends to the run)."""
    return {
        call_id: {
            "allow": d.allow,
            "input": d.input,
            "reason": d.reason,
            "skip_hooks": d.skip_hooks,
            "merge": d.merge,
        }
        for call_id, d in decisions.items()
    }


def decisions_from(data: object) -> dict[str, Decision]:
    """Decisions by call id, from what `decisions_record` made."""
    decisions: dict[str, Decision] = {}
    for call_id, value in as_dict(data).items():
        d = as_dict(value)
        given = d.get("input")
        decisions[call_id] = Decision(
            d["allow"] is True,
            None if given is None else as_dict(given),
            as_str(d.get("reason")),
            skip_hooks=d.get("skip_hooks") is not False,
            merge=d.get("merge") is True,
        )
    return decisions
