"""How often `OutputPartial`s come: the first as soon as the JSON fits, then on a clock.

The feed is given a clock the test moves by hand: no sleeps, the same counts on any machine.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from pydantic import BaseModel

from llm_worker import OutputPartial, Worker
from llm_worker.errors import ConfigurationError
from llm_worker.events import BlockDelta, BlockStop, BlockType, TextDelta
from llm_worker.testing import ScriptedClient
from llm_worker.worker._output import PARTIAL_INTERVAL, OutputPlan, PartialFeed


class Line(BaseModel):
    item: str
    amount: float


class Invoice(BaseModel):
    # A partial is an Invoice: it fits once every required field has begun (fields with a
    # default, or a list, last: they stream piece by piece).
    number: str
    customer: str
    total: float
    lines: list[Line]
    note: str = ""


INVOICE = Invoice(
    number="INV-2026-0042",
    customer="Kyoto Tea Merchants, 14 Sanjo-dori, Nakagyo-ku",
    total=262.5,
    lines=[Line(item=f"sencha, lot {n:03}", amount=12.5 * n) for n in range(1, 4)],
    note="Payable within thirty days of receipt. Tea is shipped in sealed tins; report "
    "damage within a week. Thank you for your custom — the first flush was early this year.",
)
TEXT = INVOICE.model_dump_json()


Sent = list[tuple[float, OutputPartial[Invoice]]]


class Clock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CountingPlan(OutputPlan):
    """An output plan that notes the clock's time of each partial validation."""

    def __init__(self, interval: float, clock: Clock) -> None:
        super().__init__(Invoice, "native", 1, "final_result", partial_interval=interval)
        self.clock = clock
        self.tries: list[float] = []
        self.sizes: list[int] = []

    def partial(self, raw: str) -> Any:
        self.tries.append(self.clock.now)
        self.sizes.append(len(raw))
        return super().partial(raw)


def play(text: str, *, interval: float, step: float, size: int = 4) -> tuple[Sent, CountingPlan]:
    """Feed `text` in `size`-character deltas, the clock moving `step` seconds a delta.

    Returns:
        The partials sent with the time of each, and the plan (what it validated, when).
    """
    clock = Clock()
    plan = CountingPlan(interval, clock)
    sent: Sent = []
    feed = PartialFeed(plan, lambda partial: sent.append((clock.now, partial)), clock=clock)
    for at in range(0, len(text), size):
        feed.feed(BlockDelta(0, TextDelta(text[at : at + size])))
        clock.now += step
    feed.feed(BlockStop(0, BlockType.TEXT))
    return sent, plan


def first_fit(text: str) -> int:
    """The shortest prefix of `text` that validates as a partial output."""
    plan = OutputPlan(Invoice, "native", 1, "final_result")
    return next(n for n in range(1, len(text) + 1) if plan.partial(text[:n]) is not None)


def test_the_first_partial_comes_as_soon_as_the_json_fits() -> None:
    assert 400 < len(TEXT) < 460  # the newcomer's answer: ~430 characters
    fits = first_fit(TEXT)
    sent, _ = play(TEXT, interval=PARTIAL_INTERVAL, step=0.0)  # the clock stands still
    first = sent[0][1]
    # Tried each time the text grew by an eighth: at most that much after it first fits.
    assert fits <= first.size <= fits + max(4, fits >> 3) + 4
    assert first.size < 128  # (it came at 256 characters or more, or at the end, before)


def test_after_the_first_validations_follow_the_clock() -> None:
    sent, plan = play(TEXT, interval=0.05, step=0.01)
    tries = plan.tries
    first = tries.index(sent[0][0]) + tries.count(sent[0][0])  # the tries after the first
    later = tries[first:-1]  # the last: when the block stopped
    gaps = [b - a for a, b in itertools.pairwise([sent[0][0], *later])]
    assert all(0.05 - 1e-9 <= gap <= 0.06 + 1e-9 for gap in gaps)  # on the clock, no more
    stream_time = math.ceil(len(TEXT) / 4) * 0.01 - sent[0][0]
    assert len(later) >= int(stream_time / 0.06)
    # A partial for each try whose value changed: the note grows with every one.
    assert len(sent) >= 12
    assert sent[-1][1].value == INVOICE
    sizes = [p.size for _, p in sent]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)


def test_a_clock_that_stands_still_sends_the_first_and_the_whole() -> None:
    sent, plan = play(TEXT, interval=0.05, step=0.0)
    assert len(sent) == 2 and sent[-1][1].value == INVOICE
    assert len(plan.tries) < 40  # before the first: each eighth; after it, none until the end


def test_no_interval_tries_as_often_as_the_growth_rule_allows() -> None:
    sent, plan = play(TEXT, interval=0, step=0.0, size=1)
    sizes = plan.sizes[plan.sizes.index(sent[0][1].size) : -1]  # (the last: at the stop)
    # Each try once the text grew by a sixty-fourth (at least a character), and no later.
    assert all(b - a == max(1, a >> PartialFeed.shift) for a, b in itertools.pairwise(sizes))
    assert len(sent) > 40
    assert sent[-1][1].value == INVOICE


@pytest.mark.parametrize("interval", [-0.1, math.nan, math.inf])
def test_an_interval_that_is_no_time_is_refused(interval: float) -> None:
    with pytest.raises(ConfigurationError, match="output_partial_interval"):
        Worker(ScriptedClient([]), output_type=Invoice, output_partial_interval=interval)
