"""The Worker's own events, beside the provider's: what `Worker.stream` yields.

Each carries `path`: the sub-agent calls it came through (`()` for the root run's own), so
one flat stream holds a whole run tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias

from typing_extensions import TypeVar

from llm_worker.events import Event
from llm_worker.guardrails import GuardrailChecked
from llm_worker.messages import Message

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.state import RunResult
    from llm_worker.tools import ToolResult

__all__ = (
    "CacheMiss",
    "ContextCompacted",
    "OutputPartial",
    "OutputRejected",
    "RunCompleted",
    "RunEvent",
    "Steered",
    "TextComplete",
    "ToolCallComplete",
    "ToolProgress",
    "ToolResultReady",
    "TurnEnded",
    "TurnStarted",
)

ValueT = TypeVar("ValueT", default=Any)
"""The output type an event carries: a bare `RunEvent` / `OutputPartial` takes any."""


@dataclass(slots=True)
class TurnStarted:
    """A run (one turn of the conversation) begins.

    Attributes:
        turn: The turn's number on this worker (0, 1, …).
    """

    turn: int
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class TurnEnded:
    """A run ends (finished, paused, cancelled or failed).

    Attributes:
        turn: The turn's number on this worker.
    """

    turn: int
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class TextComplete:
    """A text block finished; `text` is all of it."""

    text: str
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class ToolCallComplete:
    """A tool-use block finished; `call` has the parsed arguments."""

    call: ToolCall
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class ToolResultReady:
    """A tool call's result, after the after_tool_call hooks (reported in call order)."""

    result: ToolResult
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class OutputPartial(Generic[ValueT]):
    """The structured output validated so far, while its JSON streams (`Worker.stream`).

    A `Worker[Invoice]`'s stream yields `OutputPartial[Invoice]`. The first one is sent as
    soon as the JSON so far validates; after it, at most one every
    `Worker(output_partial_interval=...)` seconds (0.05 by default) while the answer grows
    (and only once it has grown by a sixty-fourth: each try validates the whole text), and
    once more when its block ends. The last one is not the final output;
    `RunResult.output` is (checked whole, retried when invalid: see `OutputRejected`).

    Attributes:
        value: The output built from the JSON received so far (a model instance with the
            fields complete so far, a partial list, …); incomplete fields are left out.
        size: Characters of the answer's JSON received so far.
    """

    value: ValueT
    size: int
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class OutputRejected:
    """The model's structured answer did not fit the output type (`Worker.stream`).

    Sent when an answer fails validation, before its problems go back to the model (and
    before `OutputValidationError` ends the run, when no retry is left). The partials sent
    while it streamed were of this rejected answer; the next answer's follow.

    Attributes:
        errors: What was wrong, one line per problem (`path: message`): the lines the model
            is sent.
        message: The text the model reads about it (the feedback message in native mode,
            the output tool's error result in tool mode).
        attempt: Which answer this was (1 for the first).
        retries_left: Answers the model may still give; 0: the run fails with
            `OutputValidationError` after this event.
    """

    errors: list[str]
    message: str
    attempt: int
    retries_left: int
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class ToolProgress:
    """A running tool call reported how far it is.

    From an MCP server's progress notification, or `llm_worker.tools.report_progress`.

    Attributes:
        tool_use_id: The call's id.
        name: The tool's name.
        progress: How much is done; grows with each report.
        total: How much there is to do, when known.
        message: What is happening, for a person.
    """

    tool_use_id: str
    name: str
    progress: float
    total: float | None = None
    message: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class ContextCompacted:
    """The Worker compacted what it sends, to stay inside the context window (`ContextPolicy`).

    The history is unchanged; this request and the next ones send the compacted form until
    the next compaction.

    Attributes:
        tokens_before: The request's estimated input tokens before the compaction.
        tokens_after: Its estimated input tokens after it.
        window_tokens: The context window the policy keeps to.
        stages: What was done, in order: `"tool_results"` (old results sent as their blob
            summaries), `"thinking"` (old thinking dropped), `"summary"` (the oldest turns
            replaced by an LLM summary), `"dropped"` (the oldest turns left out), `"media"`
            (old images and documents sent as notes: the provider's media limit per request).
        tool_results: Old tool results now sent as blob summaries (this compaction's).
        thinking_parts: Thinking parts dropped (this compaction's).
        messages_replaced: History messages the summary or the omission note stands for
            (all of them so far).
        summary: The summary's text, when one was written.
    """

    tokens_before: int
    tokens_after: int
    window_tokens: int
    stages: tuple[str, ...]
    tool_results: int = 0
    thinking_parts: int = 0
    messages_replaced: int = 0
    summary: str | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class RunCompleted(Generic[ValueT]):
    """The last item of `Worker.stream`: the run's result (`RunCompleted[Invoice]`)."""

    result: RunResult[ValueT]
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(frozen=True, slots=True)
class Steered:
    """Queued messages joined the history (an event of `Worker.stream()`).

    Attributes:
        messages: The messages, as the history now holds them.
        kind: `"steer"` (taken in before a request) or `"follow_up"` (when the run would
            have finished).
    """

    messages: list[Message]
    kind: Literal["steer", "follow_up"]
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


@dataclass(slots=True)
class CacheMiss:
    """A request that does not start as the previous request of the conversation did.

    Providers cache a prompt's prefix, so what follows the first difference is read again
    (and billed) in full. Logged at INFO on the `llm_worker` logger (its `str`, without
    content: the place, the offset and hashes), yielded by `Worker.stream` and listed in
    `RunResult.cache_misses`. Only this object carries the differing characters.

    Attributes:
        request: The request's number in the run (1 for the first).
        where: What differs first, in the order a provider reads the prefix: `"tools"`
            (the tool list), `"system"` (the system prompt) or `"messages"`.
        index: The tool's or message's index (for `"messages"`: where the new request
            parts from the previous one; the previous request's length when it lost its
            end); `None` for the system prompt.
        part: The part's index in that message, when the message holds the difference.
        offset: Characters into that text (the system prompt, the part's text, the tool's
            name, description and schema) where they first differ.
        before_hash: BLAKE2b (8 bytes, hex) of the previous text, to tell misses apart
            without showing it; keyed by a secret of the process, so that a short text
            (a PIN, a date) cannot be found from a log by hashing candidates.
        after_hash: The same of the new text.
        before: Up to 40 characters of the previous text from `offset` (never logged).
        after: Up to 40 characters of the new text from `offset` (never logged).
    """

    request: int
    where: Literal["tools", "system", "messages"]
    index: int | None
    part: int | None
    offset: int
    before_hash: str
    after_hash: str
    before: str = field(repr=False)
    after: str = field(repr=False)
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""

    def __str__(self) -> str:
        place = self.where if self.index is None else f"{self.where}[{self.index}]"
        if self.part is not None:
            place += f" part {self.part}"
        return (
            f"request {self.request}: {place} differs from the previous request at "
            f"character {self.offset} ({self.before_hash} -> {self.after_hash})"
        )


RunEvent: TypeAlias = (
    Event
    | TurnStarted
    | TurnEnded
    | TextComplete
    | ToolCallComplete
    | ToolResultReady
    | OutputPartial[ValueT]
    | OutputRejected
    | ToolProgress
    | ContextCompacted
    | GuardrailChecked
    | Steered
    | CacheMiss
    | RunCompleted[ValueT]
)
"""What `Worker.stream` yields: the provider events plus the Worker's own.

`RunEvent[Invoice]` is what a `Worker[Invoice]`'s stream yields (its partials and result are
typed); a bare `RunEvent` is `RunEvent[Any]`, any Worker's."""
