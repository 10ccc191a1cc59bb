"""A `PauseState`'s calls to and from JSON: each pending call, its result, the output call.

Kept apart from `llm_worker.state`, the data model, which calls these from `to_dict` and
`from_dict`. A result's `ToolOutput` goes through `llm_worker._pause_outputs`, imported only
when a result has one (it needs the blob modules, which `import llm_worker` does not load).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from llm_worker._json import as_dict, as_str
from llm_worker._media import media_from_json, media_to_json
from llm_worker.errors import PauseStateError
from llm_worker.events import StopReason

if TYPE_CHECKING:
    from llm_worker.blobs import ToolOutput
    from llm_worker.collectors import ToolCall
    from llm_worker.state import PendingCall
    from llm_worker.tools import ToolResult

__all__ = (
    "call_from_dict",
    "call_to_dict",
    "output_call_from_dict",
    "pending_fields",
    "pending_to_dict",
    "stop_reason_from_dict",
    "trace_context_from_dict",
)


def call_to_dict(c: ToolCall) -> dict[str, Any]:
    """A call as JSON data."""
    out = {"id": c.id, "name": c.name, "input": c.input, "raw_input": c.raw_input}
    return {**out, "error": c.error}


def call_from_dict(data: object) -> ToolCall:
    """What `call_to_dict` wrote (KeyError, TypeError, ValueError: not such data)."""
    from llm_worker.collectors import ToolCall

    c = as_dict(data)
    return ToolCall(
        str(c["id"]),
        str(c["name"]),
        as_dict(c.get("input")),
        raw_input=as_str(c.get("raw_input")) or "",
        error=as_str(c.get("error")),
    )


def output_call_from_dict(data: object) -> ToolCall | None:
    """A state's accepted output call, or None (PauseStateError: damaged)."""
    if data is None:  # no output call, or a state saved before the field existed
        return None
    if not isinstance(as_dict(data).get("input"), dict):  # accepted arguments are an object
        raise PauseStateError("pause state has a damaged output call: its input is not an object")
    try:
        return call_from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise PauseStateError(f"pause state has a damaged output call: {exc!r}") from exc


def pending_to_dict(p: PendingCall) -> dict[str, Any]:
    """A pending call as JSON data: the call, what was decided, the result with its output."""
    out: dict[str, Any] = {
        "call": call_to_dict(p.call),
        "status": p.status,
        "approved": p.approved,
    }
    if p.rewritten_input is not None:
        out["rewritten_input"] = p.rewritten_input
    if p.result is not None:
        r = p.result
        result: dict[str, Any] = {
            "tool_use_id": r.tool_use_id,
            "name": r.name,
            "content": r.content,
            "is_error": r.is_error,
        }
        if r.input is not None:
            result["input"] = r.input
        if r.media:
            result["media"] = media_to_json(r.media)
        if r.output is not None:
            from llm_worker._pause_outputs import output_to_dict

            output = output_to_dict(r.output, r.content)
            if output is not None:
                result["output"] = output
        out["result"] = result
    return out


def pending_fields(
    data: object,
) -> tuple[ToolCall, str, ToolResult | None, bool, dict[str, Any] | None]:
    """What `pending_to_dict` wrote, as `PendingCall`'s fields (its status not yet checked).

    Raises:
        KeyError, TypeError, ValueError: Not such data.
    """
    from llm_worker.tools import ToolResult

    body = as_dict(data)
    call = call_from_dict(body["call"])
    status = str(body.get("status"))
    result = None
    r = as_dict(body.get("result"))
    if r:
        content = str(r["content"])
        result = ToolResult(
            str(r["tool_use_id"]),
            str(r["name"]),
            content,
            is_error=bool(r.get("is_error")),
            output=_output(r.get("output"), content),
            input=as_dict(r["input"]) if "input" in r else None,
            media=media_from_json(r["media"]) if "media" in r else [],
        )
    rewritten = _rewritten_input(body.get("rewritten_input"), status)
    return call, status, result, body.get("approved") is True, rewritten


def _output(data: object, content: str) -> ToolOutput | None:
    if data is None:  # plain text, or a state saved before outputs were kept
        return None
    from llm_worker._pause_outputs import output_from_dict

    return output_from_dict(data, content)


def _rewritten_input(value: object, status: object) -> dict[str, Any] | None:
    if value is None:  # no hook rewrote the call, or a state saved before the field existed
        return None
    if not isinstance(value, dict):
        raise ValueError(f"rewritten_input is {type(value).__name__}, not an object")
    if status != "pending":
        # Only an undecided call waits with the hooks' rewrite beside the model's arguments.
        raise ValueError(f"a {status} call has rewritten_input")
    return cast("dict[str, Any]", value)


def trace_context_from_dict(data: object) -> dict[str, str] | None:
    """A state's trace context (W3C headers), or None."""
    if data is None:
        return None
    return {str(k): str(v) for k, v in as_dict(data).items()}


def stop_reason_from_dict(value: object) -> StopReason | None:
    """A state's stop reason, or None (PauseStateError: one this version does not know)."""
    if value is None:  # a state saved before the field existed
        return None
    try:
        return StopReason(value)
    except ValueError:
        raise PauseStateError(f"pause state has an unknown stop reason {value!r}") from None
