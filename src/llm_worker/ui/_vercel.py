"""A Worker's run as the Vercel AI SDK UI message stream (protocol `v1`, the `ai` 6.x line).

Each model request is a step (`start-step` … `finish-step`); each block becomes the chunks the
`ai` client assembles into one `UIMessage` part: `text-*`, `reasoning-*`, `tool-input-*`, then
the tool's `tool-output-*`. A block's opaque provider data (signatures, item ids) travels at
its end in `providerMetadata.llmWorker`, so `messages_from_ui` rebuilds the exact history.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterable, AsyncIterator, Collection
from typing import Any

from llm_worker._json import sendable_text
from llm_worker._wide_json import json_bytes
from llm_worker.blobs import StoredOutput, StructuredContent, TextContent
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    InputJsonDelta,
    ResponseStatus,
    StatusEvent,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Origin, Part, ProviderPart, TextPart, ThinkingPart, ToolUsePart
from llm_worker.state import (
    PauseState,
    PendingCall,
    RunCompleted,
    RunResult,
    RunStatus,
    ToolResultReady,
)
from llm_worker.tools import ToolResult
from llm_worker.ui._encoder import BlockEncoder, sse
from llm_worker.ui._errors import ErrorText, error_text
from llm_worker.ui._frontend import awaiting_decision
from llm_worker.ui._parts import KEY, WITHDRAWN, media_json, opaque, paused_calls, result_mac
from llm_worker.ui._sign import MAC

__all__ = ("HEADERS", "VercelEncoder", "sse", "to_vercel_stream", "usage_dict")

HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers of a UI message stream (`x-vercel-ai-ui-message-stream: v1`)."""

_FINISH = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.TOOL_USE: "tool-calls",
    StopReason.CONTENT_FILTER: "content-filter",
    StopReason.REFUSAL: "content-filter",
}

Chunk = dict[str, Any]


def usage_dict(usage: UsageEvent) -> dict[str, int]:
    """The token counts a usage event has, by their llm-worker names."""
    return {k: v for k, v in _usage_items(usage) if v is not None}


def _usage_items(usage: UsageEvent) -> list[tuple[str, int | None]]:
    return [
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        ("total_tokens", usage.total_tokens),
        ("cache_read_input_tokens", usage.cache_read_input_tokens),
        ("cache_creation_input_tokens", usage.cache_creation_input_tokens),
        ("reasoning_tokens", usage.reasoning_tokens),
    ]


