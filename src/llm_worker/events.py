"""The normalized event model: what every provider client yields.

A provider client turns one streaming HTTP response into a flat stream of these events. There
are two families:

- meta events, dispatched at once: [`PingEvent`][], [`UsageEvent`][], [`StatusEvent`][],
  [`ErrorEvent`][];
- block events, which describe the content of the answer block by block:
  [`BlockStart`][] → [`BlockDelta`][]* → [`BlockStop`][] (or [`BlockAbort`][]).

Rules every client keeps: at most one block is open at a time; blocks arrive in order with
indexes 0, 1, 2, … (the position of the block in the answer); the stop reason of the response
rides on the `BlockStop` of its last block (earlier stops carry `None`); a failure gives a
`BlockAbort` for the open block, an `ErrorEvent`, a FAILED `StatusEvent`, then an exception.

These types are created once per streamed chunk: they are slotted dataclasses, cheap to build.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, TypeAlias

from llm_worker._fieldwise import fieldwise
from llm_worker.messages import Citation, Origin

__all__ = (
    "USAGE_FIELDS",
    "BlockAbort",
    "BlockDelta",
    "BlockMetadata",
    "BlockStart",
    "BlockStop",
    "BlockType",
    "CitationDelta",
    "Delta",
    "ErrorEvent",
    "Event",
    "InputJsonDelta",
    "PingEvent",
    "ProviderMetadata",
    "ResponseStatus",
    "SignatureDelta",
    "StatusEvent",
    "StopReason",
    "TextDelta",
    "TextMetadata",
    "ThinkingDelta",
    "ThinkingMetadata",
    "TokenLogprob",
    "ToolResultMetadata",
    "ToolUseMetadata",
    "UsageEvent",
)


class ResponseStatus(StrEnum):
    """The lifecycle of one streamed response."""

    STARTED = "started"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


class BlockType(StrEnum):
    """The kind of a content block."""

    TEXT = "text"
    THINKING = "thinking"
    TOOL_USE = "tool_use"
    TOOL_RESULT = "tool_result"
    PROVIDER = "provider"
    """Provider-native content with no neutral kind (Anthropic server-tool blocks, …): whole
    in its `ProviderMetadata`, with no deltas, and routed to no Timeline handler."""


class StopReason(StrEnum):
    """Why the model stopped generating.

    The first four are the portable reasons. The others are provider-specific reasons that are
    kept visibly rather than folded into a portable one; the provider's own spelling is always
    available as `BlockStop.raw_stop_reason`.
    """

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"
    PAUSE_TURN = "pause_turn"
    """Anthropic: a long-running server tool paused the turn; send the answer back to go on."""
    REFUSAL = "refusal"
    """The model refused (Anthropic `refusal`)."""
    CONTENT_FILTER = "content_filter"
    """A provider filter cut the answer (OpenAI `content_filter`, Gemini `SAFETY` …)."""
    COMPACTION = "compaction"
    """Anthropic: the context was compacted mid-answer; send the answer back to go on."""
    MALFORMED_TOOL_CALL = "malformed_tool_call"
    """The model produced a tool call the provider could not accept (Gemini
    `MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`): not an answer."""
    OTHER = "other"
    """A reason this library does not know; see `raw_stop_reason`."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class PingEvent:
    """A keep-alive from the provider.

    Attributes:
        timestamp: Seconds since the epoch when the client saw the ping, if known.
    """

    timestamp: float | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class UsageEvent:
    """Token usage of the response so far, with the same meaning on every provider.

    Each `UsageEvent` is a snapshot for the current response: a field that is `None` is not
    (yet) known, and the last non-`None` value of each field is the response's total.
    A provider that reports usage several times (Anthropic at the start and the end, Gemini in
    every chunk) gives several snapshots; consumers keep the latest value per field.

    Attributes:
        input_tokens: Every prompt token, cached ones included (Anthropic reports cached tokens
            apart; clients add them back so this number means the same everywhere).
        output_tokens: Generated tokens, reasoning/thinking tokens included.
        total_tokens: `input_tokens + output_tokens` when the provider says so.
        cache_read_input_tokens: The part of `input_tokens` read from the prompt cache.
        cache_creation_input_tokens: The part of `input_tokens` written to the prompt cache.
        reasoning_tokens: The part of `output_tokens` spent on reasoning, where reported.
        cache_creation_5m_input_tokens: The part of `cache_creation_input_tokens` written with
            a 5-minute lifetime (Anthropic).
        cache_creation_1h_input_tokens: The part written with a 1-hour lifetime (Anthropic).
        web_search_requests: Server-side web searches the provider ran (Anthropic).
        web_fetch_requests: Server-side web fetches the provider ran (Anthropic).
        audio_input_tokens: The part of `input_tokens` that was audio (OpenAI).
        audio_output_tokens: The part of `output_tokens` that was audio (OpenAI).
        accepted_prediction_tokens: Predicted-output tokens that appeared in the answer (OpenAI).
        rejected_prediction_tokens: Predicted-output tokens that did not, still billed (OpenAI).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_creation_5m_input_tokens: int | None = None
    cache_creation_1h_input_tokens: int | None = None
    web_search_requests: int | None = None
    web_fetch_requests: int | None = None
    audio_input_tokens: int | None = None
    audio_output_tokens: int | None = None
    accepted_prediction_tokens: int | None = None
    rejected_prediction_tokens: int | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""

    def updated(self, newer: UsageEvent) -> UsageEvent:
        """Return this snapshot overlaid with the non-`None` fields of a newer one."""
        return UsageEvent(
            *(_pick(getattr(newer, name), getattr(self, name)) for name in USAGE_FIELDS)
        )

    def __add__(self, other: UsageEvent) -> UsageEvent:
        """Sum two responses' usage (a field stays `None` only when both are `None`)."""
        return UsageEvent(
            *(_add(getattr(self, name), getattr(other, name)) for name in USAGE_FIELDS)
        )


USAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(UsageEvent) if f.name != "path")
"""The names of `UsageEvent`'s counters, in declaration order."""


def _pick(newer: int | None, older: int | None) -> int | None:
    return older if newer is None else newer


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class StatusEvent:
    """A change in the response's lifecycle.

    The closing event (COMPLETED, or FAILED) carries what the provider said about the response
    itself, where it said it: its id (what `previous_response_id` and support requests name),
    the exact model version that answered, and the service tier that served it.

    Attributes:
        status: The new status.
        response_id: The provider's id of this response (`msg_…`, `chatcmpl-…`, `resp_…`,
            Gemini's `responseId`).
        model: The model version that answered, as the provider names it.
        service_tier: The service tier that served the request, where reported.
        system_fingerprint: OpenAI Chat Completions: the backend configuration that served
            the answer (with `seed`, it tells when a change of backend may change answers).
        source: The client that streams this answer (its provider and model as configured),
            set by a client that chooses among several (`FallbackClient`); a second STARTED
            from it means the answer so far was withdrawn and starts over.
    """

    status: ResponseStatus
    response_id: str | None = None
    model: str | None = None
    service_tier: str | None = None
    system_fingerprint: str | None = None
    source: Origin | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ErrorEvent:
    """An error reported by the provider or detected in the stream.

    Attributes:
        code: The provider's error type or code (`overloaded_error`, `rate_limit_exceeded`, …),
            or one of this library's (`stream_interrupted`, `malformed_stream`).
        message: A message a person can act on. Never contains an API key.
    """

    code: str | None
    message: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class TextMetadata:
    """Metadata of a text block.

    Attributes:
        item_id: OpenAI Responses message item id (`msg_…`): a replayed reasoning item must be
            followed by the message it produced, named by this id.
        phase: OpenAI Responses message phase (`commentary` / `final_answer`).
    """

    item_id: str | None = None
    phase: str | None = None


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ThinkingMetadata:
    """Metadata of a thinking block.

    Attributes:
        redacted: Anthropic `redacted_thinking` data: encrypted reasoning that must be sent back
            untouched. A redacted block has no text deltas.
        item_id: OpenAI Responses reasoning item id (`rs_…`), needed to send the item back;
            on Chat Completions, `"thinking"`: thinking from Mistral's thinking content parts,
            sent back as one.
        replay: The thinking text itself is continuation data: the model that wrote it needs
            it back in later requests (Chat Completions `reasoning_content`, which DeepSeek,
            Z.ai and Kimi require within a tool loop). The part it becomes carries an
            `Origin`, and goes back only to the same provider and model.
    """

    redacted: str | None = None
    item_id: str | None = None
    replay: bool = False


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ToolUseMetadata:
    """Metadata of a tool-use block.

    Attributes:
        id: The call id the tool result must name (synthesized where the provider has none).
        name: The tool's name.
        item_id: The provider's own id of the call where it must be sent back: OpenAI
            Responses function-call item id (`fc_…`), Gemini `functionCall.id`.
        caller: Anthropic: who made the call (`{"type": "direct"}`, or the code-execution
            tool that called it from its code), as the API sent it. OpenAI Responses: the
            item's `caller` fields and its function's `namespace`.
    """

    id: str
    name: str
    item_id: str | None = None
    caller: dict[str, Any] | None = None


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ToolResultMetadata:
    """Metadata of a tool-result block.

    Attributes:
        tool_use_id: The id of the call this result answers.
    """

    tool_use_id: str


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ProviderMetadata:
    """Metadata of a provider block: the block itself.

    Attributes:
        data: The provider's block as JSON, complete (the block has no deltas). It becomes a
            `ProviderPart`, sent back only to the provider and model that produced it.
    """

    data: dict[str, Any]


