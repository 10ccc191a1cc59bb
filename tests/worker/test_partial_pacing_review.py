"""Review probes of the partial outputs' pacing: slow tries, a clock going back, bad text."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel

from llm_worker import OutputPartial
from llm_worker.events import BlockDelta, BlockStop, BlockType, TextDelta
from llm_worker.worker._output import OutputPlan, PartialFeed


class Invoice(BaseModel):
    number: str
    lines: list[str]


TEXT = Invoice(number="INV-1", lines=[f"line {n:04}" for n in range(400)]).model_dump_json()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowPlan(OutputPlan):
    """Each partial validation takes `cost` seconds of the clock (a multi-megabyte answer)."""

    def __init__(self, clock: Clock, cost: float) -> None:
        super().__init__(Invoice, "native", 1, "final_result", partial_interval=0.05)
        self.clock = clock
        self.cost = cost
        self.tries: list[float] = []

    def partial(self, raw: str) -> Any:
        self.tries.append(self.clock.now)
        self.clock.now += self.cost
        return super().partial(raw)


def _feed(plan: OutputPlan, clock: Clock, step: float) -> list[OutputPartial[Any]]:
    sent: list[OutputPartial[Any]] = []
    feed = PartialFeed(plan, sent.append, clock=clock)
    for at in range(0, len(TEXT), 8):
        feed.feed(BlockDelta(0, TextDelta(TEXT[at : at + 8])))
        clock.now += step
    feed.feed(BlockStop(0, BlockType.TEXT))
    return sent


def test_a_slow_try_waits_a_multiple_of_its_time_before_the_next() -> None:
    # Before: the next try came `interval` after a try that took 0.2 s, so validation took
    # ~80% of the time (a 10 MB answer: 6 of 8 s of CPU, the loop stalled back to back).
    clock = Clock()
    plan = SlowPlan(clock, cost=0.2)
    sent = _feed(plan, clock, step=0.01)
    first = plan.tries.index(min(t for t in plan.tries if t > 0.5))  # a partial was sent
    later = plan.tries[first:-1]  # (the last: when the block stopped)
    gaps = [b - a for a, b in itertools.pairwise(later)]
    assert len(gaps) >= 3
    assert all(gap >= 0.2 + 0.2 * PartialFeed.cost_factor - 1e-9 for gap in gaps)
    assert sent[-1].value == Invoice.model_validate_json(TEXT)


def test_a_fast_try_keeps_the_interval() -> None:
    clock = Clock()
    plan = SlowPlan(clock, cost=0.001)
    _feed(plan, clock, step=0.01)
    gaps = [b - a for a, b in zip(plan.tries[4:-2], plan.tries[5:-1], strict=True)]
    # On the interval (later, the sixty-fourth of growth spaces them a little more).
    assert len(gaps) > 20 and all(0.05 <= gap <= 0.11 for gap in gaps)


def test_a_clock_that_goes_back_still_ends_with_the_whole_value() -> None:
    clock = Clock()
    plan = SlowPlan(clock, cost=0.0)
    sent: list[OutputPartial[Any]] = []
    feed = PartialFeed(plan, sent.append, clock=clock)
    half = len(TEXT) // 16 * 8
    for at in range(0, half, 8):
        feed.feed(BlockDelta(0, TextDelta(TEXT[at : at + 8])))
        clock.now += 0.01
    clock.now -= 3600.0  # (an injected clock; time.monotonic never does this)
    for at in range(half, len(TEXT), 8):
        feed.feed(BlockDelta(0, TextDelta(TEXT[at : at + 8])))
    feed.feed(BlockStop(0, BlockType.TEXT))
    assert sent[-1].value == Invoice.model_validate_json(TEXT)
    assert [p.size for p in sent] == sorted({p.size for p in sent})


def test_a_lone_surrogate_in_the_text_is_no_partial_not_a_crash() -> None:
    # pydantic_core.from_json raised TypeError ("Expected bytes, bytearray or str") on a str
    # that is not UTF-8: it ended the run with an untyped error from the partial feed.
    plan = OutputPlan(Invoice, "native", 1, "final_result", partial_interval=0)
    assert plan.partial('{"number": "a\ud800') is None
    sent: list[OutputPartial[Any]] = []
    feed = PartialFeed(plan, sent.append)
    feed.feed(BlockDelta(0, TextDelta('{"number": "\udfff", "lines": [')))
    feed.feed(BlockStop(0, BlockType.TEXT))
    assert sent == []
