"""What both protocol encoders share: a model request's blocks, the parts they make, the hot path.

`to_vercel_stream` and `to_agui_events` follow the same blocks the same way; only the chunks
they write differ. `BlockEncoder` keeps, per model request, the open blocks (their protocol
ids) and an `Assembler` fed just enough to make the Worker's parts (opaque data, arguments,
the text's length), writes text and reasoning deltas straight into their SSE line, and runs
the stream loop. The protocol subclasses turn starts, stops and the rest into their chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, ClassVar

import orjson

from llm_worker._wide_json import json_bytes
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    UsageEvent,
)
from llm_worker.messages import Origin, Part
from llm_worker.state import OutputPartial, OutputRejected, RunCompleted, ToolResultReady
from llm_worker.ui._errors import ErrorText
from llm_worker.ui._nested import NestedProgress
from llm_worker.ui._output_parts import OutputTrack
from llm_worker.worker._assembler import Assembler
from llm_worker.worker._stream import current_task, lender

__all__ = ("BlockEncoder", "OpenBlock", "sse")

Payload = dict[str, Any]
# Below this length the stdlib's C escaper (`json.encoder.encode_basestring`) beats orjson plus
# `.decode()`: it walks the text a character at a time, orjson does not. Both write the same
# JSON for every character; only for ASCII is the fast one used, so that a lone surrogate still
# fails in orjson as it does on the general path (tests/ui/test_encoder.py compares the two).
_SHORT = 48
# The run events a protocol has a place for, and the encoder method that writes each.
_ROUTES = {
    BlockDelta: "_delta",
    BlockStart: "_block",
    BlockStop: "_block",
    BlockAbort: "_block",
    UsageEvent: "_usage",
    StatusEvent: "_status",
    ToolResultReady: "_result_ready",
    RunCompleted: "_run_completed",
    OutputPartial: "_output_partial",
    OutputRejected: "_output_rejected",
}


_ROOT = ()  # a root event's path: one object in CPython, tested with `is`


def sse(payload: Payload) -> str:
    """One chunk or event as an SSE event."""
    # An integer past 64 bits (orjson writes none) is written with its digits.
    return "data: " + json_bytes(payload).decode() + "\n\n"


@dataclass(slots=True)
class OpenBlock:
    """A block of the current model request that has started and not stopped.

    Attributes:
        kind: The block's type.
        ident: Its protocol id (a text or reasoning message id, or the tool call's id).
        delta_type: The delta the hot path writes for it (`TextDelta`, `ThinkingDelta`, or
            `None` for blocks whose deltas take the generic path).
        head: The SSE line of such a delta up to the JSON string of its text.
        chars: Characters of its own deltas written (the text stands in by its length).
        stray: Characters of text deltas in a block of another type.
    """

    kind: BlockType
    ident: str
    delta_type: type | None
    head: str
    chars: int = 0
    stray: int = 0

    @property
    def text_chars(self) -> int:
        """Characters of text streamed into the block."""
        return self.chars if self.delta_type is TextDelta else self.stray

    def add_text(self, chars: int) -> None:
        """Count characters of text streamed into the block."""
        if self.delta_type is TextDelta:
            self.chars += chars
        else:
            self.stray += chars


class BlockEncoder:
    """The block bookkeeping and stream loop under `VercelEncoder` and `AGUIEncoder`.

    Args:
        origin: The Worker's provider and model, stamped on opaque data as in its history.
    """

    __slots__ = ("_asm", "_blocks", "_origin", "_outputs", "_progress")

    _TEXT_HEAD: ClassVar[str]  # the SSE line of a text delta up to the block id
    _REASONING_HEAD: ClassVar[str]
    _DELTA_FIELD: ClassVar[str] = '","delta":'
    _SKIP_EMPTY: ClassVar[bool] = False  # an empty text delta writes nothing
    _FAST_PATH: ClassVar[bool] = True  # False: every delta through `encode` (the tests' check)
    _DONE: ClassVar[str] = ""  # the SSE event after the last one, if the protocol has one
    _handlers: ClassVar[dict[type, Callable[[Any, Any], list[Payload]]]] = {}

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        # One route table; each protocol's handlers are found by name.
        cls._handlers = {kind: getattr(cls, name) for kind, name in _ROUTES.items()}

    def __init__(self, origin: Origin) -> None:
        self._origin = origin
        self._asm = Assembler(origin)
        self._blocks: dict[int, OpenBlock] = {}
        self._outputs = OutputTrack()
        self._progress = NestedProgress()

    def start(self) -> list[Payload]:
        """The chunks that open the stream."""
        raise NotImplementedError

    def error(self, exc: BaseException, on_error: ErrorText | None = None) -> list[Payload]:
        """The chunks that end a run that raised (its text from `on_error`, see `error_text`)."""
        raise NotImplementedError

    def encode(self, event: object) -> list[Payload]:
        """The chunks of one run event (none for events the protocol has no place for)."""
        if getattr(event, "path", None):  # a sub-agent's: told as its progress (see _nested)
            return self._nested_chunks(event)
        handler = self._handlers.get(type(event))
        return [] if handler is None else handler(self, event)

    def _delta(self, event: BlockDelta) -> list[Payload]:
        raise NotImplementedError

    def _nested_chunks(self, event: object) -> list[Payload]:
        delta = NestedProgress.delta(event)
        if delta is not None:
            return [self._nested(None, delta)]
        update = self._progress.record(event)
        return [] if update is None else [self._nested(*update)]

    def _nested(self, key: str | None, data: dict[str, Any]) -> Payload:
        """The protocol's chunk of a sub-agent's record (`key`) or text delta (`None`)."""
        raise NotImplementedError

    def _block(self, event: BlockStart | BlockStop | BlockAbort) -> list[Payload]:
        raise NotImplementedError

    def _status(self, event: StatusEvent) -> list[Payload]:
        raise NotImplementedError

    def _usage(self, event: UsageEvent) -> list[Payload]:
        # Not fed to the assembler: its usage is never read here (each protocol takes the
        # run's or the step's own), and merging a snapshot rebuilds every counter.
        return []

    def _result_ready(self, event: ToolResultReady) -> list[Payload]:
        raise NotImplementedError

    def _run_completed(self, event: RunCompleted) -> list[Payload]:
        raise NotImplementedError

    def _output(self, data: Payload, answer: int) -> list[Payload]:
        """The protocol's part for a structured output's `data` (see `_output_parts`)."""
        raise NotImplementedError

    def _output_partial(self, event: OutputPartial[Any]) -> list[Payload]:
        data = self._outputs.partial(event)
        return [] if data is None else self._output(data, self._outputs.answer)

    def _output_rejected(self, event: OutputRejected) -> list[Payload]:
        track = self._outputs
        out = self._output(track.rejected(event), track.answer)
        track.answer += 1
        return out

    def output_final(self, result: Any) -> list[Payload]:
        """The part of a finished run's structured output (none for a text run)."""
        data = self._outputs.final(result)
        return [] if data is None else self._output(data, self._outputs.answer)

    def fast_delta(self, event: BlockDelta) -> str | None:
        """The SSE event of a text or reasoning delta of an open block, written directly.

        `None` for anything else (then use `encode`). The hot path: most events of a run are
        these, and skipping the chunk dict and the generic encoding keeps the stream close to
        the bare run's cost. `sse_stream` runs the same steps inlined.
        """
        block = self._blocks.get(event.index)
        if block is None:
            return None
        # Typed as the text delta that the check below makes it (or a ThinkingDelta, which has
        # the same `text`): no `cast`, which would cost a call per delta.
        delta: TextDelta = event.delta  # pyright: ignore[reportAssignmentType]
        if type(delta) is not block.delta_type:
            return None
        text = delta.text
        if not text and self._SKIP_EMPTY:
            return None
        n = len(text)
        block.chars += n
        if n < _SHORT and text.isascii():
            return f"{block.head}{encode_basestring(text)}}}\n\n"
        return f"{block.head}{orjson.dumps(text).decode()}}}\n\n"

    # The per-delta steps are inlined on purpose (each call or helper costs per event):
    # - `fast_delta` inlined: its call was a fifth of the encoding's cost per delta. The blocks
    #   are cleared in place at a new step, never replaced: the name `blocks` stays valid.
    # - Names read per delta are locals (a local load is a third of a global's). A root
    #   event's `path` is the empty tuple, one object in CPython: `is` tests it for less than
    #   its truth (an empty path made otherwise would only take the general path).
    # - The block the last delta went to is held in locals while its deltas follow one another
    #   (most of a run's events): no dict lookup, no attribute load or store per delta. Its
    #   character count is kept in `chars` and added to the block before any other event is
    #   encoded (`encode` may close it, or open another at its index). `index` None: no block
    #   held (no index matches it, a negative one neither); `block` is then the last one held,
    #   or a stand-in, whose count `chars` (0) leaves as it is.
    # - A Worker's stream lends its reader the model's event iterator (`Channel.lend`): that
    #   step (`RunStream.__anext__`'s hot path) runs here inline, so the run's steps and the
    #   encoder's are one frame, one generator. Every other step (the run's own events, the
    #   wait for a loan, the end) is `__anext__`'s own. Read through a generator of the
    #   stream's, the encoder paid that generator's step too (~0.9 k instructions an event);
    #   through `__anext__`, a coroutine per event (~1.4 k). A call per event costs too: the
    #   encoding as a step function ~0.4 k (a closure ~0.7 k), the step's processing as a
    #   `Channel` method ~0.5 k (counted): only its rare outcomes are (`Channel.settled`).
    #   Any other source is read with `anext` (~0.2 k an event more than `async for` over an
    #   async generator: one loop for both).
    async def sse_stream(  # noqa: C901, PLR0912
        self, events: AsyncIterable[object], on_error: ErrorText | None = None
    ) -> AsyncIterator[str]:
        """The run's events as SSE events: `start()` first, `error()` if the run raises."""
        write_empty, short, block_delta, root = not self._SKIP_EMPTY, _SHORT, BlockDelta, _ROOT
        escape, dumps, current = encode_basestring, orjson.dumps, current_task
        block, index, kind, head, chars = OpenBlock(BlockType.TEXT, "", None, ""), None, None, "", 0
        run, channel, buffer = lender(events)
        try:
            for payload in self.start():  # an id the caller gave may fail it: the error's too
                yield sse(payload)
            source = aiter(events)  # a RunStream is its own
            while True:
                loan = channel.loan
                if run is None or buffer or loan is None or loan.reader is not None or run._over:  # pyright: ignore[reportPrivateUsage]
                    try:
                        event = await anext(source)
                    except StopAsyncIteration:
                        break
                else:  # a lent step, as `RunStream.__anext__` takes it
                    loan.reader = current(loan.loop)
                    try:
                        event = await loan.it.__anext__()
                    except BaseException as exc:
                        await run._failed_step(loan, exc)  # pyright: ignore[reportPrivateUsage]
                        continue
                    if loan.revoked:  # read as the run was cancelled: not processed
                        channel.stepped(loan, None)
                        continue
                    loan.reader = None
                    try:
                        value = loan.ctx.run(loan.process, event)
                    except BaseException as exc:  # the run's, as if raised in its task
                        channel.failed(loan, event, exc)
                        continue
                    if (value is not None or buffer) and not channel.settled(loan, event, value):
                        continue
                if (  # not a delta of the held block: the look for another only then
                    type(event) is not block_delta
                    or event.path is not root
                    or event.index != index
                    or type(event.delta) is not kind
                ):
                    index, block, kind, head, chars = self._hold(event, block, chars)
                    if index is None:
                        for payload in self.encode(event):
                            yield sse(payload)
                        continue
                delta: TextDelta = event.delta  # pyright: ignore[reportAttributeAccessIssue, reportAssignmentType, reportUnknownMemberType, reportUnknownVariableType]
                text = delta.text
                if write_empty or text:  # the flag first: a bool tests for less
                    n = len(text)
                    chars += n
                    short_ascii = n < short and text.isascii()
                    yield f"{head}{escape(text) if short_ascii else dumps(text).decode()}}}\n\n"
        except Exception as exc:  # the run's failure is the client's to show, not a broken pipe
            for payload in self.error(exc, on_error):
                yield sse(payload)
        if self._DONE:
            yield self._DONE

    def _hold(
        self, event: object, held: OpenBlock, chars: int
    ) -> tuple[int | None, OpenBlock, type | None, str, int]:
        """Let the held block go (`chars` counted) and hold the block `event` is written to.

        A root text or reasoning delta of an open block of its type is written to it: its
        index, the block, its delta type and SSE head, and a count of 0. Anything else takes
        the general path: no index (no delta matches it), the block let go kept.
        """
        held.chars += chars
        if type(event) is BlockDelta and event.path is _ROOT and self._FAST_PATH:
            found = self._blocks.get(event.index)
            if found is not None and type(event.delta) is found.delta_type:
                return event.index, found, found.delta_type, found.head, 0
        return None, held, None, "", 0

    def _new_step(self, source: Origin | None = None) -> None:
        # A fallback client's answer names the client that streams it: its opaque data is
        # that client's, not the Worker's first client's.
        self._asm = Assembler(source or self._origin)
        self._blocks.clear()

    def _open(self, index: int, kind: BlockType, ident: str) -> None:
        # Our ids are our own (letters, digits, `-`, `_`) or a provider's call id, written
        # only for tool blocks, which take the generic path: the head needs no escaping.
        if kind is BlockType.TEXT:
            block = OpenBlock(kind, ident, TextDelta, self._TEXT_HEAD + ident + self._DELTA_FIELD)
        elif kind is BlockType.THINKING:
            head = self._REASONING_HEAD + ident + self._DELTA_FIELD
            block = OpenBlock(kind, ident, ThinkingDelta, head)
        else:
            block = OpenBlock(kind, ident, None, "")
        if (before := self._blocks.get(index)) is not None:
            # A second start without a stop: the text streamed at this index still counts.
            block.add_text(before.text_chars)
        self._blocks[index] = block

    def _feed(self, event: BlockDelta) -> OpenBlock | None:
        """Feed the assembler what it needs of a delta; the delta's open block, if any."""
        delta = event.delta
        block = self._blocks.get(event.index)
        if isinstance(delta, TextDelta):
            # The text is not needed, only its length (see `_close`).
            if block is not None:
                block.add_text(len(delta.text))
        elif not isinstance(delta, ThinkingDelta):  # opaque data and arguments
            self._asm.feed(event)
        return block

    def _close(self, event: BlockStop | BlockAbort) -> tuple[OpenBlock | None, Part | None]:
        """Close the event's block: the block, and the part it made (an empty text makes none)."""
        block = self._blocks.pop(event.index, None)
        parts = self._asm.parts
        before = len(parts)
        if block is not None and (chars := block.text_chars):
            # The text's length stands in for it: the part is made exactly when the Worker
            # makes it (a non-empty text), and AG-UI's layout gets the real length.
            self._asm.feed(BlockDelta(event.index, TextDelta(" " * chars)))
        self._asm.feed(event)
        return block, parts[-1] if len(parts) > before else None
