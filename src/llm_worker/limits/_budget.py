"""Budget: one run's accounting against the `Limits` it is charged to.

The run calls it at three points — `admit` before a request is sent, `settle` once its
answer (or failure) is in, `tool_call` before each call executes — and `wrap_up` decides the
soft limit's one message. Every check and charge of several `Limits` happens under all their
locks at once (taken in one order), so concurrent runs see each other's reservations.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from llm_worker._log import logger
from llm_worker.errors import LimitExceededError
from llm_worker.events import UsageEvent
from llm_worker.limits._estimate import Estimate, estimate_input
from llm_worker.limits._limits import LimitName, Limits, Spent
from llm_worker.messages import Message, Request, SpecificTool, TextPart
from llm_worker.state import RunStatus

if TYPE_CHECKING:
    from llm_worker._cost import RequestUsage
    from llm_worker.providers._base import LLMClient
    from llm_worker.state import PauseState, RunResult
    from llm_worker.worker._assembler import Assembler
    from llm_worker.worker._turn import Run

__all__ = ("Budget", "Ticket", "budget_for", "resumed_budget")

_log = logger("llm_worker.limits")
_warned: set[tuple[str, str]] = set()  # (provider, model) told once per process

WRAP_UP = (
    "[budget] This run is close to its {name} limit ({spent} of {limit}). Finish now: give "
    "your final answer with what you have, without calling any tool."
)


@dataclass(slots=True)
class Ticket:
    """A sent request's reservation: its estimated input tokens and their price."""

    tokens: int
    cost: Decimal


def budget_for(*limits: Limits | None) -> Budget | None:
    """The budget over the given limits (the Worker's, the run's), or None for none."""
    chosen = [lim for lim in dict.fromkeys(limits) if lim is not None]
    return Budget(chosen) if chosen else None


