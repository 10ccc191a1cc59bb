"""Limits: a budget of requests, tokens, tool calls, dollars and seconds, and what it has spent.

A `Limits` is a budget, not a setting: it counts what every run charged to it spent, so one
object shared by several Workers (or by the parallel tool calls of one run) bounds them
together. Its counters sit behind a lock, and a request reserves its estimated input before it
is sent, so two runs racing for the last tokens cannot both get them.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import KW_ONLY, dataclass, field
from decimal import Decimal
from typing import Literal

from llm_worker.errors import ConfigurationError

__all__ = ("LIMIT_NAMES", "LimitName", "Limits", "Spent")

LimitName = Literal[
    "requests", "input_tokens", "output_tokens", "total_tokens", "tool_calls", "cost_usd", "wall_s"
]
"""The name of one limit of a `Limits` (what `LimitExceededError.limit` says)."""

LIMIT_NAMES: tuple[LimitName, ...] = (
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "tool_calls",
    "cost_usd",
    "wall_s",
)


@dataclass(slots=True, frozen=True)
class Spent:
    """What a `Limits` has counted so far (a snapshot).

    Attributes:
        requests: Requests sent.
        input_tokens: Input tokens the answers reported (cached ones included).
        output_tokens: Output tokens the answers reported (thinking included).
        total_tokens: Input plus output tokens.
        tool_calls: Tool calls executed.
        cost_usd: Dollars, by the `genai-prices` table; requests of a model it cannot price
            count 0 here and in `unpriced` (only with `on_unpriced="warn"`).
        wall_s: Seconds since the first request charged to the budget.
        unpriced: Requests whose model could not be priced.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    tool_calls: int = 0
    cost_usd: Decimal = Decimal(0)
    wall_s: float = 0.0
    unpriced: int = 0

    def of(self, name: LimitName) -> float:
        """The amount spent against the limit `name`."""
        return float(getattr(self, name))


@dataclass(slots=True, eq=False)
class Limits:
    """A budget for runs: `Worker(limits=...)`, `worker.run(..., limits=...)`.

    ```python
    budget = Limits(total_tokens=200_000, cost_usd=2.0, tool_calls=40, soft=0.8)
    result = await worker.run("Summarise the repository", limits=budget)
    ```

    Every limit left `None` is unbounded. The object counts what is charged to it across
    every run that uses it: pass one to several Workers to bound them together, or a new
    one to each `run()` for a per-run budget. A Worker's `limits=` bounds all its runs
    together; a run's own `limits=` applies on top of it.

    When it is checked: before each request (the request count, the wall clock, and the
    request's input tokens and their price, estimated — `LimitExceededError.estimated_by`
    says how; a request that would cross a limit is not sent, and a request's `max_tokens`
    is lowered to the output tokens left), after each answer (its reported usage and price
    are counted; an answer over a limit runs none of its tool calls), and before each tool
    call (a call past `tool_calls` is not run: the model reads why, and the next request
    raises).

    Args:
        requests: Model requests.
        input_tokens: Input tokens (cached ones included).
        output_tokens: Output tokens (thinking included).
        total_tokens: Input plus output tokens.
        tool_calls: Tool calls executed.
        cost_usd: US dollars, priced by `genai-prices` (the `llm-worker[cost]` extra).
        wall_s: Seconds from the first request charged to this budget.
        soft: A fraction (0 < soft < 1): once any limit is spent to that fraction, the next
            request tells the model, once, to finish now without tools (and offers none), so
            the run can end with an answer before the hard limit; `RunResult.soft_limit`
            then names the limit.
        on_unpriced: With `cost_usd`, what a model `genai-prices` cannot price does:
            `"fail"` (the default) refuses to send the request (`LimitExceededError`), as a
            budget that cannot be counted cannot be kept; `"warn"` logs a warning once per
            model and counts the request as 0 dollars (`Spent.unpriced` counts them).

    Raises:
        ConfigurationError: A limit below 0, or `soft` outside (0, 1).
    """

    _: KW_ONLY
    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None
    cost_usd: float | Decimal | None = None
    wall_s: float | None = None
    soft: float | None = None
    on_unpriced: Literal["fail", "warn"] = "fail"
    _spent: Spent = field(default_factory=Spent, init=False, repr=False)
    _reserved: tuple[int, Decimal] = field(default=(0, Decimal(0)), init=False, repr=False)
    _started: float | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _charged_pauses: set[str] = field(default_factory=set[str], init=False, repr=False)

    def __post_init__(self) -> None:
        for name in LIMIT_NAMES:
            value = getattr(self, name)
            if value is not None and (not math.isfinite(float(value)) or value < 0):
                raise ConfigurationError(f"Limits({name}=...) must be a number >= 0")
        if self.soft is not None and not 0 < self.soft < 1:
            raise ConfigurationError("Limits(soft=...) must be between 0 and 1 (e.g. 0.8)")
        if self.on_unpriced not in ("fail", "warn"):
            raise ConfigurationError('Limits(on_unpriced=...) must be "fail" or "warn"')

    @property
    def spent(self) -> Spent:
        """What has been charged so far (the wall clock read now)."""
        with self._lock:
            return self._snapshot()

    def limit(self, name: LimitName) -> float | None:
        """The limit `name` as a number, or None when it is unbounded."""
        value = getattr(self, name)
        return None if value is None else float(value)

    def _snapshot(self) -> Spent:
        spent = self._spent
        if self._started is None:
            return spent
        return Spent(
            spent.requests,
            spent.input_tokens,
            spent.output_tokens,
            spent.total_tokens,
            spent.tool_calls,
            spent.cost_usd,
            time.monotonic() - self._started,
            spent.unpriced,
        )
