"""What a run returns, and the Worker's own events.

`RunResult`, `RunStatus`, the `PauseState` that resumes a paused run, and the events the Worker
adds to the provider's: turn start/end, completed text and tool calls, tool results.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, cast, get_args

from typing_extensions import TypeVar

from llm_worker._cost import RequestUsage, cache_hit_rate, total_cost
from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker._pause_checks import empty_text, output_call_mismatch, pending_mismatch
from llm_worker._pause_json import (
    call_to_dict,
    output_call_from_dict,
    pending_fields,
    pending_to_dict,
    stop_reason_from_dict,
    trace_context_from_dict,
)
from llm_worker._run_events import (
    CacheMiss,
    ContextCompacted,
    OutputPartial,
    OutputRejected,
    RunCompleted,
    RunEvent,
    Steered,
    TextComplete,
    ToolCallComplete,
    ToolProgress,
    ToolResultReady,
    TurnEnded,
    TurnStarted,
)
from llm_worker._wide_json import exact_loads, json_bytes
from llm_worker.errors import NoOutputError, PauseStateError
from llm_worker.events import USAGE_FIELDS, StopReason, UsageEvent
from llm_worker.messages import Message

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.tools import ToolResult

__all__ = (
    "CacheMiss",
    "CallStatus",
    "ChildRun",
    "ContextCompacted",
    "Decision",
    "OutputPartial",
    "OutputRejected",
    "PauseState",
    "PendingCall",
    "RequestUsage",
    "RunCompleted",
    "RunEvent",
    "RunResult",
    "RunStatus",
    "Steered",
    "TextComplete",
    "ToolCallComplete",
    "ToolProgress",
    "ToolResultReady",
    "TurnEnded",
    "TurnStarted",
)

_STATE_VERSION = 1


class RunStatus(StrEnum):
    """How a run ended."""

    FINISHED = "finished"
    """The model gave its final answer and the on_turn_end hooks accepted it."""
    PAUSED = "paused"
    """A hook paused the run; `RunResult.state` resumes it."""
    CANCELLED = "cancelled"
    """`worker.cancel()` or a `Cancel` hook result stopped the run."""


CallStatus: TypeAlias = Literal["pending", "allowed", "skipped", "denied", "done", "not_run"]
"""Where a paused call stands: not decided yet, allowed (not run yet), skipped by a hook,
denied by a `Decision`, run, or recorded as never run (`Worker.discard_pause`)."""

_STATUSES: frozenset[str] = frozenset(get_args(CallStatus))
_QUEUES = ("steers", "follow_ups")  # absent from states saved before steering: none queued


@dataclass(slots=True)
class PendingCall:
    """One tool call of a paused batch.

    Attributes:
        call: The call. Its arguments are the model's while the call is `"pending"` (so that
            the before_tool_call chain, run again on resume, applies each rewrite once), and
            the rewritten ones once the hooks allowed it.
        status: Where it stands.
        result: Its result, when it has one (`"done"`, `"skipped"`, `"denied"` and
            `"not_run"` calls) — never recomputed.
        approved: A decision or a hook approved the call (a tool that `requires_approval`
            then runs without pausing again).
        rewritten_input: For a `"pending"` call, the arguments as the before_tool_call hooks
            that ran before the pause left them (a sanitizing hook's rewrite), when they
            changed the model's; `None` otherwise. A `Decision.approve()` runs the call with
            them, since the hooks do not see it again; resumed through the hooks instead,
            the chain starts from the model's arguments and each rewrite applies once.
    """

    call: ToolCall
    status: CallStatus = "pending"
    result: ToolResult | None = None
    approved: bool = False
    rewritten_input: dict[str, Any] | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        """What an approval runs the call with: `rewritten_input`, else the call's own.

        Show these to the person who approves: they are what the tool would receive.
        """
        return self.call.input if self.rewritten_input is None else self.rewritten_input


@dataclass(slots=True, frozen=True)
class Decision:
    """The application's decision on one pending call, given to `Worker.resume`.

    Use `Decision.approve()`, `Decision.approve(input={...})` (edited arguments) or
    `Decision.deny("reason the model reads")`. By default an approved call runs at once: the
    decision stands in for the before_tool_call hooks, which do not see the call again. It
    runs with the arguments the hooks that ran before the pause left (`PendingCall.arguments`:
    a sanitizing hook registered before the approval hook has done its work, once); hooks
    after the pausing one never see it. To send an approved call through the hooks once more
    (they see `ctx.resumed` true, and start from the model's arguments), give
    `skip_hooks=False`: `Decision(True, skip_hooks=False)`. A later call the hooks never saw
    (the batch paused before it) goes through them anyway, as approved and resumed.

    Edited arguments replace the whole argument object (they run as written); with
    `merge=True` they are laid over `PendingCall.arguments` instead (top-level keys replaced
    or added, the others kept; over the model's own with `skip_hooks=False`, as the hooks
    then rewrite them again). Either way the result must fit the tool's schema:
    `Worker.resume` checks it and raises `PauseStateError` to the caller, before anything
    runs, when it does not.

    Attributes:
        allow: Run the call (True) or answer it with an error result (False).
        input: Arguments for an approved call: they replace the model's, or with `merge`
            are laid over `PendingCall.arguments`.
        reason: What the model reads for a denied call.
        skip_hooks: For an approved call: True (the default) runs it without the
            before_tool_call hooks; False passes it through them again.
        merge: Lay `input` over `PendingCall.arguments` instead of replacing them.
    """

    allow: bool
    input: dict[str, Any] | None = None
    reason: str | None = None
    skip_hooks: bool = True
    merge: bool = False

    @classmethod
    def approve(cls, *, input: dict[str, Any] | None = None, merge: bool = False) -> Decision:
        """Run the call, with `input` instead of the model's arguments if given.

        Args:
            input: Arguments that replace the model's (all of them).
            merge: Lay `input` over `PendingCall.arguments` instead of replacing them.
        """
        return cls(True, input, merge=merge)

    @classmethod
    def deny(cls, reason: str = "denied by the user") -> Decision:
        """Do not run the call; the model reads `reason` in an error result."""
        return cls(False, None, reason)


@dataclass(slots=True)
class PauseState:
    """Everything a paused run needs to go on, in a value that round-trips through JSON.

    What it does not hold: the system prompt, the tools, the hooks and the other settings —
    they are the resuming Worker's, so configure it as the one that paused (same system
    prompt, same tools). A state is a value, not a claim on the run: one Worker refuses to
    resume it twice, but a copy resumed by another Worker or process runs its pending calls
    again, side effects included. For a run that must go on exactly once, make it durable
    yourself: mark the saved state as taken (atomically, e.g. in the database transaction
    that loads it) before resuming, or make side-effecting tools idempotent with the call id
    (`ctx.call.id`) as their idempotency key.

    Attributes:
        history: The history at the pause (the assistant message with the calls included).
        pending: The calls of the paused batch, in call order, with what was decided.
        at: `"before_tool_call"` (a batch waits) or `"on_turn_end"` (a final answer waits).
        reason: The reason the pausing hook gave.
        requests: Requests made so far in the run (the bound carries over).
        continuations: on_turn_end continuations so far.
        usage: Token usage of the run so far: the resumed run starts from it, so its
            `RunResult.usage` covers the requests before the pause too.
        tools: The names of the tools the pausing Worker had (`None` when unknown): a resuming
            Worker must have those that pending calls name; a call of a tool outside this
            list was a call of an unknown tool, which gets an error result as in any run.
        response_id: The provider's id of the last answer before the pause, so a stored
            conversation (`previous_response_id`) goes on from it after the resume.
        request_usage: Each request's usage so far, what `RunResult.cost` prices.
        trace_context: The paused run's trace context (W3C `traceparent`, when tracing was
            on), so the resumed run's span links to the paused one, in any process.
        stop_reason: Why the answer waiting at `"on_turn_end"` stopped, and `stop_message`
            the provider's words about it: a refusal resumed is still a refusal
            (`RunResult.refusal`), never an answer checked against the output type.
        output_attempts: Answers so far that did not fit the output type: `output_retries`
            bounds the whole run, pauses included.
        output_call: In tool output mode, at `"on_turn_end"`: the output tool's call with
            the arguments it accepted (as before_tool_call hooks or an edited approval left
            them; the history keeps the model's own), so the resumed run's output is the
            accepted one. `None` otherwise.
        steers: Messages `Worker.steer` queued that the run had not taken in: the resuming
            Worker takes them in before its next request (`Worker.follow_up`'s likewise in
            `follow_ups`, when the resumed run would finish).
        follow_ups: See `steers`.
        children: The paused sub-agent runs, by the id of the call that runs each (that
            call waits, `"allowed"`, without a result): the whole run tree, a state per
            level. `Worker.resume` routes each decision to the run that holds its call and
            resumes each child where it paused; what finished, at any depth, stays done.
        child_runs: The sub-agent runs so far (`RunResult.children`), for the usage.
        tool_calls: Tool calls run so far (a `Limits`' `tool_calls` counts them after a
            resume in another process; 0 in states saved before it was kept).
        context: A `ContextPolicy`'s compaction at the pause (cut, summary, replaced
            messages; JSON data): a resuming Worker sends the request the pausing one would
            (`None`: none, or saved before it was kept — the resumed run compacts afresh).

    A loaded state is trusted as it stands, like a history: its `approved` flags and its
    `"allowed"` statuses let calls run without another pause, and its results are what the
    model is told happened. Keep it where only your application can change it (your own
    store; signed, if it travels through a browser or another party).
    """

    history: list[Message]
    pending: list[PendingCall] = field(default_factory=lambda: [])
    _: KW_ONLY
    at: Literal["before_tool_call", "on_turn_end"] = "before_tool_call"
    reason: str | None = None
    requests: int = 0
    continuations: int = 0
    usage: UsageEvent = field(default_factory=UsageEvent)
    tools: list[str] | None = None
    response_id: str | None = None
    request_usage: list[RequestUsage] = field(default_factory=lambda: [])
    trace_context: dict[str, str] | None = None
    stop_reason: StopReason | None = None
    stop_message: str | None = None
    output_attempts: int = 0
    output_call: ToolCall | None = None
    steers: list[Message] = field(default_factory=lambda: [])
    follow_ups: list[Message] = field(default_factory=lambda: [])
    children: dict[str, PauseState] = field(default_factory=lambda: {})
    child_runs: list[ChildRun] = field(default_factory=lambda: [])
    tool_calls: int = 0
    context: dict[str, Any] | None = None

    def to_json(self) -> str:
        """Serialize to JSON (stable across processes; carries a format version)."""
        return json_bytes(self.to_dict()).decode()  # a model's integer past 64 bits exactly

    def to_dict(self) -> dict[str, Any]:
        """Serialize to plain JSON-ready data."""
        return {
            "version": _STATE_VERSION,
            "history": [m.to_dict() for m in self.history],
            "pending": [pending_to_dict(p) for p in self.pending],
            "at": self.at,
            "reason": self.reason,
            "requests": self.requests,
            "continuations": self.continuations,
            "usage": {k: getattr(self.usage, k) for k in USAGE_FIELDS},
            "tools": self.tools,
            "response_id": self.response_id,
            "request_usage": [r.to_dict() for r in self.request_usage],
            "trace_context": self.trace_context,
            "stop_reason": self.stop_reason,
            "stop_message": self.stop_message,
            "output_attempts": self.output_attempts,
            "output_call": None if self.output_call is None else call_to_dict(self.output_call),
            "steers": [m.to_dict() for m in self.steers],
            "follow_ups": [m.to_dict() for m in self.follow_ups],
            "children": {k: s.to_dict() for k, s in self.children.items()},
            "child_runs": [c.to_dict() for c in self.child_runs],
            "tool_calls": self.tool_calls,
            "context": self.context,
        }

    @classmethod
    def from_json(cls, text: str | bytes) -> PauseState:
        """Load a state saved by `to_json`.

        Raises:
            PauseStateError: Not valid JSON, another format version, or a wrong shape.
        """
        try:
            data = exact_loads(text)
        except ValueError as exc:  # orjson.JSONDecodeError
            raise PauseStateError(f"pause state is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> PauseState:
        """Load a state from `to_dict` output, and check that it holds together.

        Besides its shape, the state must be consistent: the pending calls are exactly the
        unanswered calls of the last assistant message, in order (none when paused at the turn
        end), with results where they are done or skipped, and no message has an empty text;
        an output call is a call of the last assistant message that succeeded.

        Raises:
            PauseStateError: Another format version, a wrong shape, or an inconsistent state
                (the message says what does not hold).
        """
        body = as_dict(data)
        if body.get("version") != _STATE_VERSION:
            raise PauseStateError(
                f"pause state version {body.get('version')!r} is not supported "
                f"(this llm-worker reads version {_STATE_VERSION})"
            )
        at = body.get("at")
        if at not in ("before_tool_call", "on_turn_end"):
            raise PauseStateError(f"pause state has an unknown pause point {at!r}")
        try:
            history = [Message.from_dict(m) for m in as_list(body.get("history"))]
            pending = [_pending(p) for p in as_list(body.get("pending"))]
            queued = [[Message.from_dict(m) for m in as_list(body.get(k))] for k in _QUEUES]
        except (KeyError, TypeError, ValueError) as exc:
            raise PauseStateError(f"pause state is damaged: {exc}") from exc
        usage = as_dict(body.get("usage"))
        tools = body.get("tools")
        state = cls(
            history,
            pending,
            at=at,
            reason=as_str(body.get("reason")),
            requests=as_int(body.get("requests")) or 0,
            continuations=as_int(body.get("continuations")) or 0,
            usage=UsageEvent(*(as_int(usage.get(k)) for k in USAGE_FIELDS)),
            tools=None if tools is None else [str(t) for t in as_list(tools)],
            response_id=as_str(body.get("response_id")),
            # Both absent from states saved by earlier versions: they load without them.
            request_usage=[RequestUsage.from_dict(r) for r in as_list(body.get("request_usage"))],
            trace_context=trace_context_from_dict(body.get("trace_context")),
            stop_reason=stop_reason_from_dict(body.get("stop_reason")),
            stop_message=as_str(body.get("stop_message")),
            output_attempts=max(as_int(body.get("output_attempts")) or 0, 0),
            tool_calls=max(as_int(body.get("tool_calls")) or 0, 0),
            output_call=output_call_from_dict(body.get("output_call")),
            steers=queued[0],
            follow_ups=queued[1],
            children={str(k): cls.from_dict(v) for k, v in as_dict(body.get("children")).items()},
            child_runs=[ChildRun.from_dict(c) for c in as_list(body.get("child_runs"))],
            context=cast("dict[str, Any]", ctx)
            if isinstance(ctx := body.get("context"), dict)
            else None,
        )
        problem = empty_text(history) or pending_mismatch(state) or output_call_mismatch(state)
        if problem:
            raise PauseStateError(f"pause state is inconsistent: {problem}")
        return state


def _pending(data: object) -> PendingCall:
    call, status, result, approved, rewritten = pending_fields(data)
    if status not in _STATUSES:
        raise ValueError(f"unknown call status {status!r}")
    return PendingCall(call, cast("CallStatus", status), result, approved, rewritten)


OutputT = TypeVar("OutputT", default=str)
"""The type of a run's output: `str` without an output type, else the output type."""


