"""Structured output: the Worker's `output_type`, asked for, checked and retried.

`OutputPlan` turns an output type (a pydantic model, a dataclass, a TypedDict, a `list[...]` or
union of them, or a JSON Schema dict) into what a request asks for and into a validator:

- `native` mode: the request's `output_schema`; the answer's text is the JSON;
- `tool` mode: a final tool whose arguments are the output (for servers without native
  structured output); the run ends when a call of it validates.

A type whose schema is not an object at the root (a list, a union, a scalar) is wrapped as
`{"result": ...}`, the only form OpenAI and Anthropic take, and unwrapped before validation.
Strict-mode schemas turn optional fields into nullable ones; the `null`s that come back are
dropped before validation, so a field takes its default.

pydantic is imported when a Worker with an output type is made, never by `import llm_worker`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from llm_worker._json import as_dict, as_list
from llm_worker._strict import drop_optional_nulls, strict_schema
from llm_worker._wide_json import exact_loads, json_bytes
from llm_worker.errors import (
    ConfigurationError,
    OutputValidationError,
    PauseStateError,
    ToolError,
)
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    Event,
    InputJsonDelta,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    ToolUseMetadata,
)
from llm_worker.messages import Message, OutputSchema
from llm_worker.state import OutputPartial, OutputRejected
from llm_worker.tools import ToolMeta
from llm_worker.tools._messages import MAX_ERRORS, excerpt
from llm_worker.tools._tool import MetaTool
from llm_worker.worker._schema_check import schema_problems

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

    from llm_worker.collectors import ToolCall
    from llm_worker.state import PendingCall

__all__ = (
    "PARTIAL_INTERVAL",
    "OutputMode",
    "OutputPlan",
    "OutputTool",
    "PartialFeed",
    "Rejected",
    "answer_output",
    "called_output",
    "check_output_call",
    "give_up",
    "output_plan",
    "rejected_call",
    "rejection",
)

OutputMode = Literal["native", "tool"]
"""How the output is asked for: the provider's structured output, or a final tool."""

PARTIAL_INTERVAL = 0.05
"""Seconds between two `OutputPartial`s of an answer, after its first (the default)."""

_WRAP = "result"
_PRUNES = 4  # unfinished tails cut from a partial output before giving up until more arrives
_MAX_RAW = 200


@dataclass(slots=True)
class Rejected(Exception):
    """An answer that does not fit the output type, and why (one line per problem).

    `told`: what the model already read about it (the output tool's error result), if so.
    """

    raw: str
    errors: list[str]
    told: str | None = None