class Budget:
    """One run's view of the `Limits` it is charged to."""

    __slots__ = ("limits", "refused", "soft_limit", "told")

    def __init__(self, limits: Sequence[Limits]) -> None:
        self.limits = sorted(limits, key=id)  # one lock order for every budget
        self.soft_limit: LimitName | None = None
        """The limit whose soft fraction was reached, once the model was told."""
        self.told = False
        self.refused: LimitExceededError | None = None  # a tool call refused: raised next

    @contextmanager
    def _locked(self) -> Generator[None]:
        with ExitStack() as stack:
            for lim in self.limits:
                stack.enter_context(lim._lock)  # pyright: ignore[reportPrivateUsage]
            yield

    # -- a request ----------------------------------------------------------------------------

    async def charged(self, run: Run, request: Request) -> Assembler:
        """Send `request` through `run` if every limit admits it; charge what it used.

        Raises:
            LimitExceededError: The request was refused (not sent), or its answer went past
                a limit and has tool calls (they do not run; the history keeps the answer).
        """
        plan = run.cfg.output
        output_tool = plan.tool.name if plan is not None and plan.tool is not None else None
        try:
            ticket = await self.admit(run.cfg.client, request, output_tool)
        except LimitExceededError:
            run.requests -= 1  # refused: never made
            raise
        billed = len(run.request_usage)
        try:
            answer = await run.send(request)
        except BaseException:
            self.settle(ticket, run.request_usage[billed:])  # a broken attempt's usage
            raise
        over = self.settle(ticket, run.request_usage[billed:])
        if over is not None and answer.calls:
            raise over  # none of its calls runs (the run's clean-up answers them)
        return answer

    async def admit(self, client: LLMClient, request: Request, output_tool: str | None) -> Ticket:
        """Check the request against every limit, reserve its input, shape it if soft.

        Raises:
            LimitExceededError: A limit is spent (a tool call was refused, the wall clock
                ran out), or the request's estimated input would cross one; or a cost limit
                cannot be kept because the model has no price.
        """
        if self.refused is not None:
            raise self.refused
        estimate = await self._estimate(client, request)
        cost = self._price_input(client, estimate.tokens)
        with self._locked():
            for lim in self.limits:
                _check(lim, estimate, cost)
            rooms = [_output_room(lim, estimate.tokens) for lim in self.limits]
            room = min((r for r in rooms if r is not None), default=None)
            _cap_output(request, room, estimate)
            for lim in self.limits:
                _reserve(lim, estimate.tokens, cost)
            near = self._near()
        if near is not None or self.told:
            self._wrap_up(request, near, output_tool)
        return Ticket(estimate.tokens, cost)

    async def _estimate(self, client: LLMClient, request: Request) -> Estimate:
        # Counting may cost a round trip (a provider's endpoint): only when a limit needs it.
        if all(
            lim.input_tokens is None and lim.total_tokens is None and lim.cost_usd is None
            for lim in self.limits
        ):
            return Estimate(0, "input not counted")
        return await estimate_input(client, request)

    def _price_input(self, client: LLMClient, tokens: int) -> Decimal:
        if all(lim.cost_usd is None for lim in self.limits):
            return Decimal(0)
        from llm_worker._cost import price

        cost = price(client.provider, client.model, UsageEvent(input_tokens=tokens))
        if cost is not None:
            return cost
        _unpriced(self.limits, client.provider, client.model)
        return Decimal(0)

    def _near(self) -> tuple[LimitName, Spent, float] | None:
        """The first limit spent to its `soft` fraction (locks held), if any."""
        for lim in self.limits:
            if lim.soft is None:
                continue
            spent = lim._snapshot()  # pyright: ignore[reportPrivateUsage]
            for name in _SOFT_ORDER:
                bound = lim.limit(name)
                if bound is not None and spent.of(name) >= lim.soft * bound:
                    return name, spent, bound
        return None

    def _wrap_up(
        self, request: Request, near: tuple[LimitName, Spent, float] | None, output_tool: str | None
    ) -> None:
        # Tools stay listed (a history with calls needs them on Anthropic) but none may be
        # called, except the output tool, which is how a tool-mode answer is given.
        request.tool_choice = "none" if output_tool is None else SpecificTool(output_tool)
        if self.told or near is None:
            return
        name, spent, bound = near
        self.told, self.soft_limit = True, name
        note = WRAP_UP.format(name=name, spent=_figure(spent.of(name)), limit=_figure(bound))
        request.messages = _with_note(request.messages, note)

    # -- after the answer ----------------------------------------------------------------------

    def settle(self, ticket: Ticket, usages: Sequence[RequestUsage]) -> LimitExceededError | None:
        """Count what the request really used; the limit it went past, if any."""
        usage = UsageEvent()
        for item in usages:
            usage = usage + item.usage
        costs = self._costs(usages)
        with self._locked():
            for lim in self.limits:
                _charge(lim, ticket, usage, costs)
            return self._over()

    def _costs(self, usages: Sequence[RequestUsage]) -> tuple[Decimal, int]:
        if all(lim.cost_usd is None for lim in self.limits):
            return Decimal(0), 0
        total, unpriced = Decimal(0), 0
        for item in usages:
            cost = item.cost
            if cost is None:
                unpriced += 1
                _unpriced(self.limits, item.provider, item.model)
            else:
                total += cost
        return total, unpriced

    def _over(self) -> LimitExceededError | None:
        for lim in self.limits:
            spent = lim._snapshot()  # pyright: ignore[reportPrivateUsage]
            for name in _AFTER_ANSWER:
                bound = lim.limit(name)
                if bound is not None and spent.of(name) > bound:
                    return exceeded(name, bound, spent.of(name), "the last answer went past it")
        return None

    # -- a tool call -------------------------------------------------------------------------

    def tool_call(self) -> str | None:
        """Count one tool call; the reason it may not run, if a limit refuses it."""
        with self._locked():
            for lim in self.limits:
                problem = _tool_refusal(lim)
                if problem is not None:
                    self.refused = problem
                    return f"not run: {problem}"
            for lim in self.limits:
                lim._spent = replace(lim._spent, tool_calls=lim._spent.tool_calls + 1)  # pyright: ignore[reportPrivateUsage]
        return None

    # -- pause and resume ----------------------------------------------------------------------

    def ended(self, result: RunResult[Any]) -> None:
        """Tell the result whether the soft limit was reached; remember a pause's spending."""
        result.soft_limit = self.soft_limit
        if result.state is not None and result.status is RunStatus.PAUSED:
            self.paused(result.state)

    def paused(self, state: PauseState) -> None:
        """Remember that these limits hold the paused run's spending (not charged again)."""
        key = pause_key(state)
        for lim in self.limits:
            with lim._lock:  # pyright: ignore[reportPrivateUsage]
                lim._charged_pauses.add(key)  # pyright: ignore[reportPrivateUsage]

    def resumed(self, state: PauseState) -> None:
        """Charge the spending before the pause to limits that did not see it (a new process)."""
        key = pause_key(state)
        from llm_worker._cost import total_cost

        needs_cost = any(lim.cost_usd is not None for lim in self.limits)
        cost = (total_cost(state.request_usage) or Decimal(0)) if needs_cost else Decimal(0)
        for lim in self.limits:
            with lim._lock:  # pyright: ignore[reportPrivateUsage]
                if key in lim._charged_pauses:  # pyright: ignore[reportPrivateUsage]
                    lim._charged_pauses.discard(key)  # pyright: ignore[reportPrivateUsage]
                    continue
                spent = lim._spent  # pyright: ignore[reportPrivateUsage]
                spent = _added(spent, state.usage, cost, requests=state.requests)
                lim._spent = replace(spent, tool_calls=spent.tool_calls + state.tool_calls)  # pyright: ignore[reportPrivateUsage]


