"""The one emitter of block events, and the loop that drives every provider stream.

Provider modules only map their chunks to calls on [`BlockEmitter`][] (`text`, `thinking`,
`tool_use`, `input_json`, `signature`, `citation`, `provider_block`, `stop`, `finish`, and
`response_info` for the closing status); the emitter keeps
the rules of the event model for all of them:

- at most one block is open: starting a block closes the open one;
- blocks get indexes 0, 1, 2, … in order, whatever the provider numbered them;
- a delta with no open block of its kind starts one (the implicit start of providers that send
  no block start);
- the stop of the last closed block is held back until the provider says why it stopped, so the
  stop reason rides on the last block's `BlockStop`; an answer with no block at all gets an
  empty text block to carry it;
- the answer holds at most `max_answer_chars` characters of text, thinking, tool arguments and
  signatures together: the delta that passes the bound fails the stream with
  `AnswerTooLargeError` (nothing more is read), so memory stays proportional to the bound;
- a tool call has a non-empty id and name, and an id is used once per answer: a call without
  either, or a second tool-use block with an id already used, fails the stream with
  `MalformedStreamError`, even when its content is the same (the tool would run twice, and
  Anthropic rejects a history with duplicate ids), rather than guessing which of the two
  calls the model meant.

[`drive`][] runs bytes → SSE → mapper → events, and on any failure emits the abort of the
open block, an `ErrorEvent`, a FAILED status, then raises the typed error.
"""

# `drive` reads and sets the emitter's text state inline (a call per delta cost more than
# the rest of its hand-off): the emitter's protected fields are this module's to use.
# pyright: reportPrivateUsage=false

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

from llm_worker._json import json_type
from llm_worker._wide_json import json_bytes
from llm_worker.errors import (
    AnswerTooLargeError,
    MalformedStreamError,
    StreamInterruptedError,
)
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockMetadata,
    BlockStart,
    BlockStop,
    BlockType,
    CitationDelta,
    Event,
    InputJsonDelta,
    ProviderMetadata,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
    TokenLogprob,
    ToolUseMetadata,
)
from llm_worker.messages import Citation
from llm_worker.providers._settings import DEFAULT_MAX_ANSWER_CHARS
from llm_worker.providers._sse import DEFAULT_MAX_EVENT_BYTES, SSEDecoder
from llm_worker.providers._stream_failure import Failure

__all__ = ("BlockEmitter", "StreamMapper", "drive", "wrong_type")

_TEXT_META = TextMetadata()
_TEXT = BlockType.TEXT
# The deltas of text are built without their dataclass `__init__` (see `BlockEmitter.text`).
_new = object.__new__


