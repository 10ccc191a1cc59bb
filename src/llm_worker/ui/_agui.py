"""A Worker's run as AG-UI 1.0 events (`to_agui_events`), and `AGUIAdapter`, its endpoint.

Each model request is a step (`STEP_STARTED` / `STEP_FINISHED`); its texts and tool calls
belong to one assistant message (`parentMessageId`), its thinking to reasoning messages whose
opaque data travels as `REASONING_ENCRYPTED_VALUE`. The run ends with `MESSAGES_SNAPSHOT`
(the exact history, which `messages_from_agui` reads back) and `RUN_FINISHED` with its usage
and outcome: success, an interrupt per call waiting for approval, or cancelled.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterable, AsyncIterator, Collection
from typing import Any

from llm_worker._json import sendable_text
from llm_worker.blobs import StoredOutput
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    InputJsonDelta,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import Origin, Part, ThinkingPart, ToolUsePart
from llm_worker.state import PauseState, RunCompleted, RunResult, RunStatus, ToolResultReady
from llm_worker.ui._agui_messages import encrypted, layout_of, snapshot_messages
from llm_worker.ui._encoder import BlockEncoder, OpenBlock, sse
from llm_worker.ui._errors import ErrorText, error_code, error_text
from llm_worker.ui._frontend import awaiting_decision
from llm_worker.ui._parts import opaque, paused_calls

__all__ = ("HEADERS", "AGUIEncoder", "sse", "to_agui_events")

HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}
"""The response headers of an AG-UI event stream."""

Event = dict[str, Any]
_APPROVAL = "approval_"


class AGUIEncoder(BlockEncoder):
    """Turns one run's events into AG-UI events.

    Args:
        thread_id: `RunAgentInput.threadId`.
        run_id: `RunAgentInput.runId`.
        origin: The Worker's provider and model (stamped on opaque data, as in its history).
        frontend_tools: Names of the tools the front end runs: their pending calls end the run
            with `pendingToolCallIds` rather than an interrupt.
        history: The AG-UI messages the snapshot at the end starts with (those the request
            sent, for instance).
        skip: How many of the run's first messages `history` holds already (the run's input).
        approval: Names of the Worker's tools that ask for approval: of the calls a pause
            left undecided after the one it stopped at, only theirs get an interrupt
            (`None`: every one does). See `approval_tools`.
        paused: The pause a resumed run goes on from: the snapshot signs its calls' results
            over their arguments as its history holds them. A result of a call neither in it
            nor in the run's messages goes unsigned (see `result_mac`).
    """

    __slots__ = (
        "_approval",
        "_calls",
        "_frontend",
        "_history",
        "_in_step",
        "_skip",
        "_step",
        "_step_ids",
        "_text_used",
        "_token",
        "run_id",
        "thread_id",
    )

    _TEXT_HEAD = 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"'
    _REASONING_HEAD = 'data: {"type":"REASONING_MESSAGE_CONTENT","messageId":"'
    _SKIP_EMPTY = True

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        origin: Origin,
        *,
        frontend_tools: Collection[str] = (),
        history: list[dict[str, Any]] | None = None,
        skip: int = 0,
        approval: Collection[str] | None = None,
        paused: PauseState | None = None,
    ) -> None:
        super().__init__(origin)
        self._calls = paused_calls(paused)
        self._skip = skip
        self._approval = None if approval is None else frozenset(approval)
        self.thread_id, self.run_id = thread_id, run_id
        self._frontend = frozenset(frontend_tools)
        self._history = history or []
        self._step = 0
        self._in_step = False
        self._text_used = False
        self._step_ids: list[str] = []  # the client's messages of the current step
        # Our own ids, never the client's: the fast path writes them into JSON unescaped.
        self._token = "run-" + secrets.token_hex(8)

    @property
    def _message_id(self) -> str:
        return f"{self._token}-s{self._step}"

    def start(self) -> list[Event]:
        """The events that open the run."""
        return [{"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}]

    def error(self, exc: BaseException, on_error: ErrorText | None = None) -> list[Event]:
        """The events that end a run that raised (its text from `on_error`, see `error_text`).

        The failed step's messages, which the client keeps, are marked failed first: the
        Worker kept none of them, and `messages_from_agui` drops them too.
        """
        message = error_text(exc, on_error)
        failed = [_encrypted("message", i, {"failed": True}) for i in dict.fromkeys(self._step_ids)]
        return [*failed, {"type": "RUN_ERROR", "message": message, "code": error_code(exc)}]

    def _result_ready(self, event: ToolResultReady) -> list[Event]:
        return self._result(event)

    def _run_completed(self, event: RunCompleted) -> list[Event]:
        return self.finish(event.result)

    def _output(self, data: Event, answer: int) -> list[Event]:
        # A custom event, not STATE_SNAPSHOT: the agent state is the application's own.
        value = data | {"answer": answer}
        return [{"type": "CUSTOM", "name": "llm-worker.output", "value": value}]

    def _block(self, event: BlockStart | BlockStop | BlockAbort) -> list[Event]:
        if isinstance(event, BlockStart):
            self._asm.feed(event)
            meta = event.metadata
            call = meta if isinstance(meta, ToolUseMetadata) else None
            return self._open_block(event.index, event.block_type, call)
        block, part = self._close(event)
        return [] if block is None else self._stop(block, part)

    def _delta(self, event: BlockDelta) -> list[Event]:
        delta = event.delta
        opened: list[Event] = []
        if event.index not in self._blocks and isinstance(delta, TextDelta | ThinkingDelta):
            kind = BlockType.TEXT if isinstance(delta, TextDelta) else BlockType.THINKING
            opened = self._open_block(event.index, kind, None)
        block = self._feed(event)
        if block is None:
            return opened
        ident = block.ident
        if isinstance(delta, TextDelta) and delta.text:
            return [*opened, _content("TEXT_MESSAGE_CONTENT", ident, delta.text)]
        if isinstance(delta, ThinkingDelta) and delta.text:
            return [*opened, _content("REASONING_MESSAGE_CONTENT", ident, delta.text)]
        if isinstance(delta, InputJsonDelta) and delta.partial_json:
            return [{"type": "TOOL_CALL_ARGS", "toolCallId": ident, "delta": delta.partial_json}]
        return opened

    def _open_block(self, index: int, kind: BlockType, call: ToolUseMetadata | None) -> list[Event]:
        if kind is BlockType.TEXT:
            ident = self._message_id if not self._text_used else f"{self._message_id}-t{index}"
            self._text_used = True
            self._step_ids.append(ident)
            self._open(index, kind, ident)
            return [{"type": "TEXT_MESSAGE_START", "messageId": ident, "role": "assistant"}]
        if kind is BlockType.THINKING:
            ident = f"{self._message_id}-r{index}"
            self._step_ids.append(ident)
            self._open(index, kind, ident)
            return [
                {"type": "REASONING_START", "messageId": ident},
                {"type": "REASONING_MESSAGE_START", "messageId": ident, "role": "reasoning"},
            ]
        if call is not None:
            self._step_ids.append(self._message_id)
            self._open(index, kind, call.id)
            return [
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call.id,
                    "toolCallName": call.name,
                    "parentMessageId": self._message_id,
                }
            ]
        return []

    def _stop(self, block: OpenBlock, part: Part | None) -> list[Event]:
        kind, ident = block.kind, block.ident
        if kind is BlockType.TEXT:
            return [{"type": "TEXT_MESSAGE_END", "messageId": ident}]
        if kind is BlockType.THINKING:
            out: list[Event] = [{"type": "REASONING_MESSAGE_END", "messageId": ident}]
            if isinstance(part, ThinkingPart) and (hidden := opaque(part)):
                out.append(_encrypted("message", ident, hidden))
            return [*out, {"type": "REASONING_END", "messageId": ident}]
        out = [{"type": "TOOL_CALL_END", "toolCallId": ident}]
        if isinstance(part, ToolUsePart) and part.id == ident and (hidden := opaque(part)):
            out.append(_encrypted("tool-call", ident, hidden))
        return out

    def _nested(self, key: str | None, data: dict[str, Any]) -> Event:
        name = "llm-worker.subagent" if key is not None else "llm-worker.subagent-delta"
        return {"type": "CUSTOM", "name": name, "value": data}

    def _status(self, event: StatusEvent) -> list[Event]:
        if event.status is ResponseStatus.STARTED:
            self._step += 1
            self._in_step = True
            self._new_step(event.source)
            self._text_used = False
            self._step_ids = []
            return [{"type": "STEP_STARTED", "stepName": f"request {self._step}"}]
        return self._end_step()

    def _end_step(self) -> list[Event]:
        self._in_step = False
        name = f"request {self._step}"
        out: list[Event] = []
        for block in list(self._blocks.values()):  # a broken-off answer: its blocks close here
            out.extend(self._stop(block, None))
        self._blocks.clear()
        if self._text_used or self._asm.calls:  # the client holds this step's message
            layout = layout_of(self._asm.parts)  # messages_to_agui's, without the rest
            out.append({**_encrypted("message", self._message_id, {}), "encryptedValue": layout})
        return [*out, {"type": "STEP_FINISHED", "stepName": name}]

    def _result(self, event: ToolResultReady) -> list[Event]:
        result = event.result
        out: list[Event] = []
        output = result.output
        if isinstance(output, StoredOutput) and output.blob_id is not None:
            blob = {"toolCallId": result.tool_use_id, "blobId": str(output.blob_id)}
            out.append({"type": "CUSTOM", "name": "llm-worker.blob", "value": blob})
        out.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"{self.run_id}-result-{result.tool_use_id}",
                "toolCallId": result.tool_use_id,
                # As the history keeps it: a lone surrogate U+FFFD (`ToolResult.to_part`).
                "content": sendable_text(result.content),
                "role": "tool",
            }
        )
        return out

    def finish(self, result: RunResult) -> list[Event]:
        """The snapshot and `RUN_FINISHED` of a run that returned."""
        # A run cancelled inside a model request never saw its end: a step left open makes
        # the client refuse `RUN_FINISHED`.
        ended = self._end_step() if self._in_step else []
        snapshot = self._history + snapshot_messages(
            result.messages[self._skip :], prefix=self.run_id, calls=self._calls
        )
        finished: Event = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "outcome": self._outcome(result),
        }
        if usage := _token_usage(result.usage, self._origin):
            finished["usage"] = [usage]
        out: list[Event] = [
            *ended,
            *self.output_final(result),
            {"type": "MESSAGES_SNAPSHOT", "messages": snapshot},
        ]
        if result.reason:  # why a hook paused or cancelled the run: no native event says it
            notice = {"status": result.status.value, "reason": result.reason}
            out.append({"type": "CUSTOM", "name": "llm-worker.notice", "value": notice})
        return [*out, finished]

    def _outcome(self, result: RunResult) -> dict[str, Any]:
        if result.status is RunStatus.CANCELLED:
            return {"type": "cancelled"}
        state = result.state
        pending = [] if state is None else [p for p in state.pending if p.status == "pending"]
        waiting = [] if state is None else awaiting_decision(state, self._frontend, self._approval)
        interrupts = [
            _interrupt(p.call.id, p.call.name, p.arguments)  # what an approval runs
            for p in waiting
        ]
        if interrupts:
            return {"type": "interrupt", "interrupts": interrupts}
        frontend = [p.call.id for p in pending if p.call.name in self._frontend]
        return (
            {"type": "success", "pendingToolCallIds": frontend} if frontend else {"type": "success"}
        )


def _interrupt(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _APPROVAL + call_id,
        "reason": "tool_approval",
        "message": f"Approve the call of {name}?",
        "toolCallId": call_id,
        "responseSchema": {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"},
                "input": {"type": "object"},
            },
            "required": ["approved"],
        },
        "metadata": {"toolName": name, "input": args},
    }


def _content(kind: str, ident: str, text: str) -> Event:
    return {"type": kind, "messageId": ident, "delta": text}


def _encrypted(subtype: str, entity: str, data: dict[str, Any]) -> Event:
    return {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": subtype,
        "entityId": entity,
        "encryptedValue": encrypted(data),
    }


def _token_usage(usage: UsageEvent, origin: Origin) -> dict[str, Any]:
    fields = {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.total_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "cachedInputTokens": usage.cache_read_input_tokens,
        "cacheWriteInputTokens": usage.cache_creation_input_tokens,
    }
    counts = {k: v for k, v in fields.items() if v is not None}
    if not counts:
        return {}
    return {"provider": origin.provider, "model": origin.model, **counts}


def to_agui_events(
    stream: AsyncIterable[object],
    *,
    thread_id: str,
    run_id: str,
    origin: Origin | None = None,
    frontend_tools: Collection[str] = (),
    history: list[dict[str, Any]] | None = None,
    skip: int = 0,
    on_error: ErrorText | None = None,
    approval: Collection[str] | None = None,
    paused: PauseState | None = None,
) -> AsyncIterator[str]:
    """A Worker's run (`worker.stream(...)`) as AG-UI SSE events, `RUN_STARTED` first.

    An exception of the run ends the stream with `RUN_ERROR`, whose message is what
    `on_error` makes of it (by default `safe_error_text`: a provider's rate limit or refusal
    as it is, a generic text for anything that may hold internals; the whole exception is
    logged on the `llm_worker.ui` logger). See `AGUIEncoder` for the other arguments;
    `history` is the AG-UI messages before the run (the snapshot starts with them);
    `paused` the `PauseState` a resumed run (`worker.resume_stream(state, ...)`) goes on from.
    """
    encoder = AGUIEncoder(
        thread_id,
        run_id,
        origin or Origin("", ""),
        frontend_tools=frontend_tools,
        history=history,
        skip=skip,
        approval=approval,
        paused=paused,
    )
    return encoder.sse_stream(stream, on_error)
