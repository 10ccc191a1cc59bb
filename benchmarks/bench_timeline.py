"""Timeline dispatch cost per event, against a bare Python function call in the same run.

Run: `uv run python benchmarks/bench_timeline.py [--events 200000] [--runs 7]`

The stream has the shape of a real answer: text blocks and tool-use blocks of many deltas,
a usage snapshot after each block. Every kind has three handlers registered (two `Handler`
objects with scopes and one plain function), so every event reaches three handlers.

Figures (nanoseconds per event, best of `--runs` interleaved runs, the empty loop's cost
subtracted):
- `bare call`: one call of a no-op Python function;
- `direct`: the three no-op handlers called by hand, no Timeline (the floor);
- `dispatch`: `Timeline.dispatch` with the three no-op handlers;
- `collectors`: `dispatch` with `TextBlockCollector`, `ToolCallCollector` and a plain function.

The ratio is `dispatch / (3 * bare call)`: the cost of one handler call through the Timeline
in bare calls (target: under 10).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

from llm_worker import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    Event,
    InputJsonDelta,
    TextBlockCollector,
    TextDelta,
    TextMetadata,
    Timeline,
    ToolCallCollector,
    ToolUseMetadata,
    UsageEvent,
)


def make_events(n: int) -> list[Event]:
    """About n events: text blocks of 400 deltas and tool blocks of 100, usage after each."""
    events: list[Event] = []
    index = 0
    while len(events) < n:
        events.append(BlockStart(index, BlockType.TEXT, TextMetadata()))
        events.extend(BlockDelta(index, TextDelta("tok ")) for _ in range(400))
        events.append(BlockStop(index, BlockType.TEXT))
        events.append(UsageEvent(output_tokens=index))
        index += 1
        events.append(BlockStart(index, BlockType.TOOL_USE, ToolUseMetadata(f"c{index}", "f")))
        events.append(BlockDelta(index, InputJsonDelta('{"a": ')))
        events.extend(BlockDelta(index, InputJsonDelta("1")) for _ in range(98))
        events.append(BlockDelta(index, InputJsonDelta("}")))
        events.append(BlockStop(index, BlockType.TOOL_USE))
        events.append(UsageEvent(output_tokens=index))
        index += 1
    return events


class NoOp:
    """A Handler with a scope that does nothing with the event."""

    def new_scope(self) -> list[object]:
        return []

    def on_event(self, scope: list[object], event: object, /) -> None:
        pass


def noop(event: object) -> None:
    pass


def three_noops(timeline: Timeline) -> None:
    for register in (
        timeline.on_text_block,
        timeline.on_tool_use_block,
        timeline.on_usage,
    ):
        register(NoOp())
        register(NoOp())
        register(noop)


def collectors(timeline: Timeline) -> None:
    timeline.on_text_block(TextBlockCollector())
    timeline.on_tool_use_block(ToolCallCollector())
    timeline.on_text_block(noop)
    timeline.on_tool_use_block(noop)
    timeline.on_usage(noop)


def time_ns(fn: Callable[[], None]) -> int:
    gc.collect()
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def measure(events: list[Event], runs: int) -> dict[str, float]:
    def empty() -> None:
        for _event in events:
            pass

    def bare() -> None:
        f = noop
        for event in events:
            f(event)

    a, b, s1, s2 = NoOp(), NoOp(), [], []

    def direct() -> None:
        fa, fb, fc = a.on_event, b.on_event, noop
        for event in events:
            fa(s1, event)
            fb(s2, event)
            fc(event)

    def timeline_with(setup: Callable[[Timeline], Any]) -> Callable[[], None]:
        def run() -> None:
            timeline = Timeline()
            setup(timeline)
            dispatch = timeline.dispatch
            for event in events:
                dispatch(event)

        return run

    scenarios: dict[str, Callable[[], None]] = {
        "empty loop": empty,
        "bare call": bare,
        "direct": direct,
        "dispatch": timeline_with(three_noops),
        "collectors": timeline_with(collectors),
    }
    # Each run measures every scenario in turn, and the best of the runs is kept for each:
    # other load on the machine drifts over time, and interleaving spreads it evenly.
    best = dict.fromkeys(scenarios, 1 << 62)
    for _ in range(runs):
        for name, fn in scenarios.items():
            best[name] = min(best[name], time_ns(fn))
    loop = best.pop("empty loop")
    return {name: (ns - loop) / len(events) for name, ns in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    events = make_events(args.events)
    figures = measure(events, args.runs)
    for name, ns in figures.items():
        print(f"{name:11} {ns:7.1f} ns/event")
    bare = figures["bare call"]
    print(f"dispatch per handler call: {figures['dispatch'] / 3 / bare:4.2f} bare calls")
    print(f"Timeline overhead over direct calls: {figures['dispatch'] - figures['direct']:.1f} ns")
    print(f"({len(events)} events)")


if __name__ == "__main__":
    main()