def resumed_budget(state: PauseState, *limits: Limits | None) -> Budget | None:
    """The budget of a resumed run, charged what the pause's spending it has not seen."""
    budget = budget_for(*limits)
    if budget is not None:
        budget.resumed(state)
    return budget


def pause_key(state: PauseState) -> str:
    """What tells one pause from another, the same after a JSON round trip."""
    usage = state.usage
    calls = ",".join(p.call.id for p in state.pending)
    return (
        f"{len(state.history)}:{state.requests}:{usage.input_tokens}:{usage.output_tokens}:{calls}"
    )


def exceeded(name: LimitName, bound: float, used: float, how: str) -> LimitExceededError:
    """The error for a limit, with its figures."""
    return LimitExceededError(
        f"the {name} limit of {_figure(bound)} is reached: {_figure(used)} ({how})",
        limit=name,
        value=bound,
        used=used,
    )


_SOFT_ORDER: tuple[LimitName, ...] = (
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "tool_calls",
    "cost_usd",
    "wall_s",
)
_AFTER_ANSWER: tuple[LimitName, ...] = ("input_tokens", "output_tokens", "total_tokens", "cost_usd")


def _check(lim: Limits, estimate: Estimate, cost: Decimal) -> None:
    spent = lim._snapshot()  # pyright: ignore[reportPrivateUsage]
    held_tokens, held_cost = lim._reserved  # pyright: ignore[reportPrivateUsage]
    if lim.requests is not None and spent.requests + 1 > lim.requests:
        raise exceeded("requests", lim.requests, spent.requests + 1, "one more request")
    if lim.wall_s is not None and spent.wall_s >= lim.wall_s:
        raise exceeded("wall_s", lim.wall_s, spent.wall_s, "seconds since the first request")
    how = f"with this request's input, {estimate.how}"
    tokens_in = spent.input_tokens + held_tokens + estimate.tokens
    if lim.input_tokens is not None and tokens_in > lim.input_tokens:
        raise exceeded("input_tokens", lim.input_tokens, tokens_in, how)
    if lim.output_tokens is not None and spent.output_tokens >= lim.output_tokens:
        raise exceeded("output_tokens", lim.output_tokens, spent.output_tokens, "no room left")
    total = spent.total_tokens + held_tokens + estimate.tokens
    if lim.total_tokens is not None and total >= lim.total_tokens:
        raise exceeded("total_tokens", lim.total_tokens, total, how + ", no room for output")
    dollars = spent.cost_usd + held_cost + cost
    if lim.cost_usd is not None and dollars >= Decimal(str(lim.cost_usd)):
        raise exceeded("cost_usd", float(lim.cost_usd), float(dollars), how)


def _output_room(lim: Limits, input_tokens: int) -> int | None:
    spent = lim._spent  # pyright: ignore[reportPrivateUsage]
    held = lim._reserved[0]  # pyright: ignore[reportPrivateUsage]
    rooms: list[int] = []
    if lim.output_tokens is not None:
        rooms.append(lim.output_tokens - spent.output_tokens)
    if lim.total_tokens is not None:
        rooms.append(lim.total_tokens - spent.total_tokens - held - input_tokens)
    return min(rooms) if rooms else None


