"""Builds the assistant message of one response from its raw events.

The Timeline's collectors give texts and tool calls but not their order, nor the opaque
continuation data (signatures, redacted thinking, item ids) that the next request must send
back; this assembler keeps both. Aborted blocks are dropped: a half block is never sent back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_worker._log import logger
from llm_worker.collectors import ToolCall, parse_tool_call
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    Delta,
    Event,
    InputJsonDelta,
    ProviderMetadata,
    ResponseStatus,
    StatusEvent,
    StopReason,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import (
    Citation,
    Message,
    Origin,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolUsePart,
)

__all__ = ("DEFAULT_MAX_ARGUMENTS", "Assembler", "Completed", "Withdrawn")

_log = logger("llm_worker")
_KEPT_RAW = 200  # characters of oversized arguments kept, to quote to the model
_TEXTUAL = (TextDelta, ThinkingDelta)


@dataclass(slots=True)
class _Open:
    block_type: BlockType
    pieces: list[str] = field(default_factory=lambda: [])
    signature: list[str] = field(default_factory=lambda: [])
    redacted: str | None = None
    item_id: str | None = None
    call_id: str = ""
    name: str = ""
    data: dict[str, Any] | None = None
    phase: str | None = None
    replay: bool = False
    citations: list[Citation] = field(default_factory=lambda: [])
    size: int = 0  # characters of a tool call's arguments, kept or not
    caller: dict[str, Any] | None = None
    limit: float = float("inf")  # characters of a tool call's arguments kept and parsed


@dataclass(slots=True)
class Withdrawn:
    """An answer withdrawn mid-stream (a fallback client started over with another client).

    Attributes:
        origin: The client that streamed it.
        model: The model version that answered, where said.
        usage: What it reported (billed, though withdrawn).
    """

    origin: Origin
    model: str | None
    usage: UsageEvent


@dataclass(slots=True)
class Completed:
    """A block the assembler just finished (its text or its tool call), or a withdrawal."""

    text: str | None = None
    call: ToolCall | None = None
    withdrawn: Withdrawn | None = None


DEFAULT_MAX_ARGUMENTS = 1 << 20
"""Characters of one tool call's argument JSON the Worker accepts by default (1 MiB)."""


