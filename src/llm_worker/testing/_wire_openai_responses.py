"""`encode(ScriptedResponse)` → the SSE bytes the OpenAI Responses API would stream for it.

The shape follows the recorded streams in `fixtures/recorded/openai_responses/`: `event:` and
`data:` lines, `sequence_number`s, `response.created` / `in_progress`, one output item per part
(`message`, `reasoning`, `function_call`) with its `added` / `delta` / `done` events, and a
terminal `response.completed`, `response.incomplete` or `response.failed` carrying the usage.

Mapping of a `ScriptedResponse`:

- `TextPart` → a `message` item (its `item_id`, or a made-up `msg_…`), text in `chunk_size`
  deltas; with `stop_reason=REFUSAL` the text is a `refusal` content part instead;
- `ThinkingPart` → a `reasoning` item with one summary part; consecutive parts with the same
  `item_id` share one item, one summary part each; `signature` → `encrypted_content`;
- `ToolUsePart` → a `function_call` item (`call_id` = the part's id, `call_<n>` when empty);
- `stop_reason` `MAX_TOKENS` / `CONTENT_FILTER` → `response.incomplete` with that reason;
  others → `response.completed` (Responses has no stop reason field: a reader derives
  `TOOL_USE` / `END_TURN` from the items); `STOP_SEQUENCE` and `PAUSE_TURN` cannot be expressed
  and raise `ValueError`;
- `fail_with` → the last item is left unfinished (no `done` events: a signature on the last
  part is not sent) and `response.failed` follows, with `error.code` = its `error_type` (or
  `server_error`) and no usage — as `ScriptedClient` plays a failed answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from llm_worker.events import StopReason, UsageEvent
from llm_worker.messages import Part, TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing._script import ScriptedResponse

__all__ = ("encode",)

_INCOMPLETE = {
    StopReason.MAX_TOKENS: "max_output_tokens",
    StopReason.CONTENT_FILTER: "content_filter",
}
_INEXPRESSIBLE = (StopReason.STOP_SEQUENCE, StopReason.PAUSE_TURN)


def encode(response: ScriptedResponse, *, model: str) -> bytes:
    """The Responses SSE stream of one scripted answer.

    Args:
        response: The answer.
        model: The model name the stream reports.

    Raises:
        ValueError: The answer holds a tool result or a stop reason Responses cannot express.
    """
    stop = response.resolved_stop_reason()
    if stop in _INEXPRESSIBLE:
        raise ValueError(f"the Responses API cannot express the stop reason {stop.value!r}")
    writer = _Writer(model, response.chunk_size)
    writer.emit("response.created", response=writer.response("in_progress"))
    writer.emit("response.in_progress", response=writer.response("in_progress"))
    failing = response.fail_with is not None
    writer.parts(response.with_ids(0), refusal=stop is StopReason.REFUSAL, open_last=failing)
    if response.fail_with is not None:
        # Like `ScriptedClient`, a failed answer reports no usage. A failed response's
        # `error.code` is one of a fixed few; any other failure (an overload) comes as the
        # documented `error` event instead.
        code = response.fail_with.error_type or "server_error"
        message = response.fail_with.message
        if code in _FAILED_CODES:
            error = {"code": code, "message": message}
            writer.emit("response.failed", response=writer.response("failed", error=error))
        else:
            writer.emit("error", code=code, message=message, param=None)
        return b"".join(writer.out)
    usage = _usage(response.resolved_usage())
    if stop in _INCOMPLETE:
        details = {"reason": _INCOMPLETE[stop]}
        final = writer.response("incomplete", usage, incomplete_details=details)
        writer.emit("response.incomplete", response=final)
    else:
        writer.emit("response.completed", response=writer.response("completed", usage))
    return b"".join(writer.out)


_FAILED_CODES = frozenset({"server_error", "rate_limit_exceeded", "invalid_prompt"})


def _usage(usage: UsageEvent) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "cached_tokens": usage.cache_read_input_tokens or 0,
        "cache_write_tokens": usage.cache_creation_input_tokens or 0,
    }
    input_tokens = usage.input_tokens or 0
    output_tokens = usage.output_tokens or 0
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": inputs,
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": (
            usage.total_tokens if usage.total_tokens is not None else input_tokens + output_tokens
        ),
    }


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _same_item(first: ThinkingPart, rest: Sequence[Part]) -> list[ThinkingPart]:
    """`first` and the thinking parts right after it that name the same reasoning item."""
    group = [first]
    for part in rest:
        if first.item_id is None or not isinstance(part, ThinkingPart):
            break
        if part.item_id != first.item_id:
            break
        group.append(part)
    return group


class _Writer:
    """Accumulates the events of one stream, numbering them as the API does."""

    def __init__(self, model: str, chunk_size: int) -> None:
        self.model = model
        self.chunk_size = chunk_size
        self.out: list[bytes] = []
        self.sequence = 0
        self.items: list[dict[str, Any]] = []
        self.response_id = "resp_" + "0" * 24 + "scripted"

    def emit(self, kind: str, **fields: Any) -> None:
        data = orjson.dumps({"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        self.out.append(b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n")

    def response(self, status: str, usage: Any = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": self.items if status != "in_progress" else [],
            # Required by the API's response object (the SDK's `Response`): the request's
            # tool settings, echoed; a scripted answer stands for any request.
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
            **extra,
        }

    def parts(self, parts: Sequence[Part], *, refusal: bool, open_last: bool) -> None:
        i = 0
        while i < len(parts):
            part = parts[i]
            group = _same_item(part, parts[i + 1 :]) if isinstance(part, ThinkingPart) else []
            i += len(group) or 1
            finish = not open_last or i < len(parts)
            if group:
                self.reasoning(group, finish=finish)
            elif isinstance(part, TextPart):
                self.message(part, refusal=refusal, finish=finish)
            elif isinstance(part, ToolUsePart):
                self.function_call(part, finish=finish)
            else:
                raise ValueError("a scripted answer cannot hold a tool result")

    def _item(self, item: dict[str, Any], done: dict[str, Any]) -> int:
        index = len(self.items)
        self.emit("response.output_item.added", output_index=index, item=item)
        self.items.append(done)
        return index

    def message(self, part: TextPart, *, refusal: bool, finish: bool) -> None:
        item_id = part.item_id or f"msg_{len(self.items):04d}scripted"
        kind, field = ("refusal", "refusal") if refusal else ("output_text", "text")
        content: dict[str, Any] = {"type": kind, field: part.text}
        if not refusal:
            content["annotations"] = []
        base = {"id": item_id, "type": "message", "role": "assistant"}
        done = {**base, "status": "completed", "content": [content]}
        index = self._item({**base, "status": "in_progress", "content": []}, done)
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        self.emit("response.content_part.added", **where, part={**content, field: ""})
        # Text events always carry `logprobs` (empty unless asked for); refusal events never.
        extra: dict[str, Any] = {} if refusal else {"logprobs": []}
        for piece in _pieces(part.text, self.chunk_size):
            self.emit(f"response.{kind}.delta", **where, delta=piece, **extra)
        if not finish:
            return
        self.emit(f"response.{kind}.done", **where, **{field: part.text}, **extra)
        self.emit("response.content_part.done", **where, part=content)
        self.emit("response.output_item.done", output_index=index, item=done)

    def reasoning(self, group: list[ThinkingPart], *, finish: bool) -> None:
        item_id = group[0].item_id or f"rs_{len(self.items):04d}scripted"
        summary = [{"type": "summary_text", "text": p.text} for p in group]
        done: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": summary}
        signature = "".join(p.signature for p in group if p.signature)
        if signature:
            done["encrypted_content"] = signature
        index = self._item({"id": item_id, "type": "reasoning", "summary": []}, done)
        for n, part in enumerate(group):
            where = {"item_id": item_id, "output_index": index, "summary_index": n}
            empty = {"type": "summary_text", "text": ""}
            self.emit("response.reasoning_summary_part.added", **where, part=empty)
            for piece in _pieces(part.text, self.chunk_size):
                self.emit("response.reasoning_summary_text.delta", **where, delta=piece)
            if not finish and n == len(group) - 1:
                return
            self.emit("response.reasoning_summary_text.done", **where, text=part.text)
            self.emit("response.reasoning_summary_part.done", **where, part=summary[n])
        self.emit("response.output_item.done", output_index=index, item=done)

    def function_call(self, part: ToolUsePart, *, finish: bool) -> None:
        item_id = part.item_id or f"fc_{len(self.items):04d}scripted"
        arguments = orjson.dumps(part.input).decode()
        base = {"id": item_id, "type": "function_call", "call_id": part.id, "name": part.name}
        done = {**base, "arguments": arguments, "status": "completed"}
        index = self._item({**base, "arguments": "", "status": "in_progress"}, done)
        where = {"item_id": item_id, "output_index": index}
        for piece in _pieces(arguments, self.chunk_size):
            self.emit("response.function_call_arguments.delta", **where, delta=piece)
        if not finish:
            return
        self.emit("response.function_call_arguments.done", **where, arguments=arguments)
        self.emit("response.output_item.done", output_index=index, item=done)