class BlockEmitter:
    """Collects the events of one response into `out`, keeping the block rules.

    The driver drains `out` after each provider chunk; provider mappers only call methods.
    """

    __slots__ = (
        "_call_ids",
        "_held",
        "_index",
        "_open",
        "_opened_any",
        "_room",
        "info",
        "max_answer_chars",
        "out",
    )

    def __init__(self, max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS) -> None:
        self.out: list[Event] = []
        self.max_answer_chars = max_answer_chars
        self._room = max_answer_chars  # characters the answer may still grow by
        self._index = -1
        self._open: BlockType | None = None
        self._held: BlockStop | None = None
        self._opened_any = False
        # What the provider said about the response itself; drive() puts it on the closing
        # StatusEvent.
        self.info = StatusEvent(ResponseStatus.COMPLETED)
        # The answer's tool call ids, made at its first call: most answers have none, and an
        # object fewer per stream in flight is one fewer for every pass of the collector.
        self._call_ids: set[str] | None = None

    @property
    def open_type(self) -> BlockType | None:
        """The kind of the open block, or `None`."""
        return self._open

    @property
    def index(self) -> int:
        """Index of the open (or last) block; -1 before the first."""
        return self._index

    def start(self, block_type: BlockType, metadata: BlockMetadata) -> int:
        """Close the open block and start a new one; return its index."""
        if self._open is not None:
            self.stop()
        if self._held is not None:
            self.out.append(self._held)
            self._held = None
        self._index += 1
        self._open = block_type
        self._opened_any = True
        self.out.append(BlockStart(self._index, block_type, metadata))
        return self._index

    def text(self, text: str, logprobs: list[TokenLogprob] | None = None) -> None:
        """Append answer text, starting a text block if none is open."""
        self.out.append(self.text_event(text, logprobs))

    def text_event(self, text: str, logprobs: list[TokenLogprob] | None = None) -> BlockDelta:
        """Answer text as its event, not yet in `out`: starting a text block if none is open.

        `drive` hands it on itself, after `out` (which holds the start of the block, if this
        text opened one): the text a mapper returns from `on_event`.
        """
        room = self._room - len(text)  # inline: this runs once per delta
        self._room = room
        if room < 0:
            self._too_large()
        if self._open is not _TEXT:
            self.start(_TEXT, _TEXT_META)
        # `BlockDelta(self._index, TextDelta(text, logprobs))`, built field by field: calling
        # a class enters its `__init__` from C (a new interpreter frame per object), a third
        # of the emitter's work per delta. Every field is set here (tests/providers/
        # test_emitter_events.py holds them equal to the constructed ones).
        delta = _new(TextDelta)
        delta.text = text
        delta.logprobs = logprobs
        event = _new(BlockDelta)
        event.index = self._index
        event.delta = delta
        event.path = ()
        return event

    def citation(self, citation: Citation, *, charged: bool = False) -> None:
        """Attach a citation to the open text block (starting one if none is open).

        `charged`: its JSON was counted already, by `charge`, while a mapper held it.
        """
        if not charged:
            self.charge(_size(citation.data))  # the provider's JSON, kept verbatim
        if self._open is not BlockType.TEXT:
            self.start(BlockType.TEXT, _TEXT_META)
        self.out.append(BlockDelta(self._index, CitationDelta(citation)))

    def response_info(
        self,
        *,
        response_id: str | None = None,
        model: str | None = None,
        service_tier: str | None = None,
        system_fingerprint: str | None = None,
    ) -> None:
        """Record what the provider said about the response (later values win)."""
        info = self.info
        info.response_id = response_id or info.response_id
        info.model = model or info.model
        info.service_tier = service_tier or info.service_tier
        info.system_fingerprint = system_fingerprint or info.system_fingerprint

    def thinking(self, text: str) -> None:
        """Append thinking text, starting a thinking block if none is open."""
        self._room -= len(text)  # inline: this runs once per delta
        if self._room < 0:
            self._too_large()
        if self._open is not BlockType.THINKING:
            self.start(BlockType.THINKING, ThinkingMetadata())
        self.out.append(BlockDelta(self._index, ThinkingDelta(text)))

    def tool_use(
        self,
        call_id: str,
        name: str,
        *,
        item_id: str | None = None,
        caller: dict[str, Any] | None = None,
    ) -> int:
        """Start a tool-use block (always a new block).

        Raises:
            MalformedStreamError: The id or the name is empty (no result could answer the
                call, no tool could run it), or the answer already has a call with this id.
        """
        if not call_id or not name:
            missing = "an id" if not call_id else "a name"
            raise MalformedStreamError(
                f"a tool call without {missing} (id {call_id!r}, name {name!r})", streamed=True
            )
        ids = self._call_ids
        if ids is None:
            ids = self._call_ids = set()
        elif call_id in ids:
            raise MalformedStreamError(
                f"the answer has two tool calls with the id {call_id!r}: each call needs an id "
                "of its own (the tool would run twice and the provider rejects duplicate ids)",
                streamed=True,
            )
        ids.add(call_id)
        return self.start(BlockType.TOOL_USE, ToolUseMetadata(call_id, name, item_id, caller))

    def input_json(self, fragment: str, *, charged: int = 0) -> None:
        """Append a fragment of the open tool call's JSON arguments.

        `charged`: characters of it already counted by `charge` while a mapper held its
        pieces (a call buffered until its name came, arguments streamed in pieces).
        """
        if self._open is not BlockType.TOOL_USE:
            raise MalformedStreamError("tool arguments arrived outside a tool call")
        self.charge(len(fragment) - charged)
        self.out.append(BlockDelta(self._index, InputJsonDelta(fragment)))

    def signature(self, signature: str) -> None:
        """Attach opaque continuation data to the open block."""
        if self._open is None:
            raise MalformedStreamError("a signature arrived outside any block")
        self._room -= len(signature)
        if self._room < 0:
            self._too_large()
        self.out.append(BlockDelta(self._index, SignatureDelta(signature)))

    def charge(self, size: int) -> None:
        """Count `size` characters against `max_answer_chars`; past it, the answer fails.

        Mappers call it for what they hold before it becomes an event (a buffered call's
        arguments), so what they hold stays within the bound too.

        Raises:
            AnswerTooLargeError: The answer passed the bound.
        """
        if size > 0:
            self._room -= size
            if self._room < 0:
                self._too_large()

    def _too_large(self) -> None:
        limit = self.max_answer_chars
        raise AnswerTooLargeError(
            f"the answer passed max_answer_chars={limit:,} characters (text, thinking, tool "
            "arguments and signatures); the rest was not read. Ask for a shorter answer, "
            "or raise the client's max_answer_chars",
            limit=limit,
            streamed=True,
        )

    def provider_block(self, data: dict[str, Any]) -> int:
        """Emit a whole provider-native block (start, then its held stop); return its index."""
        self.charge(_size(data))  # code, its result, an inline file: kept verbatim
        index = self.start(BlockType.PROVIDER, ProviderMetadata(data))
        self.stop()
        return index

    def stop(self) -> None:
        """Close the open block; its stop is held until the next block or `finish`."""
        if self._open is None:
            return
        if self._held is not None:
            self.out.append(self._held)
        self._held = BlockStop(self._index, self._open)
        self._open = None

    def finish(
        self,
        stop_reason: StopReason | None,
        raw_stop_reason: str | None,
        *,
        stop_sequence: str | None = None,
        stop_message: str | None = None,
    ) -> None:
        """The provider said why it stopped: close everything, the reason on the last stop."""
        if not self._opened_any:
            self.start(BlockType.TEXT, _TEXT_META)
        self.stop()
        held = self._held
        if held is not None:
            held.stop_reason = stop_reason
            held.raw_stop_reason = raw_stop_reason
            held.stop_sequence = stop_sequence
            held.stop_message = stop_message
            self.out.append(held)
            self._held = None

    def abort(self, reason: str) -> None:
        """The response failed: release a held stop, abort the open block."""
        if self._held is not None:
            self.out.append(self._held)
            self._held = None
        if self._open is not None:
            self.out.append(BlockAbort(self._index, self._open, reason))
            self._open = None


