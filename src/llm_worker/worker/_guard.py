"""Guardrails at run time: the input gate beside the first request, output checks, held text.

`InputGate` runs a fresh run's input guardrails concurrently with its first request. Until it
has passed, `wait()` blocks whoever must not go on: a tool whose effect is not read-only (the
one choke point every call passes, `Batch._execute_one`, early start included), the second
request, and the end of the run. A trip cancels the run's scope *before* it wakes the waiters,
so a waiter never sees a tripped gate as open.

`Holder` stands between one answer's events and the run's readers when an output guardrail has
`hold=`: from a text block's start it keeps every event back, and releases what the guardrails
passed each time `hold` characters gathered and at the block's end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

from llm_worker.errors import ConfigurationError, GuardrailTripped, HookError
from llm_worker.events import BlockAbort, BlockDelta, BlockStart, BlockStop, BlockType, TextDelta
from llm_worker.guardrails import (
    Guardrail,
    GuardrailChecked,
    InputGuardrailContext,
    OutputGuardrailContext,
    Trip,
)
from llm_worker.messages import Message
from llm_worker.worker._groups import unwrapped_group
from llm_worker.worker._tree import current_node

if TYPE_CHECKING:
    from llm_worker.state import RunResult
    from llm_worker.worker._turn import Run

__all__ = (
    "Holder",
    "InputGate",
    "check_output",
    "checked_guardrails",
    "guarded_run",
    "input_gate_open",
)

Sink = Callable[[Any], None]


def checked_guardrails(guardrails: Iterable[Guardrail]) -> list[Guardrail]:
    """`Worker(guardrails=...)`, each checked to be a `Guardrail`.

    Raises:
        ConfigurationError: Something else (a bare function: wrap it first).
    """
    listed: list[object] = list(guardrails)
    for each in listed:
        if not isinstance(each, Guardrail):
            raise ConfigurationError(
                f"guardrails= takes input_guardrail(fn) / output_guardrail(fn), not {each!r}"
            )
    return cast("list[Guardrail]", listed)


class InputGate:
    """The input guardrails of one run, checked beside its first request."""

    __slots__ = ("done", "error", "passed", "scope", "trip")

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope  # the run's work: cancelled when a guardrail trips or fails
        self.done = anyio.Event()
        self.trip: GuardrailTripped | None = None
        self.error: HookError | None = None
        self.passed = 0

    @property
    def pending(self) -> bool:
        """The guardrails have not all passed yet."""
        return not self.done.is_set()

    async def wait(self) -> None:
        """Return once every input guardrail passed; never, when one tripped (cancelled)."""
        await self.done.wait()
        if self.trip is not None or self.error is not None:
            # The scope was cancelled before `done` was set: this only makes it certain.
            await anyio.sleep_forever()

    async def check(
        self, guardrails: Sequence[Guardrail], ctx: InputGuardrailContext, sinks: list[Sink]
    ) -> None:
        """Run the guardrails concurrently; the first trip (or failure) stops the others."""
        try:
            async with anyio.create_task_group() as group:
                for guardrail in guardrails:
                    group.start_soon(self._one, guardrail, ctx, sinks, group.cancel_scope)
        finally:
            if self.trip is None and self.error is None and self.passed < len(guardrails):
                # A check that ended without a verdict (a CancelledError of its own, which the
                # task group swallows; or the run's cancel) did not pass: fail closed.
                self.error = HookError(
                    "an input guardrail ended without a verdict (cancelled)",
                    hook="input_guardrail",
                    kind="input_guardrail",
                )
                self.scope.cancel()
            self.done.set()

    async def _one(
        self,
        guardrail: Guardrail,
        ctx: InputGuardrailContext,
        sinks: list[Sink],
        others: anyio.CancelScope,
    ) -> None:
        try:
            trip = await guardrail.check(ctx)
        except Exception as exc:  # fail closed: a check that could not run did not pass
            self.error = _failed(guardrail, exc)
            self.scope.cancel()
            others.cancel()
            return
        _send(sinks, _event(guardrail, trip, final=True))
        if trip is None:
            self.passed += 1
        elif self.trip is None:
            self.trip = _tripped(guardrail, trip)
            self.scope.cancel()  # before `done` is set: see the module docstring
            others.cancel()


async def input_gate_open(run: Run, *, read_only: bool) -> None:
    """Wait for the run's input guardrails, unless what waits is read-only (or none pend).

    A sub-agent's run waits for its ancestors' too: the tool that launched it may be read-only
    (as declared, or its Worker had no tools yet when `as_tool` was called), and a child's
    side effect is the parent's as much as its own.
    """
    if read_only:
        return
    gates = [run.gate]
    node = current_node()
    while node is not None:
        gates.append(node.run.gate)
        node = node.parent
    for gate in gates:
        if gate is not None and gate.pending:
            await gate.wait()


async def guarded_run(
    run: Run, guardrails: Sequence[Guardrail], body: Callable[[], Awaitable[RunResult[Any]]]
) -> RunResult[Any]:
    """Run `body` (the run's loop) beside its input guardrails; their trip ends it.

    Raises:
        GuardrailTripped: An input guardrail tripped (after the run's clean-up).
        HookError: An input guardrail raised.
    """
    ctx = InputGuardrailContext(run.history[run.start :], list(run.history))
    result: RunResult[Any] | None = None
    scope = anyio.CancelScope()
    gate = run.gate = InputGate(scope)
    with scope:
        async with unwrapped_group() as group:
            group.start_soon(gate.check, guardrails, ctx, run.cfg.sinks)
            try:
                result = await body()
                await gate.wait()  # the run does not end before its input passed
            finally:
                group.cancel_scope.cancel()  # an error of the run: the checks are moot
    run.gate = None
    if gate.error is not None:
        raise gate.error  # the Worker cleans up after a failure
    if gate.trip is not None:
        await run.cleanup(gate.trip.reason, "aborted", gate.trip)
        raise gate.trip
    assert result is not None  # the scope is cancelled only by a trip or a failure
    return result


async def check_inputs(run: Run, messages: list[Message]) -> None:
    """Later input (steers, follow-ups) through the input guardrails, in order.

    Raises:
        GuardrailTripped: One tripped (after the run's clean-up).
        HookError: One raised.
    """
    ctx = InputGuardrailContext(messages, [*run.history, *messages])
    for guardrail in run.cfg.guardrails:
        if guardrail.kind != "input":
            continue
        try:
            trip = await guardrail.check(ctx)
        except Exception as exc:  # fail closed
            raise _failed(guardrail, exc) from exc
        _send(run.cfg.sinks, _event(guardrail, trip, final=True))
        if trip is not None:
            tripped = _tripped(guardrail, trip)
            await run.cleanup(tripped.reason, "aborted", tripped)
            raise tripped


async def check_output(run: Run, text: str, output: Any) -> None:
    """The final answer through every output guardrail, in order, before the run finishes.

    Raises:
        GuardrailTripped: One tripped (after the run's clean-up).
        HookError: One raised.
    """
    ctx = OutputGuardrailContext(text, output, True, list(run.history))
    await _check_outputs(run, run.cfg.guardrails, ctx, run.cfg.sinks, on_trip=None)


async def _check_outputs(
    run: Run,
    guardrails: Sequence[Guardrail],
    ctx: OutputGuardrailContext,
    sinks: list[Sink],
    on_trip: Callable[[str], None] | None,
) -> None:
    for guardrail in guardrails:
        if guardrail.kind != "output":
            continue
        try:
            trip = await guardrail.check(ctx)
        except Exception as exc:  # fail closed
            raise _failed(guardrail, exc) from exc
        _send(sinks, _event(guardrail, trip, final=ctx.final))
        if trip is not None:
            tripped = _tripped(guardrail, trip)
            if on_trip is not None:
                on_trip(tripped.reason)
            await run.cleanup(tripped.reason, "aborted", tripped)
            raise tripped


class Holder:
    """One answer's events held back from the run's readers until the guardrails pass them."""

    __slots__ = ("block_done", "guardrails", "held", "hold", "holding", "run", "text", "unchecked")

    def __init__(self, run: Run, guardrails: list[Guardrail]) -> None:
        self.run = run
        self.guardrails = guardrails
        self.hold = min(g.hold for g in guardrails if g.hold is not None)
        self.held: list[Any] = []
        self.holding = False
        self.block_done = False  # the held text block stopped: check and release it now
        self.text: list[str] = []  # the answer's text so far
        self.unchecked = 0  # characters gathered since the last check

    @classmethod
    def of(cls, run: Run) -> Holder | None:
        """A holder for the next answer, when an output guardrail holds text and someone reads."""
        holding = [g for g in run.cfg.guardrails if g.kind == "output" and g.hold is not None]
        return cls(run, holding) if holding and run.cfg.sinks else None

    def sink(self, event: Any) -> None:
        """Take one event: forward it, or keep it while a text block is held."""
        if not self.holding:
            if not (isinstance(event, BlockStart) and event.block_type is BlockType.TEXT):
                _send(self.run.cfg.sinks, event)
                return
            self.holding = True
        self.held.append(event)
        if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
            self.text.append(event.delta.text)
            self.unchecked += len(event.delta.text)
        elif isinstance(event, BlockStop | BlockAbort):
            self.block_done = True

    @property
    def due(self) -> bool:
        """A window is full, or the held block ended: time to check."""
        return self.block_done or (self.holding and self.unchecked >= self.hold)

    async def check(self) -> None:
        """Check the answer so far; release what passed, or drop it and raise.

        Raises:
            GuardrailTripped: The text did not pass (nothing of it was released).
        """
        ctx = OutputGuardrailContext("".join(self.text), None, False, list(self.run.history))
        await _check_outputs(self.run, self.guardrails, ctx, self.run.cfg.sinks, self.drop)
        self.unchecked = 0
        if self.block_done:
            self.release()
            self.holding = self.block_done = False
        else:
            self.release(keep=self.hold)

    def release(self, keep: int = 0) -> None:
        """Hand the held events to the readers, all but the text's last `keep` characters.

        The window slides: a refused string up to `hold` characters long that a check has not
        seen whole yet is never shown in part (its start stays held until it passes).
        """
        held, self.held = self.held, []
        left = sum(
            len(e.delta.text)
            for e in held
            if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
        )
        out: list[Any] = []
        for at, event in enumerate(held):
            if keep and left <= keep:  # what follows the held text waits behind it
                self.held = held[at:]
                break
            if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                text = event.delta.text
                if left - len(text) < keep:  # the boundary falls inside this fragment
                    cut = left - keep
                    out.append(_fragment(event, text[:cut], None))
                    self.held = [
                        _fragment(event, text[cut:], event.delta.logprobs),
                        *held[at + 1 :],
                    ]
                    break
                left -= len(text)
            out.append(event)
        _send(self.run.cfg.sinks, *out)

    def drop(self, reason: str) -> None:
        """Never show the held text: the readers see its block start and an abort."""
        held, self.held = self.held, []
        for event in held:
            if isinstance(event, BlockStart | BlockAbort):
                _send(self.run.cfg.sinks, event)
            elif isinstance(event, BlockStop):
                _send(self.run.cfg.sinks, BlockAbort(event.index, event.block_type, reason))
        self.holding = False


def _fragment(event: BlockDelta, text: str, logprobs: Any) -> BlockDelta:
    """A piece of a held text delta (the rest stays held; its log probabilities with it)."""
    return BlockDelta(event.index, TextDelta(text, logprobs), path=event.path)


def _send(sinks: list[Sink], *events: Any) -> None:
    for event in events:
        for sink in sinks:
            sink(event)


def _event(guardrail: Guardrail, trip: Trip | None, *, final: bool) -> GuardrailChecked:
    reason = trip.reason if trip is not None else None
    return GuardrailChecked(guardrail.name, guardrail.kind, trip is not None, reason, final)


def _tripped(guardrail: Guardrail, trip: Trip) -> GuardrailTripped:
    return GuardrailTripped(
        trip.reason,
        guardrail=guardrail.name,
        kind=guardrail.kind,
        info=trip.info,
    )


def _failed(guardrail: Guardrail, exc: Exception) -> HookError:
    return HookError(
        f"{guardrail.kind} guardrail {guardrail.name!r} raised {type(exc).__name__}: {exc}",
        hook=guardrail.name,
        kind=f"{guardrail.kind}_guardrail",
    )