class OutputPlan:
    """How a Worker asks for its output type and checks the answers."""

    __slots__ = (
        "_adapter",
        "_inner",
        "mode",
        "partial_interval",
        "retries",
        "schema",
        "tool",
        "wrapped",
    )

    def __init__(
        self,
        output_type: Any,
        mode: OutputMode,
        retries: int,
        tool_name: str,
        *,
        partial_interval: float = PARTIAL_INTERVAL,
    ) -> None:
        if mode not in ("native", "tool"):
            raise ConfigurationError(f"output_mode must be 'native' or 'tool', not {mode!r}")
        if retries < 0:
            raise ConfigurationError("output_retries must be >= 0")
        if not (math.isfinite(partial_interval) and partial_interval >= 0):
            raise ConfigurationError("output_partial_interval must be a finite number >= 0")
        self.mode: OutputMode = mode
        self.retries = retries
        self.partial_interval = partial_interval
        self._adapter: TypeAdapter[Any] | None = None
        schema = as_dict(output_type)
        if schema:
            inner: dict[str, Any] = dict(schema)
            name = str(inner.get("title") or "output")
        else:
            self._adapter, inner = _adapter(output_type)
            name = getattr(output_type, "__name__", None) or "output"
        self._inner = inner
        self.wrapped = inner.get("type") != "object"
        description = inner.get("description")
        self.schema = OutputSchema(
            _wrap(inner) if self.wrapped else inner,
            name=_tool_name(name),
            description=description if isinstance(description, str) else None,
        )
        self.tool = OutputTool(self, tool_name) if mode == "tool" else None

    def check(self, raw: str) -> Any:
        """The validated output of an answer's JSON text.

        Raises:
            Rejected: The text is not JSON, or does not fit the output type.
        """
        try:
            value = exact_loads(raw)  # an integer past 64 bits with its digits
        except orjson.JSONDecodeError as exc:
            raise Rejected(raw, [f"not valid JSON: {exc}"]) from None
        if self.wrapped:
            wrapper = as_dict(value)
            if _WRAP not in wrapper:
                raise Rejected(raw, [f"{_WRAP}: required, but missing"])
            value = wrapper[_WRAP]
        drop_optional_nulls(value, self._inner)
        if self._adapter is None:
            problems = schema_problems(value, self._inner)
            if problems:
                raise Rejected(raw, problems)
            return value
        from pydantic import ValidationError

        try:
            return self._adapter.validate_python(value)
        except ValidationError as exc:
            raise Rejected(raw, _problems(exc)) from None

    def dump(self, output: Any) -> Any:
        """A validated output as JSON data, which `load` turns back into the same value.

        `None` when the output type cannot write it as JSON (a custom serializer that fails).
        """
        if self._adapter is None:
            return output
        try:  # as validation reads it back: aliases, no computed fields, Json[...] as text
            return self._adapter.dump_python(output, mode="json", by_alias=True, round_trip=True)
        except (TypeError, ValueError):  # pydantic's serialization error is a ValueError
            return None

    def load(self, data: Any) -> Any:
        """The output `dump` gave as JSON data, validated again.

        Raises:
            Rejected: The data does not fit the output type (it changed since the dump).
        """
        if self._adapter is None:
            return data
        from pydantic import ValidationError

        try:
            return self._adapter.validate_python(data)
        except ValidationError as exc:
            raise Rejected(excerpt(repr(data), _MAX_RAW), _problems(exc)) from None

    def partial(self, raw: str) -> Any:
        """The output validated from incomplete JSON text, or `None` when nothing fits yet.

        An unfinished string counts as far as it goes. pydantic leaves out an unfinished last
        item of a list or dict; for models and dataclasses, which it cannot validate in part,
        the unfinished tail is cut (at most `_PRUNES` times) until the rest validates.
        """
        from pydantic import ValidationError
        from pydantic_core import from_json

        try:
            value = from_json(raw, allow_partial="trailing-strings")
        except (ValueError, TypeError):  # TypeError: a lone surrogate (not UTF-8) in the text
            return None
        if self.wrapped:
            value = as_dict(value).get(_WRAP)
        if value is None or self._adapter is None:
            return value
        for _ in range(_PRUNES):
            try:
                return self._adapter.validate_python(
                    value, experimental_allow_partial="trailing-strings"
                )
            except ValidationError:
                if not _cut_tail(value):
                    return None
        return None

    def feedback(self, rejected: Rejected) -> Message:
        """The user message that sends an invalid answer's problems back to the model."""
        how = (
            f"call the tool {self.tool.name!r} again with corrected arguments"
            if self.tool is not None
            else "answer again with only JSON that matches the required schema"
        )
        lines = [f"Your answer does not match the required output ({how}):"]
        lines.extend(f"- {line}" for line in rejected.errors[:MAX_ERRORS])
        if len(rejected.errors) > MAX_ERRORS:
            lines.append(f"- and {len(rejected.errors) - MAX_ERRORS} more")
        return Message.user("\n".join(lines))

    def missing_call(self) -> Rejected:
        """An answer in tool mode that never called the output tool."""
        name = self.tool.name if self.tool is not None else "the output tool"
        return Rejected("", [f"no call of {name!r}: give your final answer by calling it"])


class OutputTool(MetaTool):
    """Tool mode's final tool: its arguments are the output, checked when it is called."""

    __slots__ = ("meta", "plan")

    def __init__(self, plan: OutputPlan, name: str) -> None:
        self.plan = plan
        schema = plan.schema.schema
        try:
            schema, strict = strict_schema(schema, name, kind="output"), True
        except ConfigurationError:
            strict = False
        self.meta = ToolMeta(
            name,
            "Give your final answer: call this tool once, with the answer as its arguments.",
            schema,
            effect="read_only",
            strict=strict,
        )

    async def execute(self, input_json: str) -> str:
        """Check the arguments; the model reads the problems when they do not fit.

        Raises:
            ToolError: The arguments are not a valid output.
        """
        try:
            self.plan.check(input_json)
        except Rejected as rejected:
            raise ToolError(self.plan.feedback(rejected).text) from None
        return "The final answer was accepted."


