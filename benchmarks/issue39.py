"""Issue 39's four targets in one run: each figure with its spread, the bound, met or not.

Run (the whole report: about 10 minutes on a quiet machine, estimated from its parts):

    uv sync --group bench
    uv run --group bench python benchmarks/issue39.py [--only import wires concurrent web]
        [--rounds 3] [--samples N] [--wires chat …] [--pin] [--instructions N]
        [--ui-instructions]

It runs the existing benchmarks, the same code as when they run alone:

1. `import` — bench_import.py's commands, in fresh interpreters reading bytecode: the CPU of
   `import llm_worker` + building a client without `transport=` over `python -c pass` (< 100
   ms), and which library that client sends through under asyncio (aiohttp). The first
   request's cost is shown beside it (stated by the issue, not bounded).
2. `wires` — peers.py's `text` (20,000 deltas in one write; ≤ 1.5x) and `paced` (2,000 one
   per millisecond; ≤ 1.3x) streams on each wire: the default client (`ours_default`, built
   without `transport=`) against the hand-split limit (`raw_aiohttp`), CPU per event; with
   `--instructions N` also bulk by instructions (valgrind's callgrind at N and 2N deltas:
   load-free, a minute or two per subject and wire).
3. `concurrent` — peers.py's 1,000 concurrent streams of 200 Chat deltas: CPU per event ≤
   1.3x raw aiohttp, p99 time to first event ≤ 2x.
4. `web` — bench_serve.py's 1,000 concurrent runs through `llm-worker serve` (≤ 0.5 MiB per
   run; memory returned: what a later wave leaves is at most a tenth of the bound per run),
   and bench_ui.py's encoders (≤ 1.2x `Worker.stream`; timed, or counted instructions with
   `--ui-instructions`, which needs valgrind and takes several minutes more).

A ratio's spread is its min-max over the rounds (each round's ratio is the median of its
samples, paired with the limit's measured next to them). The verdict: `met` when every
round is within the bound, `not met` when none is, `unsettled` when the rounds straddle it
(the median then says which side it leans to): a bound is settled only when the spread
says so.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _peer_subjects as subjects
import _wire
import bench_import
import peers

HERE = Path(__file__).parent
TARGETS = ("import", "wires", "concurrent", "web")
LIMIT, DEFAULT = "raw_aiohttp", "ours_default"


@dataclass(frozen=True, slots=True)
class Figure:
    """One target's measured figure: its rounds' values against a bound (lower is better)."""

    target: str
    what: str
    values: tuple[float, ...]
    bound: float
    unit: str = "x"

    @property
    def verdict(self) -> str:
        """`met`, `not met`, or `unsettled` when the rounds fall on both sides of the bound."""
        if not self.values:
            return "no figure"
        if max(self.values) <= self.bound:
            return "met"
        if min(self.values) > self.bound:
            return "not met"
        return "unsettled"

    def line(self) -> str:
        """The report's row: target, what, median (min-max), bound, verdict."""
        return f"| {self.target} | {self.what} | {spread(self.values, self.unit)} | " \
               f"≤ {self.bound:g}{self.unit} | **{self.verdict}** |"  # fmt: skip


@dataclass(frozen=True, slots=True)
class Check:
    """A target's yes-or-no part (which library the default sends through)."""

    target: str
    what: str
    found: str
    wanted: str

    def line(self) -> str:
        """The report's row, as a `Figure`'s."""
        verdict = "met" if self.found == self.wanted else "not met"
        return f"| {self.target} | {self.what} | {self.found} | {self.wanted} | **{verdict}** |"


def spread(values: tuple[float, ...], unit: str = "x") -> str:
    """`median (min-max)` of the values, or the one value, or `—`."""
    if not values:
        return "—"
    # Ratios to three places: a verdict must not hang on a digit the table does not show.
    digits = {" ms": 0, " KiB": 1}.get(unit, 3)
    median = f"{statistics.median(values):.{digits}f}{unit}"
    if len(values) == 1:
        return median
    return f"{median} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def measure_import(runs: int) -> list[Figure | Check]:
    """bench_import.py's commands, each round in turn; CPU over `python -c pass`, paired."""
    client, request = "+ a first client, the default", (
        "+ llm_worker, a client, its first request, the default"
    )  # fmt: skip
    pairs = {client: "python -c pass", request: "a bare asyncio program"}
    over: dict[str, list[float]] = {label: [] for label in pairs}
    with tempfile.TemporaryDirectory(prefix="issue39-pyc-") as folder:
        bench_import.with_bytecode(folder)  # a warm-up round writes every module's bytecode
        for _ in range(runs):
            for label, base in pairs.items():
                cpu = bench_import.one_run(bench_import.COMMANDS[label])[1]
                over[label].append(cpu - bench_import.one_run(bench_import.COMMANDS[base])[1])
    library = _default_library()
    print(f"\nimport: a client built without transport= sends through {library} under asyncio")
    print(f"the default's first request (CPU over a bare asyncio program): "
          f"{spread(tuple(over[request]), ' ms')}")  # fmt: skip
    return [
        Figure("1", "import llm_worker + a client, the default (CPU over bare Python)",
               tuple(over[client]), 100, " ms"),
        Check("1", "the library a client without transport= sends through on asyncio",
              library, "aiohttp"),
    ]  # fmt: skip