class VercelEncoder(BlockEncoder):
    """Turns one run's events into UI message chunks; feed it with `encode(event)`.

    Args:
        message_id: The assistant message's id (`start.messageId`); a resumed run passes the
            id of the message it continues.
        origin: The provider and model of the Worker, stamped on opaque data as the Worker
            stamps it in its history (so it is sent back only to that provider).
        denied: Call ids a decision denied: their results are `tool-output-denied`.
        frontend: Names of tools the browser runs: their pending calls ask no approval.
        approval: Names of the Worker's tools that ask for approval: of the calls a pause
            left undecided after the one it stopped at, only theirs ask for approval
            (`None`: every one does). See `approval_tools`.
        paused: The pause a resumed run goes on from: its calls' results are signed over
            their arguments as its history holds them. A result of a call neither in it nor
            made in this run goes unsigned (see `result_mac`).
    """

    __slots__ = (
        "_approval",
        "_calls",
        "_denied",
        "_frontend",
        "_in_step",
        "_n",
        "_step_usage",
        "_token",
        "message_id",
    )

    # Our text and reasoning ids are ASCII letters, digits and `_`: safe inside a JSON string.
    _TEXT_HEAD = 'data: {"type":"text-delta","id":"'
    _REASONING_HEAD = 'data: {"type":"reasoning-delta","id":"'
    _DONE = "data: [DONE]\n\n"

    def __init__(
        self,
        message_id: str,
        origin: Origin,
        *,
        denied: Collection[str] = (),
        frontend: Collection[str] = (),
        approval: Collection[str] | None = None,
        paused: PauseState | None = None,
    ) -> None:
        super().__init__(origin)
        self._calls = paused_calls(paused)
        self._frontend = frozenset(frontend)
        self._approval = None if approval is None else frozenset(approval)
        self.message_id = message_id
        self._denied = frozenset(denied)
        self._n = 0
        self._in_step = False
        self._step_usage: UsageEvent | None = None
        # Our own ids, never the client's: the fast path writes them into JSON unescaped.
        self._token = secrets.token_hex(8)

    def start(self) -> list[Chunk]:
        """The chunks that open the stream."""
        return [{"type": "start", "messageId": self.message_id}]

    def error(self, exc: BaseException, on_error: ErrorText | None = None) -> list[Chunk]:
        """The chunks that end a run that raised (its text from `on_error`, see `error_text`)."""
        text = error_text(exc, on_error)
        # The failed step's finished parts never reach the Worker's history: the marker lets
        # `messages_from_ui` drop them too.
        return [
            {"type": "data-llm-worker-error", "data": {"errorText": text}},
            {"type": "error", "errorText": text},
            {"type": "finish", "finishReason": "error"},
        ]

    def _block(self, event: BlockStart | BlockStop | BlockAbort) -> list[Chunk]:
        if isinstance(event, BlockStart):
            self._asm.feed(event)
            return self._block_start(event)
        block, part = self._close(event)
        ident = None if block is None else block.ident
        if isinstance(event, BlockStop):
            return self._block_stop(event, ident, part)
        return self._block_abort(event, ident)

    def _usage(self, event: UsageEvent) -> list[Chunk]:
        # The step's first snapshot is kept as it is (a root event: its `path` is empty), a
        # later one overlaid on it: the assembler's copy is never read (see `BlockEncoder`).
        before = self._step_usage
        self._step_usage = event if before is None else before.updated(event)
        return []

    def _result_ready(self, event: ToolResultReady) -> list[Chunk]:
        return self._result(event.result)

    def _run_completed(self, event: RunCompleted) -> list[Chunk]:
        return self._completed(event.result)

    def _id(self, index: int, kind: BlockType) -> str:
        self._n += 1
        prefix = "text" if kind is BlockType.TEXT else "reas"
        ident = f"{prefix}_{self._token}_{self._n}"
        self._open(index, kind, ident)
        return ident

    def _delta(self, event: BlockDelta) -> list[Chunk]:
        delta = event.delta
        opened: list[Chunk] = []
        if event.index not in self._blocks and isinstance(delta, TextDelta | ThinkingDelta):
            # A delta with no start: the event model's implicit start.
            kind = BlockType.TEXT if isinstance(delta, TextDelta) else BlockType.THINKING
            ident = self._id(event.index, kind)
            opened = [
                {"type": "text-start" if kind is BlockType.TEXT else "reasoning-start", "id": ident}
            ]
        block = self._feed(event)
        if isinstance(delta, TextDelta) and block is not None:
            return [*opened, {"type": "text-delta", "id": block.ident, "delta": delta.text}]
        if isinstance(delta, ThinkingDelta) and block is not None:
            return [*opened, {"type": "reasoning-delta", "id": block.ident, "delta": delta.text}]
        if isinstance(delta, InputJsonDelta) and block is not None:
            return [
                {
                    "type": "tool-input-delta",
                    "toolCallId": block.ident,
                    "inputTextDelta": delta.partial_json,
                }
            ]
        return []

    def _block_start(self, event: BlockStart) -> list[Chunk]:
        meta = event.metadata
        if event.block_type is BlockType.TEXT:
            return [{"type": "text-start", "id": self._id(event.index, BlockType.TEXT)}]
        if event.block_type is BlockType.THINKING:
            return [{"type": "reasoning-start", "id": self._id(event.index, BlockType.THINKING)}]
        if event.block_type is BlockType.TOOL_USE and isinstance(meta, ToolUseMetadata):
            self._open(event.index, BlockType.TOOL_USE, meta.id)
            return [{"type": "tool-input-start", "toolCallId": meta.id, "toolName": meta.name}]
        return []

    def _block_stop(self, event: BlockStop, ident: str | None, part: Part | None) -> list[Chunk]:
        if isinstance(part, ProviderPart) and event.block_type is BlockType.PROVIDER:
            return [
                {"type": "data-llm-worker-provider", "data": opaque(part) | {"data": part.data}}
            ]
        if ident is None:
            return []
        if event.block_type is BlockType.TOOL_USE:
            return self._tool_stop(ident, part)
        kind = "reasoning" if event.block_type is BlockType.THINKING else "text"
        chunk: Chunk = {"type": f"{kind}-end", "id": ident}
        if isinstance(part, TextPart | ThinkingPart) and (hidden := opaque(part)):
            chunk["providerMetadata"] = {KEY: hidden}
        return [chunk]

    def _tool_stop(self, call_id: str, part: object) -> list[Chunk]:
        calls = self._asm.calls
        call = calls[-1] if calls and calls[-1].id == call_id else None
        if call is None:  # a repeated call id: the Worker drops it, never runs it
            return [_input_error(call_id, "", {}, "the model repeated this call id; dropped")]
        # The arguments as the history holds them (`{}` for broken ones, as the browser
        # reads them back): the result's signature binds them.
        given = part if isinstance(part, ToolUsePart) and part.id == call_id else None
        self._calls[call_id] = call.input if given is None else given.input
        if call.error is not None:
            return [_input_error(call_id, call.name, call.raw_input, call.error)]
        chunk: Chunk = {
            "type": "tool-input-available",
            "toolCallId": call_id,
            "toolName": call.name,
            "input": call.input,
        }
        if given is not None and (hidden := opaque(given)):
            chunk["providerMetadata"] = {KEY: hidden}
        return [chunk]

    def _block_abort(self, event: BlockAbort, ident: str | None) -> list[Chunk]:
        if ident is None:
            return []
        aborted = {KEY: {"aborted": event.reason}}
        if event.block_type is BlockType.TOOL_USE:
            return [
                _input_error(ident, "", {}, f"aborted: {event.reason}")
                | {"providerMetadata": aborted}
            ]
        kind = "reasoning" if event.block_type is BlockType.THINKING else "text"
        return [{"type": f"{kind}-end", "id": ident, "providerMetadata": aborted}]

    def _nested(self, key: str | None, data: dict[str, Any]) -> Chunk:
        # A data part with an id is replaced by the next one with that id: the client
        # keeps each sub-agent's latest record; deltas are transient (never stored).
        if key is None:
            return {"type": "data-subagent-delta", "data": data, "transient": True}
        return {"type": "data-subagent", "id": key, "data": data}

    def _status(self, event: StatusEvent) -> list[Chunk]:
        if event.status is ResponseStatus.STARTED:
            self._new_step(event.source)
            self._in_step = True
            self._step_usage = None
            return [{"type": "start-step"}]
        self._in_step = False
        chunks: list[Chunk] = []
        if event.status is ResponseStatus.FAILED:
            # The answer is withdrawn (a stream retry or a fallback client starts it over, or
            # the run fails): the Worker keeps none of it, not even its completed blocks, so
            # `messages_from_ui` must drop them from the message the browser sends back.
            chunks.append({"type": WITHDRAWN, "data": {}})
        if self._step_usage is not None and (usage := usage_dict(self._step_usage)):
            data = {"usage": usage, "model": event.model}
            chunks.append({"type": "data-llm-worker-usage", "data": data, "transient": True})
        chunks.append({"type": "finish-step"})
        return chunks

    def _result(self, result: ToolResult) -> list[Chunk]:
        call_id = result.tool_use_id
        # As the history keeps it (`ToolResult.to_part`): a lone surrogate (a file name
        # `os.fsdecode` escaped) U+FFFD, else the chunk fails and the run's stream with it.
        content = sendable_text(result.content)
        chunks: list[Chunk] = []
        output = result.output
        if isinstance(output, StoredOutput) and output.blob_id is not None:
            blob = {"toolCallId": call_id, "blobId": str(output.blob_id), "size": _size(output)}
            chunks.append({"type": "data-llm-worker-blob", "id": f"blob_{call_id}", "data": blob})
        if call_id in self._denied:
            chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif result.is_error:
            chunks.append(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": content}
            )
        else:
            chunks.append(
                {"type": "tool-output-available", "toolCallId": call_id, "output": content}
            )
        if chunks[-1]["type"] != "tool-output-denied":
            meta: dict[str, Any] = {}
            # Signed over the call it answers: the browser sends it back as a result the
            # server's tool made. Unsigned when the call is not known here.
            if (arguments := self._calls.get(call_id)) is not None:
                mac = result_mac(
                    call_id,
                    result.name,
                    content,
                    result.is_error,
                    result.media,
                    arguments=arguments,
                )
                meta.update({MAC: mac} if mac is not None else {})
            if result.media:  # images a tool returned: kept, so the history comes back whole
                meta["media"] = media_json(result.media)
            if meta:
                chunks[-1]["providerMetadata"] = {KEY: meta}
        return chunks

    def _output(self, data: Chunk, answer: int) -> list[Chunk]:
        # One part per answer: the client replaces a data part of the same id in place.
        ident = f"output_{self._token}_{answer}"
        return [{"type": "data-llm-worker-output", "id": ident, "data": data | {"answer": answer}}]

    def _completed(self, result: RunResult) -> list[Chunk]:
        chunks: list[Chunk] = self.output_final(result)
        if result.reason:  # why a hook paused or cancelled the run: a notice to show
            notice = {"status": result.status.value, "reason": result.reason}
            chunks.append({"type": "data-llm-worker-notice", "data": notice})
        if result.status is RunStatus.PAUSED and result.state is not None:
            waiting = awaiting_decision(result.state, self._frontend, self._approval)
            chunks.extend(_server_side(result.state, waiting, self._frontend))
            for p in waiting:
                chunks.extend(_approval_input(p))
                approval = {"type": "tool-approval-request", "toolCallId": p.call.id}
                chunks.append(approval | {"approvalId": f"approval_{p.call.id}"})
        meta = {
            KEY: {
                "status": result.status.value,
                "usage": usage_dict(result.usage),
                "requests": result.requests,
            }
        }
        if result.status is RunStatus.CANCELLED:
            if self._in_step:  # the Worker keeps none of a model request it cancelled
                chunks.append({"type": "data-llm-worker-cancelled", "data": {}})
            chunks.append({"type": "message-metadata", "messageMetadata": meta})
            chunks.append({"type": "abort", "reason": result.reason or "cancelled"})
            return chunks
        reason = "other" if result.stop_reason is None else _FINISH.get(result.stop_reason, "other")
        if result.status is RunStatus.PAUSED:
            reason = "tool-calls"
        chunks.append({"type": "finish", "finishReason": reason, "messageMetadata": meta})
        return chunks


