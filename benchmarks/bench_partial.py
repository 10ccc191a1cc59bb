"""Partial structured outputs: their cost per delta on a 20,000-delta answer.

Run: `uv run python benchmarks/bench_partial.py [--rows 4000] [--chunk 3] [--runs 5]`

One answer, a `Report` of `--rows` rows as JSON text (~60 kB for 4,000 rows) streamed in
`--chunk`-character deltas (~20,000), read through `worker.stream()` from a `ScriptedClient`
(in process: no HTTP, so the figures are the Worker's own). Three runs of the same stream:

- `text`: no output type (the floor: streaming, the Timeline, the stream's queue);
- `partials`: `output_type=Report`: an `OutputPartial` each time the JSON so far is
  validated (the first as soon as it fits, then every `output_partial_interval` seconds,
  0.05 by default), and the final validation;
- `no interval`: `output_partial_interval=0`, the worst case the growth rule bounds (a try
  each time the text has grown by a sixty-fourth);
- `every delta`: the same validation after every delta, which is what is avoided (quadratic:
  run on a cut answer of `--rows // 10` rows, its per-delta cost grows with the answer).

Figures: CPU microseconds per delta (best of `--runs`), the partials' share over `text`, and
how many validations ran.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import anyio
from pydantic import BaseModel

from llm_worker import OutputPartial, Worker
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.worker import _output


@dataclass
class Point:
    x: int
    y: int


class Report(BaseModel):
    title: str
    rows: list[Point]


def answer(rows: int, chunk: int) -> ScriptedResponse:
    report = Report(title="Totals", rows=[Point(i, i * 2) for i in range(rows)])
    return ScriptedResponse.text(report.model_dump_json(), chunk_size=chunk)


async def one_run(
    response: ScriptedResponse, output: bool, interval: float = _output.PARTIAL_INTERVAL
) -> tuple[float, int]:
    worker: Worker[Report] | Worker[str]
    if output:
        worker = Worker(
            ScriptedClient([response]), output_type=Report, output_partial_interval=interval
        )
    else:
        worker = Worker(ScriptedClient([response]))
    partials = 0
    start = time.process_time()
    async with worker.stream("Go.") as stream:
        async for event in stream:
            if isinstance(event, OutputPartial):
                partials += 1
    return time.process_time() - start, partials


def measure(
    response: ScriptedResponse, output: bool, runs: int, interval: float = 0.05
) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(runs):
        spent, count = anyio.run(one_run, response, output, interval)
        best = min(best, spent)
    return best, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--chunk", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    response = answer(args.rows, args.chunk)
    deltas = -(-len(response.parts[0].text) // args.chunk)  # type: ignore[union-attr]
    text, _ = measure(response, False, args.runs)
    partial, count = measure(response, True, args.runs)
    print(f"answer: {len(response.parts[0].text):,} characters in {deltas:,} deltas")  # type: ignore[union-attr]
    print(f"text      : {text / deltas * 1e6:6.2f} us/delta")
    print(f"partials  : {partial / deltas * 1e6:6.2f} us/delta  ({count} OutputPartial events)")
    print(f"partials' cost: {(partial - text) / deltas * 1e6:5.2f} us/delta over text")
    bounded, count = measure(response, True, args.runs, 0.0)
    print(f"no interval: {bounded / deltas * 1e6:6.2f} us/delta  ({count} OutputPartial events)")
    small = answer(args.rows // 10, args.chunk)
    small_deltas = -(-len(small.parts[0].text) // args.chunk)  # type: ignore[union-attr]
    _output.PartialFeed.first_shift = _output.PartialFeed.shift = 64  # after every delta
    base, _ = measure(small, False, args.runs)
    every, count = measure(small, True, 1, 0.0)
    print(
        f"every delta ({small_deltas:,} deltas, {count} events): "
        f"{(every - base) / small_deltas * 1e6:8.2f} us/delta over text"
    )


if __name__ == "__main__":
    main()