class Assembler:
    """Feed it one response's events; read `message`, `calls`, `usage`, `stop_reason`, `stop`.

    `stop` is the block stop that carried the stop reason (its raw reason and message). A tool
    call whose argument JSON exceeds `max_arguments` characters is neither kept nor parsed: the
    call gets `input={}` and an `error` saying so (the tool will not run), and its `raw_input`
    keeps only the first characters, so neither memory nor the next request grows with what the
    model sent. The calls of `output_tool` (tool output mode's final tool) are exempt: their
    arguments are the run's answer, bounded as a native answer's text is (by the client's
    `max_answer_chars`), not as a tool's input.
    """

    __slots__ = (
        "_began",
        "_ids",
        "_open",
        "calls",
        "max_arguments",
        "model",
        "origin",
        "output_tool",
        "parts",
        "replayed",
        "response_id",
        "stop",
        "usage",
    )

    def __init__(
        self,
        origin: Origin,
        *,
        max_arguments: int = DEFAULT_MAX_ARGUMENTS,
        output_tool: str | None = None,
    ) -> None:
        self.origin = origin
        self.max_arguments = max_arguments
        self.output_tool = output_tool
        self.parts: list[Part] = []
        self.calls: list[ToolCall] = []
        self.usage = UsageEvent()
        self.stop: BlockStop | None = None
        self._open: _Open | None = None
        self._ids: set[str] = set()
        self.response_id: str | None = None
        self.model: str | None = None  # the model version that answered, where said
        self.replayed = False  # a recorded answer given back, no request made
        self._began = False  # a STARTED status was seen: a second one starts over

    @classmethod
    def recorded(
        cls,
        origin: Origin,
        message: Message,
        calls: list[ToolCall],
        usage: UsageEvent,
        *,
        response_id: str | None = None,
        stop: BlockStop | None = None,
    ) -> Assembler:
        """An assembler holding an answer recorded earlier, as if it had just streamed.

        A durable run gives it back in place of a request it already made: the parts, the
        calls (already parsed and checked), the usage, the response id and the stop.
        """
        answer = cls(origin)
        answer.parts, answer.calls, answer.usage = list(message.content), list(calls), usage
        answer.response_id, answer.stop = response_id, stop
        answer.replayed = True
        return answer

    def feed(self, event: Event) -> Completed | None:
        """Take one event; return what it completed, if anything."""
        if isinstance(event, BlockDelta):
            # The hot path (one call per streamed chunk): no further calls.
            delta = event.delta
            block = self._open or self._implicit(delta)
            if isinstance(delta, _TEXTUAL):  # a tuple: `A | B` would build a union per call
                block.pieces.append(delta.text)
            elif isinstance(delta, InputJsonDelta):
                if block.size <= block.limit:  # past the cap, only counted
                    block.pieces.append(delta.partial_json)
                block.size += len(delta.partial_json)
            elif isinstance(delta, CitationDelta):
                block.citations.append(delta.citation)
            else:
                block.signature.append(delta.signature)
            return None
        if isinstance(event, BlockStart):
            self._start(event)
        elif isinstance(event, BlockStop):
            if event.stop_reason is not None:
                self.stop = event
            return self._stop()
        elif isinstance(event, BlockAbort):
            self._open = None
        elif isinstance(event, UsageEvent):
            self.usage = self.usage.updated(event)
        elif isinstance(event, StatusEvent):
            return self._status(event)
        return None

    def _status(self, event: StatusEvent) -> Completed | None:
        withdrawn = None
        if event.status is ResponseStatus.STARTED:
            # A second start: a fallback client gave up on the answer so far and another
            # client answers the same request from scratch.
            withdrawn = self._withdraw() if self._began else None
            self._began = True
            if event.source is not None:
                self.origin = event.source  # its opaque data goes back to it alone
        if event.response_id is not None:
            self.response_id = event.response_id
        if event.model is not None:
            self.model = event.model
        return withdrawn

    def _withdraw(self) -> Completed:
        gone = Withdrawn(self.origin, self.model, self.usage)
        self.parts, self.calls, self.usage = [], [], UsageEvent()
        self.stop = self._open = None
        self._ids = set()
        self.response_id = self.model = None
        return Completed(withdrawn=gone)

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the answer stopped (on the block stop that carried the reason), if it said."""
        return None if self.stop is None else self.stop.stop_reason

    @property
    def message(self) -> Message:
        """The assistant message so far (completed blocks only)."""
        return Message("assistant", list(self.parts))

    def _start(self, event: BlockStart) -> None:
        block = _Open(event.block_type)
        meta = event.metadata
        if isinstance(meta, ToolUseMetadata):
            block.call_id, block.name, block.item_id = meta.id, meta.name, meta.item_id
            block.caller = meta.caller
            if meta.name != self.output_tool:
                block.limit = self.max_arguments
        elif isinstance(meta, ThinkingMetadata):
            block.redacted, block.item_id = meta.redacted, meta.item_id
            block.replay = meta.replay
        elif isinstance(meta, TextMetadata):
            # The Responses message id: a replayed reasoning item must be followed by it.
            block.item_id, block.phase = meta.item_id, meta.phase
        elif isinstance(meta, ProviderMetadata):
            block.data = meta.data
        self._open = block

    def _implicit(self, delta: Delta) -> _Open:
        # A delta with no start (the implicit start of the event model).
        if isinstance(delta, ThinkingDelta):
            kind = BlockType.THINKING
        elif isinstance(delta, InputJsonDelta):
            kind = BlockType.TOOL_USE
        else:
            kind = BlockType.TEXT
        block = self._open = _Open(kind, limit=self.max_arguments)
        return block

    def _call(self, block: _Open, text: str) -> ToolCall:
        if block.size <= block.limit:
            return parse_tool_call(block.call_id, block.name, text)
        error = (
            f"the arguments of tool {block.name!r} are {block.size:,} characters, over the "
            f"limit of {self.max_arguments:,}: send a reference (a path, an id, a URL) instead "
            "of the data, or split the work into several smaller calls"
        )
        return ToolCall(block.call_id, block.name, {}, raw_input=text[:_KEPT_RAW], error=error)

    def _tool_use(
        self, block: _Open, text: str, signature: str | None, origin: Origin | None
    ) -> Completed | None:
        call = self._call(block, text)
        if call.id in self._ids:
            # One call id, one execution, one result: a repeat is dropped, never run, so
            # the history sends back neither a duplicate call nor a duplicate result.
            _log.warning(
                "the answer repeats tool call id %r (%s); the repeat is dropped",
                call.id,
                call.name,
            )
            return None
        self._ids.add(call.id)
        self.calls.append(call)
        self.parts.append(
            ToolUsePart(
                call.id,
                call.name,
                call.input,
                signature=signature,
                item_id=block.item_id,
                origin=origin,
                caller=block.caller,
            )
        )
        return Completed(call=call)

    def _stop(self) -> Completed | None:
        block = self._open
        self._open = None
        if block is None:
            return None
        if block.data is not None:
            # Provider-native content: kept whole, for the same provider and model only.
            self.parts.append(ProviderPart(block.data, origin=self.origin))
            return None
        text = "".join(block.pieces)
        signature = "".join(block.signature) or None
        opaque = signature or block.redacted or block.item_id or block.replay or block.caller
        origin = self.origin if opaque else None
        if block.block_type is BlockType.TOOL_USE:
            return self._tool_use(block, text, signature, origin)
        if block.block_type is BlockType.THINKING:
            self.parts.append(
                ThinkingPart(
                    text,
                    signature=signature,
                    redacted=block.redacted,
                    item_id=block.item_id,
                    origin=origin,
                )
            )
            return None
        if text or signature or block.citations:
            self.parts.append(
                TextPart(
                    text,
                    signature=signature,
                    item_id=block.item_id,
                    origin=origin,
                    citations=block.citations,
                    phase=block.phase,
                )
            )
        return Completed(text=text)