def _server_side(
    state: PauseState, waiting: Collection[PendingCall], frontend: Collection[str]
) -> list[Chunk]:
    """The paused batch's server calls that wait on nothing the browser gives, marked so.

    They run when the batch goes on, yet stay `input-available` meanwhile: the `ai` client's
    `lastAssistantMessageIsCompleteWithToolCalls` then never sends the browser's outputs on
    its own. Announced again with `providerExecuted` (the server runs them), the client
    leaves them out of that check and out of `onToolCall`; their output comes later.
    """
    asked = {p.call.id for p in waiting}
    sent = {u.id: u for u in state.history[-1].tool_uses} if state.history else {}
    chunks: list[Chunk] = []
    for p in state.pending:
        if p.result is not None or p.call.name in frontend or p.call.id in asked:
            continue
        given = sent.get(p.call.id)  # the input as the model sent it, as the card shows it
        chunks.append(
            {
                "type": "tool-input-available",
                "toolCallId": p.call.id,
                "toolName": p.call.name,
                "input": p.call.input if given is None else given.input,
                "providerExecuted": True,
            }
        )
    return chunks


def _approval_input(p: PendingCall) -> list[Chunk]:
    # The card shows the call's input as the model sent it; an approval runs what the hooks
    # before the pause made of it (a sanitizing rewrite): the person must see that instead.
    if p.rewritten_input is None:
        return []
    data = {"toolCallId": p.call.id, "input": p.arguments}
    return [{"type": "data-llm-worker-approval", "id": f"approval_{p.call.id}", "data": data}]


