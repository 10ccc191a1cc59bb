"""llm-worker against raw HTTP baselines and the libraries users would pick instead.

Run (the peers come from the `bench` dependency group, never from the runtime ones):

    uv sync --group bench
    uv run --group bench python benchmarks/peers.py --rounds 3

One local server (`_wire.py`, a child process) serves the same streams in the four wire
shapes (`--wires`: Chat Completions, Anthropic, OpenAI Responses, Gemini): `text` (20,000
text deltas in one write), `paced` (2,000 deltas, one per millisecond, so one per network
read) and `tool` (a tool call whose arguments come in 200 fragments; not on Gemini, which
sends a call whole). Every measurement runs in a fresh interpreter; the subjects alternate
within each round, so load on the machine falls on all of them alike. Reported per subject
(median of the rounds): µs per event of wall and CPU time, the CPU ratio to raw aiohttp +
orjson of the same round, the peak RSS, and `python -c "import X"` time.
`--concurrent` adds 1,000 concurrent streams of 200 events on one event loop (our clients and
the raw baselines): CPU per event, time to first event p50/p99, memory per stream.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _peer_subjects as subjects
import _readme_table
import _wire

STREAMS = {"text": "text-{n}-0", "paced": "text-{n}-1", "tool": "tool-{n}-0"}
SIZES = {"text": 20_000, "paced": 2_000, "tool": 200}
# litellm fetches a price list from GitHub at import unless told to use its own copy.
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def measure(subject: str, shape: str, model: str, base_url: str, extra: list[str]) -> dict:
    """One measurement in a fresh interpreter."""
    command = [sys.executable, str(Path(__file__).parent / "_peer_subjects.py"), subject, shape]
    result = subprocess.run(
        [*command, model, base_url, *extra],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    if result.returncode != 0:
        return {"error": (result.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def import_ms(subject: str, runs: int) -> float:
    code = subjects.IMPORTS[subject]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=ENV)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if key in r]
    return statistics.median(values) if values else None


def run_streams(args: argparse.Namespace, server: _wire.Server) -> dict[tuple[str, str], dict]:
    """Each stream on each wire, printed as it ends; the rows by (stream, wire)."""
    tables: dict[tuple[str, str], dict] = {}
    for stream in args.streams:
        n = args.events if stream == "text" and args.events else SIZES[stream]
        model = STREAMS[stream].format(n=n)
        for shape in args.wires:
            if stream == "tool" and shape == "gemini":
                continue
            names = [s for s in args.subjects if shape in subjects.SHAPES[s]]
            if stream == "tool":
                names = [s for s in names if s not in subjects.TEXT_ONLY]
            rows: dict[str, list[dict]] = {s: [] for s in names}
            for _ in range(args.rounds):
                for name in names:
                    rows[name].append(measure(name, shape, model, server.base_url, []))
                _ratios(rows, names)
            _print_table(f"{stream} ({model}, {shape} shape, {n} events)", rows)
            tables[(stream, shape)] = rows
    return tables


def _ratios(rows: dict[str, list[dict]], names: list[str]) -> None:
    """Each subject's CPU over the raw aiohttp baselines' of the same round."""
    for key, baseline in (("ratio", "raw_aiohttp"), ("ratio_lines", "raw_aiohttp_lines")):
        base = rows.get(baseline, [{}])[-1].get("cpu_us")
        for name in names:
            last = rows[name][-1]
            if base and "cpu_us" in last:
                last[key] = last["cpu_us"] / base


_COLUMNS = (("wall_us", ".1f"), ("cpu_us", ".1f"), ("ratio", ".2f"), ("ratio_lines", ".2f"),
            ("rss_mib", ".0f"))  # fmt: skip


def _cell(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _print_table(title: str, rows: dict[str, list[dict]]) -> None:
    print(f"\n### {title}\n")
    print("| subject | wall µs/event | CPU µs/event | CPU ÷ raw aiohttp (bytes) | (lines) "
          "| peak RSS MiB |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, runs in rows.items():
        errors = [r["error"] for r in runs if "error" in r]
        if errors:
            print(f"| {name} | failed: {errors[0]} | | | | |")
            continue
        cells = [_cell(_median(runs, k), f) for k, f in _COLUMNS]
        print(f"| {name} | {' | '.join(cells)} |")
    sys.stdout.flush()


def run_concurrent(args: argparse.Namespace, server: _wire.Server) -> None:
    """Every subject's streams share one client, its pool and admission cap = the streams."""
    names = [s for s in ("raw_aiohttp", "raw_httpx", "ours_aiohttp", "ours_httpx")
             if s in args.subjects]  # fmt: skip
    model = f"text-{args.stream_events}-0"
    rows: dict[str, list[dict]] = {s: [] for s in names}
    extra = ["--streams", str(args.concurrent)]
    for _ in range(args.rounds):
        for name in names:
            rows[name].append(measure(name, "chat", model, server.base_url, extra))
        _concurrent_ratios(rows, names)
    print(f"\n### {args.concurrent} concurrent streams of {args.stream_events} events (chat)\n")
    print("| subject | CPU µs/event | ÷ raw aiohttp | first event p50 ms | p99 ms | p99 ÷ raw "
          "aiohttp | all done s | KiB/stream |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    keys = ("cpu_us", "ratio", "ttfe_p50", "ttfe_p99", "ratio_p99", "wall_s", "kib")
    specs = (".1f", ".2f", ".0f", ".0f", ".2f", ".2f", ".0f")
    for name, runs in rows.items():
        errors = [r["error"] for r in runs if "error" in r]
        if errors:
            print(f"| {name} | failed: {errors[0]} | | | | | | |")
            continue
        cells = [_cell(_median(runs, k), f) for k, f in zip(keys, specs, strict=True)]
        print(f"| {name} | {' | '.join(cells)} |")
    sys.stdout.flush()


def _concurrent_ratios(rows: dict[str, list[dict]], names: list[str]) -> None:
    """CPU per event and p99 time to first event over raw aiohttp's of the same round."""
    base = rows.get("raw_aiohttp", [{}])[-1]
    for name in names:
        last = rows[name][-1]
        for key, of in (("ratio", "cpu_us"), ("ratio_p99", "ttfe_p99")):
            if base.get(of) and of in last:
                last[key] = last[of] / base[of]


def run_imports(args: argparse.Namespace) -> None:
    print("\n### import time (median of fresh interpreters)\n")
    print("| subject | import | over bare Python |")
    print("|---|---|---|")
    bare = _bare_ms()
    for name in args.subjects:
        ms = import_ms(name, args.import_runs)
        print(f"| {name} | {ms:.0f} ms | +{ms - bare:.0f} ms |")


def _bare_ms() -> float:
    times = []
    for _ in range(7):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subjects", nargs="*", default=None, help="default: all")
    parser.add_argument("--streams", nargs="*", default=list(STREAMS), choices=list(STREAMS))
    parser.add_argument("--wires", nargs="*", default=list(subjects.WIRES),
                        choices=list(subjects.WIRES))  # fmt: skip
    parser.add_argument("--events", type=int, default=0, help="deltas of the text stream")
    parser.add_argument("--concurrent", type=int, default=0, help="e.g. 1000 (0: skip)")
    parser.add_argument("--stream-events", type=int, default=200)
    parser.add_argument("--import-runs", type=int, default=0, help="e.g. 7 (0: skip)")
    parser.add_argument("--readme", action="store_true",
                        help="README's table: its subjects, chat text and paced")  # fmt: skip
    args = parser.parse_args()
    if args.readme:
        args.wires, args.streams = ["chat"], ["text", "paced"]
        args.subjects = args.subjects or list(_readme_table.SUBJECTS)
    args.subjects = args.subjects or list(subjects.SHAPES)
    missing = [s for s in args.subjects if s not in subjects.SHAPES]
    if missing:
        parser.error(f"unknown subjects {missing}; known: {list(subjects.SHAPES)}")
    load = os.getloadavg()[0]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {load:.1f}; "
          f"Python {platform.python_version()}; {when}")  # fmt: skip
    print("versions:", subjects.versions())
    server = _wire.start()
    try:
        tables = run_streams(args, server)
        if args.concurrent:
            run_concurrent(args, server)
    finally:
        server.close()
    if args.import_runs:
        run_imports(args)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    if args.readme:
        print("\nREADME.md's table (Benchmarks):\n")
        print(_readme_table.table(tables[("text", "chat")], tables[("paced", "chat")],
                                  when=when, loads=(load, os.getloadavg()[0]),
                                  rounds=args.rounds))  # fmt: skip


if __name__ == "__main__":
    main()