def _adapter(output_type: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    from pydantic import PydanticUserError, TypeAdapter

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        return adapter, adapter.json_schema()
    except (PydanticUserError, TypeError) as exc:
        raise ConfigurationError(
            f"output_type {output_type!r} cannot be described as JSON Schema: {exc}; use a "
            "pydantic model, a dataclass, a TypedDict, a list or union of them, or a schema dict"
        ) from exc


def _cut_tail(value: Any) -> bool:
    """Remove the last entry of the innermost unfinished container; False when none is left."""
    node: dict[str, Any] | list[Any] = as_dict(value) or as_list(value)
    while node:
        last: Any = node[next(reversed(node))] if isinstance(node, dict) else node[-1]
        child: dict[str, Any] | list[Any] = as_dict(last) or as_list(last)
        if not child:
            break
        node = child
    if isinstance(node, dict) and node:
        node.popitem()
        return True
    if isinstance(node, list) and node:
        node.pop()
        return True
    return False


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {_WRAP: inner},
        "required": [_WRAP],
    }
    if defs is not None:
        wrapper["$defs"] = defs  # `#/$defs/...` references resolve from the root
    return wrapper


def _tool_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return cleaned or "output"


def _problems(exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(the value)"
        if error["type"] == "missing":
            lines.append(f"{where}: required, but missing")
        else:
            got = excerpt(repr(error.get("input")), _MAX_RAW)
            lines.append(f"{where}: {error['msg']} (got {got})")
    return lines


def output_plan(
    output_type: Any,
    mode: OutputMode,
    retries: int,
    tool: str,
    partial_interval: float = PARTIAL_INTERVAL,
) -> OutputPlan | None:
    """The Worker's output plan, or `None` without an output type (free text).

    Raises:
        ConfigurationError: An unknown mode, negative retries, a type pydantic cannot
            describe, (tool mode) a tool name providers reject, or a partial interval that
            is negative or not finite.
    """
    if output_type is None:
        return None
    return OutputPlan(output_type, mode, retries, tool, partial_interval=partial_interval)


def answer_output(plan: OutputPlan, response: Message, accepted: ToolCall | None = None) -> Any:
    """The validated output of a final answer: its text, or its call of the output tool.

    `accepted`: the output tool's call with the arguments it accepted, as before_tool_call
    hooks or an edited approval left them (the history keeps the model's own), when the run
    knows them.

    Raises:
        Rejected: The answer does not fit (or, in tool mode, never called the tool).
    """
    if plan.tool is None:
        return plan.check(response.text)
    if accepted is not None:
        return plan.check(json_bytes(accepted.input).decode())
    calls = [part for part in response.tool_uses if part.name == plan.tool.name]
    if not calls:
        raise plan.missing_call()
    return plan.check(json_bytes(calls[-1].input).decode())


def check_output_call(plan: OutputPlan | None, call: ToolCall | None) -> None:
    """Refuse a pause state's accepted output call that this Worker's output tool did not make.

    Raises:
        PauseStateError: The state holds an output call, and this Worker has no output tool
            of that name (it was configured otherwise than the Worker that paused).
    """
    if call is None:
        return
    tool = plan.tool if plan is not None else None
    if tool is None or tool.name != call.name:
        has = f"its output tool is {tool.name!r}" if tool is not None else "it has no output tool"
        raise PauseStateError(
            f"the pause state holds an accepted call of the output tool {call.name!r}, but "
            f"{has}: resume it with a Worker configured as the one that paused "
            "(same output_type, output_mode='tool')"
        )


def called_output(plan: OutputPlan, pending: list[PendingCall]) -> PendingCall | None:
    """The last call of the output tool in a batch, if the model made one."""
    tool = plan.tool
    calls = [p for p in pending if tool is not None and p.call.name == tool.name]
    return calls[-1] if calls else None


def rejected_call(plan: OutputPlan, call: PendingCall) -> Rejected:
    """A call of the output tool whose arguments did not fit, as a rejection.

    Its errors are the problems of its arguments, one a line, as the tool found them; the
    model read them in the call's error result. A call refused for another reason (a hook
    denied it, arguments that are not JSON) has that result's text as its one error.
    """
    raw = call.call.raw_input or json_bytes(call.call.input).decode()
    told = call.result.content if call.result is not None else "the call was not run"
    if call.call.error is not None:  # its arguments were not a JSON object: nothing to check
        return Rejected(raw, [told], told)
    try:
        plan.check(json_bytes(call.call.input).decode())
    except Rejected as rejected:
        return Rejected(raw, rejected.errors, told)
    return Rejected(raw, [told], told)


def rejection(
    plan: OutputPlan, rejected: Rejected, attempts: int, note: Message | None
) -> OutputRejected:
    """The stream's event for the `attempts`-th answer that did not fit.

    `note`: the feedback message the model is sent, if it is sent one (else it was told by
    the output tool's error result).
    """
    message = note.text if note is not None else rejected.told or plan.feedback(rejected).text
    left = max(0, plan.retries + 1 - attempts)
    return OutputRejected(list(rejected.errors), message, attempts, left)


def give_up(plan: OutputPlan, rejected: Rejected, attempts: int) -> OutputValidationError:
    """The error that ends a run whose answers never fit, after `attempts` answers."""
    shown = "; ".join(rejected.errors[:3])
    return OutputValidationError(
        f"the model's answer did not match the output type after {attempts} attempt"
        f"{'' if attempts == 1 else 's'} (output_retries={plan.retries}): {shown}",
        raw=rejected.raw,
        errors=list(rejected.errors),
        attempts=attempts,
    )


class PartialFeed:
    """Watches one answer's events and sends an `OutputPartial` as its JSON grows.

    Early, then debounced: until a first partial is sent, the JSON so far is validated each
    time it has grown by an eighth (`>> first_shift`), so the first partial comes as soon
    as what arrived fits; after it, at most once every `interval` seconds of `clock`, and
    once more when its block stops. Each validation reads the whole text, so a try also
    waits for the text to grow by a sixty-fourth (`>> shift`): the total work stays a
    bounded multiple of the answer's size however small its deltas and however short the
    interval (0 tries on every delta that adds that much). With an interval, a try that took
    long waits `cost_factor` times its own time before the next (a multi-megabyte answer's
    tries would otherwise take most of the run's CPU and stall the event loop back to back).
    """

    first_shift = 3
    shift = 6
    cost_factor = 4

    __slots__ = (
        "_block",
        "_checked",
        "_last",
        "_next",
        "_parts",
        "_sent",
        "_size",
        "clock",
        "interval",
        "plan",
        "send",
    )

    def __init__(
        self,
        plan: OutputPlan,
        send: Callable[[OutputPartial[Any]], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = plan
        self.send = send
        self.interval = plan.partial_interval
        self.clock = clock
        self._parts: list[str] = []
        self._size = 0
        self._checked = 0
        self._last: Any = None
        self._sent = False
        self._next = 0.0  # no try before this time, once a partial was sent
        # The block whose deltas are the output: any text block in native mode (-1), the
        # output tool's call in tool mode (None until it starts).
        self._block: int | None = -1 if plan.tool is None else None

    def feed(self, event: Event) -> None:
        """Take one event of the answer."""
        if type(event) is BlockDelta:
            delta = event.delta
            if self._block == -1 and type(delta) is TextDelta:
                self._grow(delta.text)
            elif event.index == self._block and type(delta) is InputJsonDelta:
                self._grow(delta.partial_json)
        elif type(event) is BlockStart:
            tool = self.plan.tool
            metadata = event.metadata
            if isinstance(metadata, ToolUseMetadata) and tool and metadata.name == tool.name:
                self._block = event.index
        elif type(event) is BlockStop and self._size > self._checked:
            self._check()
        elif type(event) is StatusEvent and event.status is ResponseStatus.STARTED:
            self._restart()  # a fallback client's next client answers from scratch

    def _restart(self) -> None:
        self._parts = []
        self._size = self._checked = 0
        self._last = None
        self._sent = False
        self._next = 0.0
        self._block = -1 if self.plan.tool is None else None

    def _grow(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        grown = self._size - self._checked
        if not self._sent:
            if grown >= max(1, self._checked >> self.first_shift):
                self._check()
        elif grown >= max(1, self._checked >> self.shift) and self.clock() >= self._next:
            self._check()

    def _check(self) -> None:
        start = self.clock()
        text = "".join(self._parts)
        self._parts = [text]
        self._checked = self._size
        value = self.plan.partial(text)
        if value is not None and value != self._last:
            self._last = value
            self._sent = True
            self.send(OutputPartial(value, self._size))
        if self._sent:
            now = self.clock()
            took = max(0.0, now - start) * self.cost_factor if self.interval else 0.0
            self._next = now + max(self.interval, took)