@dataclass(slots=True)
class ChildRun:
    """One sub-agent run of a run tree (`RunResult.children`): its own requests only.

    Attributes:
        path: The sub-agent calls from the root to it (a call id per level).
        name: The sub-agent tool's name.
        status: How its run ended.
        usage: Token usage of its own requests (its sub-agents have entries of their own).
        requests: Requests it made.
        request_usage: Each of its own requests' provider, model and usage.
    """

    path: tuple[str, ...]
    name: str
    status: RunStatus
    usage: UsageEvent
    requests: int
    request_usage: list[RequestUsage] = field(default_factory=lambda: [])

    def to_dict(self) -> dict[str, Any]:
        """Serialize to plain JSON-ready data."""
        return {
            "path": list(self.path),
            "name": self.name,
            "status": self.status.value,
            "usage": {k: getattr(self.usage, k) for k in USAGE_FIELDS},
            "requests": self.requests,
            "request_usage": [r.to_dict() for r in self.request_usage],
        }

    @classmethod
    def from_dict(cls, data: object) -> ChildRun:
        """Load one saved by `to_dict`.

        Raises:
            PauseStateError: A wrong shape.
        """
        try:
            body = as_dict(data)
            usage = as_dict(body.get("usage"))
            return cls(
                tuple(str(p) for p in as_list(body.get("path"))),
                str(body["name"]),
                RunStatus(body["status"]),
                UsageEvent(*(as_int(usage.get(k)) for k in USAGE_FIELDS)),
                as_int(body.get("requests")) or 0,
                [RequestUsage.from_dict(r) for r in as_list(body.get("request_usage"))],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PauseStateError(f"pause state has a damaged sub-agent run: {exc}") from exc


@dataclass(slots=True, init=False)
class RunResult(Generic[OutputT]):
    """What `Worker.run` / `Worker.resume` return.

    `output` is typed as the Worker's output type (`RunResult[Invoice].output` is an
    `Invoice`) and is one whenever it can be read: a run that did not finish, or whose model
    refused, has none, and reading `output` then raises `NoOutputError` naming why, rather
    than hand back a `None` the type does not admit. Check `status` first, or read
    `output_or_none` (typed `Invoice | None`).

    Attributes:
        status: How the run ended.
        text: The final assistant text (empty unless FINISHED).
        messages: The messages this run added to the history.
        usage: Token usage summed over the run's requests (retried attempts included). For a
            resumed run, the requests made before the pause are included: the usage of the
            run as a whole, not of the resume alone. Its sub-agents' requests are included
            (`children` breaks them down).
        requests: How many requests the run made (before a pause too, for a resumed run).
        state: When PAUSED, what `Worker.resume` needs.
        reason: Why the run was paused or cancelled, if a reason was given.
        stop_reason: Why the last answer stopped (`MAX_TOKENS` means the final text was cut;
            `CONTENT_FILTER` / `REFUSAL` that the provider held it back).
        response_ids: The provider's ids of this run's answers, in order (where the provider
            gives them): what support requests and `previous_response_id` name.
        refusal: The model's refusal (its text, or the reason the provider gave) when it
            declined to answer; the run has no `output` then.
        request_usage: Each request's provider, model and usage, in order (before a pause
            too, for a resumed run): what `cost` prices, request by request. An attempt
            whose stream broke and was retried has its own entry when it reported usage
            (its tokens are billed too). Sub-agents' requests are listed too, after the
            request that called them.
        children: The sub-agent runs of the tree below this run, each with its own usage
            (`usage` totals this run's own requests and theirs).
            (its tokens are billed too). Each entry's `cache_read_tokens` and
            `cache_write_tokens` are that request's prompt-cache reads and writes.
        cache_misses: The requests of this run (since the resume, for a resumed one) that
            did not start as the previous request of the conversation did: where each
            parted from it (`CacheMiss`).
        soft_limit: The `Limits` limit whose `soft` fraction was reached (the model was told
            to finish without tools), else None.
    """

    status: RunStatus
    text: str
    messages: list[Message]
    usage: UsageEvent
    requests: int
    state: PauseState | None
    reason: str | None
    stop_reason: StopReason | None
    response_ids: list[str]
    _output: OutputT | None
    refusal: str | None
    request_usage: list[RequestUsage]
    children: list[ChildRun]
    cache_misses: list[CacheMiss]
    soft_limit: str | None

    def __init__(
        self,
        status: RunStatus,
        *,
        text: str = "",
        messages: list[Message] | None = None,
        usage: UsageEvent | None = None,
        requests: int = 0,
        state: PauseState | None = None,
        reason: str | None = None,
        stop_reason: StopReason | None = None,
        response_ids: list[str] | None = None,
        output: OutputT | None = None,
        refusal: str | None = None,
        request_usage: list[RequestUsage] | None = None,
        children: list[ChildRun] | None = None,
        soft_limit: str | None = None,
        _output: OutputT | None = None,
        cache_misses: list[CacheMiss] | None = None,
    ) -> None:
        # Written out (not the dataclass's) so that `output=` sets what the property reads.
        # `_output`: the stored field by its own name, which `dataclasses.replace` passes on
        # (it raised TypeError without it); `output=` wins when given.
        if output is None:
            output = _output
        self.status = status
        self.text = text
        self.messages = [] if messages is None else messages
        self.usage = UsageEvent() if usage is None else usage
        self.requests = requests
        self.state = state
        self.reason = reason
        self.stop_reason = stop_reason
        self.response_ids = [] if response_ids is None else response_ids
        self._output = output
        self.refusal = refusal
        self.request_usage = [] if request_usage is None else request_usage
        self.children = [] if children is None else children
        self.cache_misses = [] if cache_misses is None else cache_misses
        self.soft_limit = soft_limit

    @property
    def has_output(self) -> bool:
        """Whether the run has an output: it FINISHED and the model did not refuse."""
        return self.status is RunStatus.FINISHED and self.refusal is None

    @property
    def output(self) -> OutputT:
        """The validated output, of the Worker's `output_type` (the final text without one).

        An `Invoice` for a `RunResult[Invoice]`, a `str` for a `RunResult[str]`.

        Raises:
            NoOutputError: The run has none: it was paused or cancelled, or the model
                refused (`refusal`). `output_or_none` gives `None` instead.
        """
        if not self.has_output:
            raise _no_output(self.status, self.refusal is not None)
        return cast(OutputT, self._output)  # as the run set it; None only if T admits it

    @output.setter
    def output(self, value: OutputT | None) -> None:
        self._output = value

    @property
    def output_or_none(self) -> OutputT | None:
        """The validated output, or `None` when the run has none (see `output`)."""
        return self._output if self.has_output else None

    @property
    def cache_hit_rate(self) -> float | None:
        """The share of the run's input tokens read from the prompt cache (0.0 to 1.0).

        Over the requests of `request_usage` that reported their input tokens; None when
        none did.
        """
        return cache_hit_rate(self.request_usage)

    @property
    def cost(self) -> Decimal | None:
        """The run's estimated price in US dollars: the sum of `request_usage` costs.

        None when any request's model has no known price (never a partial sum); 0 for a run
        that made no request. Needs the `llm-worker[cost]` extra (`genai-prices`).

        Raises:
            MissingExtraError: `genai-prices` is not installed.
        """
        return total_cost(self.request_usage)


def _no_output(status: RunStatus, refused: bool) -> NoOutputError:
    if refused:
        why = "the model refused to answer (its refusal is in `result.refusal`)"
    elif status is RunStatus.PAUSED:
        why = "the run was paused (resume it with `result.state`)"
    else:
        why = f"the run was {status.value}"
    return NoOutputError(
        f"the run has no output: {why}; check `result.status` first, or read "
        "`result.output_or_none`",
        status=status.value,
        refused=refused,
    )