_LIBRARY = """
import asyncio
from llm_worker.providers._http_choice import chosen, resolved

async def main():
    print(resolved(chosen(None, None, None), None))

asyncio.run(main())
"""


def _default_library() -> str:
    env = {k: v for k, v in os.environ.items() if k != "LLM_WORKER_TRANSPORT"}
    done = subprocess.run([sys.executable, "-c", _LIBRARY], capture_output=True, text=True,
                          check=True, env=env)  # fmt: skip
    return done.stdout.strip()


def _peers_args(args: argparse.Namespace, **more: object) -> argparse.Namespace:
    chosen = {"subjects": [LIMIT, DEFAULT], "events": 0, "child": args.child}
    return argparse.Namespace(rounds=args.rounds, samples=args.samples, wires=args.wires,
                              **chosen, **more)  # fmt: skip


def measure_wires(args: argparse.Namespace, server: _wire.Server) -> list[Figure]:
    """The default client over the hand-split limit, bulk and paced, on each wire."""
    tables = peers.run_streams(_peers_args(args, streams=["text", "paced"]), server)
    figures = []
    for (stream, shape), rows in tables.items():
        bound, kind = (1.5, "bulk") if stream == "text" else (1.3, "paced")
        figures.append(Figure("2", f"{shape} {kind}: CPU/event ÷ the limit",
                              ratios(rows[DEFAULT], "ratio"), bound))  # fmt: skip
    return figures


def measure_concurrent(args: argparse.Namespace, server: _wire.Server) -> list[Figure]:
    """1,000 concurrent Chat streams: the default client over raw aiohttp."""
    more = {"concurrent": 1000, "stream_events": 200}
    rows = peers.run_concurrent(_peers_args(args, **more), server)[DEFAULT]
    return [
        Figure("3", "1,000 streams: CPU/event ÷ raw aiohttp", ratios(rows, "ratio"), 1.3),
        Figure("3", "1,000 streams: p99 first event ÷ raw aiohttp", ratios(rows, "ratio_p99"), 2),
    ]


def count_wires(wires: list[str], server: _wire.Server, n: int) -> list[Figure]:
    """Bulk by instructions (load-free): the default client over the limit, each wire.

    Each subject runs as peers.py runs it (`_peer_subjects.py`: a warm-up stream, then one
    measured; over HTTP from the same server) under valgrind's callgrind, with `n` and `2n`
    deltas; the difference is `2n` events' instructions, start-up and imports cancelled.
    """
    figures = []
    for shape in wires:
        per_event = {}
        what = f"{shape} bulk by instructions ÷ the limit"
        try:
            for subject in (LIMIT, DEFAULT):
                counts = [_instructions(subject, shape, k, server.base_url) for k in (n, 2 * n)]
                per_event[subject] = (counts[1] - counts[0]) / (2 * n)
        except (OSError, subprocess.CalledProcessError, RuntimeError) as exc:
            print(f"{shape} bulk by instructions: failed ({exc})")
            figures.append(Figure("2", what, (), 1.5))
            continue
        ratio = per_event[DEFAULT] / per_event[LIMIT]
        print(f"{shape} bulk by instructions: the limit {per_event[LIMIT]:,.0f} an event, "
              f"the default {per_event[DEFAULT]:,.0f}: {ratio:.3f}x")  # fmt: skip
        figures.append(Figure("2", what, (ratio,), 1.5))
    return figures