BlockMetadata: TypeAlias = (
    TextMetadata | ThinkingMetadata | ToolUseMetadata | ToolResultMetadata | ProviderMetadata
)
"""Per-kind metadata of a block."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class TokenLogprob:
    """The log probability of one generated token, with the most likely alternatives.

    Attributes:
        token: The token as text.
        logprob: Its natural-log probability.
        top: The most likely tokens at this position as `(token, logprob)` pairs, when asked for.
    """

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=lambda: [])


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class TextDelta:
    """A fragment of answer text.

    Attributes:
        text: The fragment.
        logprobs: The log probabilities of the fragment's tokens, when the request asked for
            them and the provider sent them with this fragment.
    """

    text: str
    logprobs: list[TokenLogprob] | None = None


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ThinkingDelta:
    """A fragment of thinking / reasoning text (or a reasoning summary)."""

    text: str


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class InputJsonDelta:
    """A fragment of a tool call's JSON arguments; the fragments concatenate to the JSON text."""

    partial_json: str


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class SignatureDelta:
    """Provider-opaque continuation data for the open block, to be sent back verbatim.

    Anthropic thinking `signature`, Gemini `thoughtSignature` (on any part), OpenAI Responses
    reasoning `encrypted_content`. Several deltas of one block concatenate.
    """

    signature: str


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class CitationDelta:
    """A citation for the open text block, as soon as the provider sends it.

    Timeline handlers do not receive it (it is not text); it reaches the raw event stream
    (`Worker.stream`, a client's `stream`) and ends up in `TextPart.citations`.
    """

    citation: Citation


Delta: TypeAlias = TextDelta | ThinkingDelta | InputJsonDelta | SignatureDelta | CitationDelta
"""A block fragment."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class BlockStart:
    """A content block begins.

    Attributes:
        index: Position of the block in the answer (0, 1, 2, …).
        block_type: The kind of block.
        metadata: Per-kind metadata (tool use carries `id` and `name`).
    """

    index: int
    block_type: BlockType
    metadata: BlockMetadata
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class BlockDelta:
    """A fragment of the open block's content.

    Attributes:
        index: Index of the open block.
        delta: The fragment.
    """

    index: int
    delta: Delta
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class BlockStop:
    """A content block ends normally.

    Attributes:
        index: Index of the block.
        block_type: Its kind.
        stop_reason: Why the response stopped; set on the last block of a response only.
        raw_stop_reason: The provider's own spelling of the stop reason (`end_turn`, `stop`,
            `SAFETY`, …) next to the normalized one.
        stop_sequence: The stop sequence that ended the answer, where the provider says which.
        stop_message: The provider's words about the stop (Gemini `finishMessage`, a refusal's
            explanation), where it gives any.
    """

    index: int
    block_type: BlockType
    stop_reason: StopReason | None = None
    raw_stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_message: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class BlockAbort:
    """A content block ends abnormally (stream failure, cancellation).

    Attributes:
        index: Index of the block.
        block_type: Its kind.
        reason: Why it was aborted.
    """

    index: int
    block_type: BlockType
    reason: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


Event: TypeAlias = (
    PingEvent
    | UsageEvent
    | StatusEvent
    | ErrorEvent
    | BlockStart
    | BlockDelta
    | BlockStop
    | BlockAbort
)
"""Any normalized event."""