def _cap_output(request: Request, room: int | None, estimate: Estimate) -> None:
    """Lower the request's `max_tokens` to the output tokens the limits leave."""
    if room is None or (request.max_tokens is not None and request.max_tokens <= room):
        return
    budget = request.thinking.budget_tokens if request.thinking is not None else None
    if budget is not None and budget >= room:
        # Anthropic refuses max_tokens at or below the thinking budget: such a request
        # could not be kept within the limit.
        raise exceeded(
            "output_tokens",
            room,
            budget,
            f"the thinking budget does not fit the output tokens left, {estimate.how}",
        )
    request.max_tokens = room


def _reserve(lim: Limits, tokens: int, cost: Decimal) -> None:
    held_tokens, held_cost = lim._reserved  # pyright: ignore[reportPrivateUsage]
    lim._reserved = (held_tokens + tokens, held_cost + cost)  # pyright: ignore[reportPrivateUsage]
    lim._spent = replace(lim._spent, requests=lim._spent.requests + 1)  # pyright: ignore[reportPrivateUsage]
    if lim._started is None:  # pyright: ignore[reportPrivateUsage]
        lim._started = time.monotonic()  # pyright: ignore[reportPrivateUsage]


def _charge(lim: Limits, ticket: Ticket, usage: UsageEvent, costs: tuple[Decimal, int]) -> None:
    held_tokens, held_cost = lim._reserved  # pyright: ignore[reportPrivateUsage]
    lim._reserved = (held_tokens - ticket.tokens, held_cost - ticket.cost)  # pyright: ignore[reportPrivateUsage]
    spent = _added(lim._spent, usage, costs[0])  # pyright: ignore[reportPrivateUsage]
    lim._spent = replace(spent, unpriced=spent.unpriced + costs[1])  # pyright: ignore[reportPrivateUsage]


def _added(spent: Spent, usage: UsageEvent, cost: Decimal, *, requests: int = 0) -> Spent:
    tokens_in = usage.input_tokens or 0
    tokens_out = usage.output_tokens or 0
    return replace(
        spent,
        requests=spent.requests + requests,
        input_tokens=spent.input_tokens + tokens_in,
        output_tokens=spent.output_tokens + tokens_out,
        total_tokens=spent.total_tokens + tokens_in + tokens_out,
        cost_usd=spent.cost_usd + cost,
    )


def _tool_refusal(lim: Limits) -> LimitExceededError | None:
    spent = lim._snapshot()  # pyright: ignore[reportPrivateUsage]
    if lim.tool_calls is not None and spent.tool_calls + 1 > lim.tool_calls:
        return exceeded("tool_calls", lim.tool_calls, spent.tool_calls + 1, "one more call")
    if lim.wall_s is not None and spent.wall_s >= lim.wall_s:
        return exceeded("wall_s", lim.wall_s, spent.wall_s, "seconds since the first request")
    return None


def _unpriced(limits: Sequence[Limits], provider: str, model: str) -> None:
    """Fail closed on a model with no price, unless every cost limit opted to warn."""
    strict = [lim for lim in limits if lim.cost_usd is not None and lim.on_unpriced == "fail"]
    if strict:
        raise LimitExceededError(
            f"the cost_usd limit cannot be kept: genai-prices has no price for {provider} "
            f"model {model!r}; refusing to send rather than count it as free (pass "
            'Limits(on_unpriced="warn") to count it as 0 dollars)',
            limit="cost_usd",
            value=float(strict[0].cost_usd or 0),
        )
    if (provider, model) not in _warned:
        _warned.add((provider, model))
        _log.warning("no price for %s model %r: its requests count 0 dollars", provider, model)


def _with_note(messages: list[Message], note: str) -> list[Message]:
    # Into the last user message (tool results, usually): two user messages in a row are
    # refused by some servers. The history keeps no copy: the note is for this request only.
    last = messages[-1] if messages else None
    if last is not None and last.role == "user":
        return [*messages[:-1], Message("user", [*last.content, TextPart(note)])]
    return [*messages, Message.user(note)]


def _figure(value: float | Decimal) -> str:
    number = float(value)
    return str(int(number)) if number == int(number) else f"{number:.4f}".rstrip("0")
