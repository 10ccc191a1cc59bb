"""Guardrails with tripwires: checks of a run's input and output that can stop it.

```python
@input_guardrail
async def on_topic(ctx: InputGuardrailContext) -> Trip | None:
    if await classifier.is_off_topic(ctx.text):
        return Trip("off-topic request")
    return None

worker = Worker(client, tools=[...], guardrails=[on_topic, output_guardrail(no_secrets, hold=200)])
```

An **input guardrail** checks what a run was given. It runs concurrently with the run's first
request, so a passing check costs no latency; while one is pending, no tool whose effect is
not `read_only` starts (early start included), the second request is not sent and the run does
not end. When it trips, the run is cancelled (the answer streaming is aborted, read-only tools
started early are stopped, on_abort hooks run) and `GuardrailTripped` is raised with a history
that can be sent again.

An **output guardrail** checks the final answer (its text, and the structured output with
`output_type`) before the run finishes. With `hold=n`, the text that `Worker.stream()` readers
and the web adapters receive is held back: every `n` characters the guardrail checks the
answer so far (`ctx.final` is False) and releases what passed but its last `n` characters,
held until the next check (the block's end releases the rest): a refused string up to `n`
characters long is never shown, not even its start. When it trips, the held text is never
shown (its block is aborted).

A check that hangs holds the run (an input check: its tools with effects wait for it); give it
a `timeout=` and it fails closed past it, as a check that raises does (`HookError`).
Handlers on the Timeline (`on_text_block`) see the model's text as it comes.

A guardrail is a function (sync, run in a worker thread, or async) of its context that returns
`Trip(reason)` to trip or `None` to pass. Each check is a `GuardrailChecked` event of
`Worker.stream()`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar, overload

from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message

__all__ = (
    "Guardrail",
    "GuardrailChecked",
    "GuardrailKind",
    "InputGuardrailContext",
    "OutputGuardrailContext",
    "Trip",
    "input_guardrail",
    "output_guardrail",
)

GuardrailKind: TypeAlias = Literal["input", "output"]
"""Which side of the run a guardrail checks."""

C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class Trip:
    """A guardrail's verdict that the run must stop.

    Attributes:
        reason: Why, for a person (it is `GuardrailTripped.reason`, and what a web front end
            shows).
        info: Anything the application wants to keep about the verdict (scores, categories);
            on `GuardrailTripped.info`, never sent anywhere.
    """

    reason: str
    info: Any = None


@dataclass(frozen=True, slots=True)
class InputGuardrailContext:
    """What an input guardrail checks.

    Attributes:
        messages: The run's input: the messages `run()` appended to the history.
        history: The whole history as the first request sends it (read it, do not change it).
    """

    messages: Sequence[Message]
    history: Sequence[Message]

    @property
    def text(self) -> str:
        """The text of the input messages, joined by blank lines."""
        return "\n\n".join(m.text for m in self.messages if m.text)


@dataclass(frozen=True, slots=True)
class OutputGuardrailContext:
    """What an output guardrail checks.

    Attributes:
        text: The answer's text: the final answer's, or (with `hold`, `final` False) the
            text of the answer streamed so far.
        output: The final output (`RunResult.output`: the text, or the structured value with
            `output_type`); `None` while `final` is False.
        final: True for the final answer, before the run finishes; False for a held window.
        history: The history so far (read it, do not change it).
    """

    text: str
    output: Any
    final: bool
    history: Sequence[Message]


GuardrailResult: TypeAlias = "Trip | None"


@dataclass(frozen=True, slots=True)
class Guardrail:
    """A check of a run's input or output; made by `input_guardrail` / `output_guardrail`.

    Attributes:
        kind: `"input"` or `"output"`.
        name: A name for the check (the function's), in events and errors.
        hold: Output guardrails: characters of streamed text held back between checks
            (`None`: the text streams at once, and only the final answer is checked).
        timeout: Seconds a check may take; past them it fails closed (`HookError`), as a
            check that raised does (`None`: no limit).
    """

    kind: GuardrailKind
    name: str
    check: Callable[[Any], Awaitable[Trip | None]] = field(repr=False)
    hold: int | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.hold is not None and (isinstance(self.hold, bool) or self.hold < 1):
            raise ConfigurationError(
                f"guardrail {self.name!r}: hold={self.hold!r} is not a positive number of "
                "characters"
            )
        _check_timeout(self.name, self.timeout)


@dataclass(frozen=True, slots=True)
class GuardrailChecked:
    """A guardrail checked the run (an event of `Worker.stream()`).

    Attributes:
        guardrail: The guardrail's name.
        kind: `"input"` or `"output"`.
        tripped: It tripped: the run ends with `GuardrailTripped`.
        reason: The trip's reason (`None` when it passed).
        final: For an output guardrail, whether it checked the final answer (else a held
            window of streamed text); always True for an input guardrail.
    """

    guardrail: str
    kind: GuardrailKind
    tripped: bool
    reason: str | None = None
    final: bool = True
    path: tuple[str, ...] = field(default=(), kw_only=True, repr=False)
    """The sub-agent calls this event came through, from the root run (`()`: the root's own)."""


InputCheck: TypeAlias = Callable[[InputGuardrailContext], "Awaitable[Trip | None] | Trip | None"]
OutputCheck: TypeAlias = Callable[[OutputGuardrailContext], "Awaitable[Trip | None] | Trip | None"]


@overload
def input_guardrail(
    fn: InputCheck, /, *, name: str | None = None, timeout: float | None = None
) -> Guardrail: ...
@overload
def input_guardrail(
    fn: None = None, /, *, name: str | None = None, timeout: float | None = None
) -> Callable[[InputCheck], Guardrail]: ...
def input_guardrail(
    fn: InputCheck | None = None, /, *, name: str | None = None, timeout: float | None = None
) -> Guardrail | Callable[[InputCheck], Guardrail]:
    """Make an input guardrail of `fn(ctx: InputGuardrailContext) -> Trip | None`.

    Use it as `@input_guardrail`, `@input_guardrail(name=...)` or `input_guardrail(fn)`.
    A sync function runs in a worker thread (a cancelled run does not wait for it).
    With `timeout`, a check that gives no verdict in time fails closed (`HookError`): while
    it is pending no tool with an effect starts, so a hung check would hold the run forever.

    Raises:
        ConfigurationError: `timeout` is not a positive number of seconds.
    """

    def make(f: InputCheck) -> Guardrail:
        return Guardrail("input", name or _name(f), _checker(f, timeout), timeout=timeout)

    return make if fn is None else make(fn)


@overload
def output_guardrail(
    fn: OutputCheck,
    /,
    *,
    name: str | None = None,
    hold: int | None = None,
    timeout: float | None = None,
) -> Guardrail: ...
@overload
def output_guardrail(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    hold: int | None = None,
    timeout: float | None = None,
) -> Callable[[OutputCheck], Guardrail]: ...
def output_guardrail(
    fn: OutputCheck | None = None,
    /,
    *,
    name: str | None = None,
    hold: int | None = None,
    timeout: float | None = None,
) -> Guardrail | Callable[[OutputCheck], Guardrail]:
    """Make an output guardrail of `fn(ctx: OutputGuardrailContext) -> Trip | None`.

    Args:
        fn: The check (sync, run in a worker thread, or async).
        name: A name for it; default: the function's.
        hold: Hold streamed text back, checking the answer so far every `hold` characters
            and releasing only what passed (see the module docstring).
        timeout: Seconds each check may take; past them it fails closed (`HookError`).

    Raises:
        ConfigurationError: `hold` is not a positive number, or `timeout` not a positive
            number of seconds.
    """

    def make(f: OutputCheck) -> Guardrail:
        return Guardrail("output", name or _name(f), _checker(f, timeout), hold, timeout)

    return make if fn is None else make(fn)


def _name(fn: object) -> str:
    return str(getattr(fn, "__name__", None) or type(fn).__name__)


def _check_timeout(name: str, timeout: object) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(
            f"guardrail {name!r}: timeout={timeout!r} is not a positive number of seconds"
        )


def _checker(
    fn: Callable[[C], Any], timeout: float | None = None
) -> Callable[[C], Awaitable[Trip | None]]:
    _check_timeout(_name(fn), timeout)
    if not callable(fn):
        raise ConfigurationError(f"a guardrail takes a function of its context, not {fn!r}")
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004  # an object with an async __call__
    )

    async def check(ctx: C) -> Trip | None:
        import anyio  # `import llm_worker.state` stays light

        if timeout is None:
            return await verdict_of(ctx)
        with anyio.move_on_after(timeout):
            return await verdict_of(ctx)
        raise TimeoutError(f"no verdict within its timeout of {timeout} s")

    async def verdict_of(ctx: C) -> Trip | None:
        import anyio.to_thread

        if is_async:
            verdict = await fn(ctx)
        else:
            # A cancelled run does not wait for a check stuck in its thread: the verdict
            # is moot, and the thread's late answer is dropped.
            verdict = await anyio.to_thread.run_sync(
                functools.partial(fn, ctx), abandon_on_cancel=True
            )
            if inspect.isawaitable(verdict):
                verdict = await verdict
        return _verdict(verdict, fn)

    return check


def _verdict(verdict: object, fn: object) -> Trip | None:
    if verdict is None or isinstance(verdict, Trip):
        return verdict
    raise TypeError(f"guardrail {_name(fn)} returned {verdict!r}: return Trip(reason) or None")