def _input_error(call_id: str, name: str, raw: object, error: str) -> Chunk:
    return {
        "type": "tool-input-error",
        "toolCallId": call_id,
        "toolName": name,
        "input": raw,
        "errorText": error,
    }


def _size(output: StoredOutput) -> int:
    content = output.content
    if isinstance(content, TextContent):
        # Bytes as the blob store writes them (a lone surrogate passed through).
        return len(content.text.encode("utf-8", "surrogatepass"))
    if isinstance(content, StructuredContent):
        return len(json_bytes(content.value))
    return 0


def to_vercel_stream(
    stream: AsyncIterable[object],
    *,
    message_id: str,
    origin: Origin | None = None,
    denied: Collection[str] = (),
    frontend: Collection[str] = (),
    on_error: ErrorText | None = None,
    approval: Collection[str] | None = None,
    paused: PauseState | None = None,
) -> AsyncIterator[str]:
    """A Worker's run (`worker.stream(...)`) as the SSE events of a UI message stream.

    Send them with the headers in `HEADERS` (`x-vercel-ai-ui-message-stream: v1`). The last
    event is `data: [DONE]`. An exception of the run becomes an `error` chunk and a `finish`
    with reason `error`, so the client shows it instead of waiting; its text is what
    `on_error` makes of the exception (by default `safe_error_text`: a provider's rate limit
    or refusal as it is, a generic text for anything that may hold internals), and the whole
    exception is logged on the `llm_worker.ui` logger.

    Args:
        stream: The run's events, e.g. `worker.stream(messages)`.
        message_id: The assistant message's id.
        origin: The Worker's provider and model (`Origin(client.provider, client.model)`),
            stamped on opaque data the way the Worker stamps it.
        denied: Call ids denied by the decisions of a resumed run.
        frontend: Names of tools the browser runs (their pending calls ask no approval).
        on_error: The text the browser shows of the exception that ended the run.
        approval: Names of the Worker's tools that ask for approval (`approval_tools`); see
            `VercelEncoder`.
        paused: The `PauseState` a resumed run (`worker.resume_stream(state, ...)`) goes on
            from: its calls' results are signed (see `VercelEncoder`).
    """
    encoder = VercelEncoder(
        message_id,
        origin or Origin("", ""),
        denied=denied,
        frontend=frontend,
        approval=approval,
        paused=paused,
    )
    return encoder.sse_stream(stream, on_error)