def wrong_type(
    where: str, field: str, value: object, expected: str = "a string"
) -> MalformedStreamError:
    """The error for a field of the wrong JSON type: names the event, the field and the type.

    Mappers raise it before a wrongly typed value could reach an event (a number as text
    would otherwise fail far downstream, in whatever joins the text).
    """
    return MalformedStreamError(
        f"{where}: `{field}` is {json_type(value)}, expected {expected}", streamed=True
    )


class StreamMapper(Protocol):
    """A provider's chunk mapping: one SSE event in, emitter calls out.

    A mapper may also define `end_of_read(emitter)`, called after the events of each network
    read: where a provider that repeats a running total in every event (Gemini's usage) emits
    one snapshot per read instead of one per event. And `caller_error(exc)`, which may return
    the `LLMWorkerError` a provider error really is (a `ConfigurationError` for an account
    setting the caller must change): `drive` raises it, chained to the provider error, after
    the failure events.
    """

    def on_event(self, event: str, data: bytes, emitter: BlockEmitter, /) -> str | None:
        """Map one SSE event: its type and its data, UTF-8 bytes (`_sse.json_of` parses them).

        Raise a `ProviderError` for a provider error event. Return a fragment of answer text
        (not empty, without logprobs) rather than passing it to `emitter.text`, where the
        event is no more than that: `drive` makes its event after what the mapper emitted,
        as `emitter.text` would, without the emitter's event list (the hot path of a stream
        of text deltas). Return `None` otherwise.
        """
        ...

    @property
    def complete(self) -> bool:
        """Whether the provider has said the response is complete."""
        ...

    def on_end(self, emitter: BlockEmitter) -> None:
        """The body ended and `complete` is true: emit what is still held (usage, stop)."""
        ...


async def drive(
    chunks: AsyncIterator[bytes],
    mapper: StreamMapper | Callable[[], StreamMapper],
    *,
    provider: str,
    scrub: Callable[[str], str] = lambda s: s,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
) -> AsyncIterator[Event]:
    """Run one response: bytes → SSE events → mapper → normalized events.

    Yields `StatusEvent(STARTED)` at the answer's first bytes, `StatusEvent(COMPLETED)` last. On
    any failure yields the abort of the open block, an `ErrorEvent`, `StatusEvent(FAILED)`, then
    raises a `ProviderError` subclass (scrubbed, its provider set) or the mapper's `caller_error`
    of it; nothing received is withheld. `mapper` may be a function making it, called at the
    first bytes (a waiting stream holds no mapper, decoder nor emitter). Closing this generator
    (`aclose()`) closes `chunks` at once. An SSE line or event past `max_event_bytes` fails the
    stream (`MalformedStreamError`), an answer past `max_answer_chars` (`AnswerTooLargeError`).
    """
    pump: _Pump | None = None
    try:
        # Inline, the hot loop: each event's output handed on before the next is decoded
        # (a thousand held made the GC cost most); the emitter's text state read in place.
        async for chunk in chunks:
            pump = pump or _Pump(mapper, provider, max_event_bytes, max_answer_chars, started=True)
            mapper = pump.mapper  # made: the function that made it (and its request) let go
            emitter, out, on_event = pump.emitter, pump.out, pump.on_event
            for kind, data in pump.decoder.raw(chunk):
                text = on_event(kind, data, emitter)
                if text is not None:  # answer text: its event handed on here, not in `out`
                    room = emitter._room - len(text)  # `text_event`'s common case
                    if room < 0 or emitter._open is not _TEXT:
                        delta = emitter.text_event(text)  # a block to open, or too long
                    else:
                        emitter._room = room
                        piece = _new(TextDelta)
                        piece.text, piece.logprobs = text, None
                        delta = _new(BlockDelta)
                        delta.index, delta.delta, delta.path = emitter._index, piece, ()
                    if not out:
                        yield delta
                        continue
                    out.append(delta)  # after what the mapper emitted, the block's start
                if out:
                    for event in out:
                        yield event
                    out.clear()
            # (Two calls less a read where the mapper has no `end_of_read` and `out` is empty.)
            for event in pump.read_ended() if pump.per_read or out else out:
                yield event
        pump = pump or _Pump(mapper, provider, max_event_bytes, max_answer_chars, started=False)
        for event in pump.end():  # (no byte at all: no STARTED)
            yield event
    except Exception as exc:
        pump = pump or _Pump(mapper, provider, max_event_bytes, max_answer_chars, started=False)
        for event in pump.failed(exc, scrub):  # then raises
            yield event
    finally:
        await _close(chunks)
    yield pump.emitter.info