def _instructions(subject: str, shape: str, n: int, base_url: str) -> int:
    script = str(HERE / "_peer_subjects.py")
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
               script, subject, shape, f"text-{n}-0", base_url]  # fmt: skip
    env = {**peers.ENV, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def ratios(rows: list[dict], key: str) -> tuple[float, ...]:
    """One value per round that measured it (a failed round has none)."""
    return tuple(row[key] for row in rows if key in row)


_WAVE = re.compile(r"^wave (\d+): idle ([\d.]+) MiB.*: ([\d.]+) MiB per run, (-?[\d.]+) MiB left, "
                   r"(-?[\d.]+) MiB after")  # fmt: skip


def parse_serve(text: str, runs: int) -> list[Figure]:
    """bench_serve.py's waves: MiB per run (each wave's), and per run left by the last wave."""
    waves = [match.groups() for line in text.splitlines() if (match := _WAVE.match(line))]
    if not waves:
        return [Figure("4", "serve: MiB per run (no wave measured)", (), 0.5, " MiB")]
    per_run = tuple(float(w[2]) for w in waves)
    # What the last wave kept, a few seconds after it ended: the first wave's leftovers (imports,
    # pooled connections, the allocator's arenas) are reused by the next, a leak adds again.
    kept = float(waves[-1][4]) * 1024 / runs
    return [
        Figure("4", f"serve, {runs} runs: MiB per run (each wave)", per_run, 0.5, " MiB"),
        Figure("4", "serve: KiB per run the last wave kept (memory returned)", (kept,), 51.2,
               " KiB"),
    ]  # fmt: skip


def measure_serve(runs: int, waves: int) -> list[Figure]:
    command = [sys.executable, str(HERE / "bench_serve.py"), "--runs", str(runs),
               "--waves", str(waves)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
    print("\n" + done.stdout.strip())
    if done.returncode != 0:
        print(done.stderr.strip()[-2000:])
    return parse_serve(done.stdout, runs)


_ENCODER = re.compile(
    r"^(Vercel UI stream|AG-UI): .*ratio ([\d.]+)(?: \(rounds ([\d.]+)-([\d.]+))?"
)


def parse_ui(text: str) -> list[Figure]:
    """bench_ui.py's two encoders: their ratio to `Worker.stream` (with the rounds' range)."""
    figures = []
    for line in text.splitlines():
        if match := _ENCODER.match(line):
            name, ratio, low, high = match.groups()
            values = (float(ratio),) if low is None else (float(low), float(ratio), float(high))
            figures.append(Figure("4", f"{name} encoder ÷ Worker.stream", values, 1.2))
    return figures


def measure_ui(instructions: bool) -> list[Figure]:
    command = [sys.executable, str(HERE / "bench_ui.py")]
    if instructions:
        command.append("--instructions")
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3600)
    print("\n" + done.stdout.strip())
    if done.returncode != 0:
        print(done.stderr.strip()[-2000:])
    return parse_ui(done.stdout)


def report(figures: list[Figure | Check]) -> str:
    """The summary table of every figure measured."""
    head = ["| target | what | measured: median (min-max of the rounds) | bound | verdict |",
            "|---|---|---|---|---|"]  # fmt: skip
    return "\n".join([*head, *(figure.line() for figure in figures)])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--rounds", type=int, default=3, help="rounds of peers.py")
    parser.add_argument("--samples", type=int, default=0, help="peers.py's, per round")
    parser.add_argument("--wires", nargs="*", default=list(subjects.WIRES),
                        choices=list(subjects.WIRES))  # fmt: skip
    parser.add_argument("--pin", action="store_true", help="the server on a CPU of its own")
    parser.add_argument("--import-runs", type=int, default=9)
    parser.add_argument("--serve-runs", type=int, default=1000)
    parser.add_argument("--serve-waves", type=int, default=2)
    parser.add_argument("--instructions", type=int, default=0, metavar="N",
                        help="bulk also by instructions (valgrind), N and 2N deltas")  # fmt: skip
    parser.add_argument("--ui-instructions", action="store_true",
                        help="count the encoders' instructions (valgrind)")  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 1 or args.samples < 0:
        parser.error("--rounds must be at least 1, --samples at least 0 (0: the defaults)")
    start, load = time.perf_counter(), os.getloadavg()[0]
    print(f"issue 39's targets: {' '.join(args.only)}; {os.cpu_count()} cores, load average "
          f"{load:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")  # fmt: skip
    figures: list[Figure | Check] = []
    if "import" in args.only:
        figures += measure_import(args.import_runs)
    if {"wires", "concurrent"} & set(args.only):
        server = _wire.start()
        args.child = peers.pin(server, args.pin)
        try:
            if "wires" in args.only:
                figures += measure_wires(args, server)
                if args.instructions:
                    figures += count_wires(args.wires, server, args.instructions)
            if "concurrent" in args.only:
                figures += measure_concurrent(args, server)
        finally:
            server.close()
    if "web" in args.only:
        figures += measure_serve(args.serve_runs, args.serve_waves)
        figures += measure_ui(args.ui_instructions)
    print(f"\n## Issue 39: the targets ({time.perf_counter() - start:.0f} s; load average "
          f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end)\n")  # fmt: skip
    print(report(figures))


if __name__ == "__main__":
    main()