async def _close(chunks: AsyncIterator[bytes]) -> None:
    # Nested async generators are not closed with their consumer (PEP 533): close them
    # here, innermost last, so an abandoned stream frees its connection now.
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


class _Pump:
    """One response's parts, made at its first bytes: mapper, SSE decoder, emitter."""

    __slots__ = (
        "_provider",
        "decoder",
        "emitter",
        "end_of_read",
        "mapper",
        "on_event",
        "out",
        "per_read",
    )

    def __init__(
        self,
        mapper: StreamMapper | Callable[[], StreamMapper],
        provider: str,
        max_event_bytes: int,
        max_answer_chars: int,
        *,
        started: bool,
    ) -> None:
        # A mapper is not callable: a function given in its place makes it (see `drive`).
        made = mapper() if callable(mapper) else mapper
        self.mapper = made
        self.on_event = made.on_event
        self._provider = provider
        self.emitter = emitter = BlockEmitter(max_answer_chars)
        self.out = emitter.out
        if started:
            self.out.append(StatusEvent(ResponseStatus.STARTED))
        self.decoder = SSEDecoder(max_event_bytes)
        # Optional (see StreamMapper): called once per network read, after its events.
        self.end_of_read: Callable[[BlockEmitter], None] = getattr(
            made, "end_of_read", _no_end_of_read
        )
        self.per_read = self.end_of_read is not _no_end_of_read

    def read_ended(self) -> list[Event]:
        """After a read's events: what the mapper emits once per read, taken out of `out`.

        STARTED too, when no event ended in the first read.
        """
        self.end_of_read(self.emitter)
        out = self.out
        if not out:
            return out
        events = out.copy()
        out.clear()
        return events

    def failed(self, exc: Exception, scrub: Callable[[str], str]) -> Iterator[Event]:
        """A failure's last events (abort, error, FAILED), then its error raised.

        `exc` itself when it is no failure of the stream: a bug, or the caller's error.
        """
        failure = Failure.of(
            exc, self.emitter, self.mapper, self.end_of_read, provider=self._provider, scrub=scrub
        )
        if failure is None:
            raise exc
        yield from failure.events
        failure.throw(exc)

    def end(self) -> list[Event]:
        """The body ended: the last events, or the error of an answer that is not complete."""
        mapper, emitter = self.mapper, self.emitter
        for kind, data in self.decoder.raw_flush():
            if mapper.complete:
                _text(mapper.on_event(kind, data, emitter), emitter)
                continue
            try:
                _text(mapper.on_event(kind, data, emitter), emitter)
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                # An event without its blank line at the end of an unfinished stream is most
                # likely cut in the middle: the stream was interrupted, not malformed.
                raise StreamInterruptedError(
                    "the stream ended in the middle of an event, before the provider said the "
                    "answer was complete",
                    provider=self._provider,
                    streamed=True,
                ) from exc
        if not mapper.complete:
            raise StreamInterruptedError(
                "the stream ended before the provider said the answer was complete",
                provider=self._provider,
                streamed=True,
            )
        mapper.on_end(emitter)
        return emitter.out


def _text(text: str | None, emitter: BlockEmitter) -> None:
    # The text an `on_event` returned, where `drive` does not hand it on itself.
    if text is not None:
        emitter.text(text)


def _no_end_of_read(emitter: BlockEmitter) -> None:
    """A mapper without `end_of_read`: nothing to add after a read."""


def _size(data: dict[str, Any]) -> int:
    """The characters a provider's JSON holds, as counted against `max_answer_chars`."""
    return len(json_bytes(data))  # an integer past 64 bits too (read with its digits)
