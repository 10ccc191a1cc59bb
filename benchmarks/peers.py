"""llm-worker against raw HTTP baselines and the libraries users would pick instead.

Run (the peers come from the `bench` dependency group, never from the runtime ones):

    uv sync --group bench
    uv run --group bench python benchmarks/peers.py --rounds 3

One local server (`_wire.py`, a child process) serves the same streams in the four wire
shapes (`--wires`: Chat Completions, Anthropic, OpenAI Responses, Gemini): `text` (20,000
text deltas in one write), `paced` (2,000 deltas, one per millisecond, so one per network
read) and `tool` (a tool call whose arguments come in 200 fragments; not on Gemini, which
sends a call whole). Each round starts every subject in a fresh interpreter, warms each up
with one whole stream, then takes `--samples` measurements of each, in turn (A B A B …):
the machine's slow spells, which come and go over seconds and slow every subject by the same
factor, then fall on a subject and the limit alike. Reported per subject: µs per event of
wall and CPU time (the median of the samples, then of the rounds), the CPU ratio to raw
aiohttp + orjson (per sample, paired with the limit's next to it; the median of a round's
pairs; over the rounds their median and min-max, so a reader sees whether a bound is
settled), the peak RSS, and `python -c "import X"` time. `--pin` keeps the server on a CPU
of its own (os.sched_setaffinity), the subjects on the others.
`--concurrent` adds 1,000 concurrent streams of 200 events on one event loop (our clients and
the raw baselines): CPU per event, time to first event p50/p99, memory per stream.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _peer_subjects as subjects
import _readme_table
import _wire

STREAMS = {"text": "text-{n}-0", "paced": "text-{n}-1", "tool": "tool-{n}-0"}
SIZES = {"text": 20_000, "paced": 2_000, "tool": 200}
# Measurements per subject and round (`--samples` sets them all). A bulk stream is ~50 ms of
# CPU, a paced one 2 s of wall time, 1,000 concurrent streams about a second; with fewer
# bulk samples a round's ratio still swings by 0.2-1.0 under load (docs/benchmarks.md,
# "steady timed ratios").
SAMPLES = {"text": 15, "paced": 5, "tool": 15, "concurrent": 5}
# How long a warm-up or one measurement may take before its subject counts as failed.
WAIT = 600.0
# litellm fetches a price list from GitHub at import unless told to use its own copy.
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


class Live:
    """One subject's interpreter of a round: warmed up, then measured once per `take`."""

    def __init__(self, subject: str, shape: str, model: str, base_url: str, extra: list[str]):
        script = str(Path(__file__).parent / "_peer_subjects.py")
        command = [sys.executable, script, subject, shape, model, base_url, "--serve", *extra]
        self.name = subject
        self.error: str | None = None
        # Its stderr to a file, closed by `close`: a pipe nobody reads could fill and stall it.
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log, text=True, env=ENV)  # fmt: skip

    def ready(self) -> None:
        """Wait for the warm-up to end (or the child to fail)."""
        if self._line() != "ready" and self.error is None:
            self._fail()

    def take(self) -> dict:
        """One measurement, or `{"error": …}` once the child has failed."""
        if self.error is None:
            assert self._process.stdin is not None
            try:
                self._process.stdin.write("go\n")
                self._process.stdin.flush()
            except OSError:
                self._fail()
            line = self._line()
            if line.startswith("{"):
                return json.loads(line)
            self._fail()
        return {"error": self.error}

    def close(self) -> None:
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()

    def _line(self) -> str:
        """The child's next line; a child silent for `WAIT` seconds has failed (killed)."""
        stdout = self._process.stdout
        assert stdout is not None
        if self.error is not None:
            return ""
        # One line per request and nothing more, so none waits in the reader's buffer unseen.
        if not select.select([stdout], [], [], WAIT)[0]:
            self._fail(f"no answer in {WAIT:g} s")
            return ""
        return stdout.readline().strip()

    def _fail(self, why: str | None = None) -> None:
        self._process.kill()
        self._process.wait()
        self._log.seek(0)
        self.error = why or ((self._log.read().strip().splitlines() or ["?"])[-1])[:120]


def one_round(names: list[str], spec: tuple[str, str, str], extra: list[str],
              samples: int, turn: int) -> dict[str, list[dict]]:  # fmt: skip
    """Every subject in a fresh interpreter, all alive at once; `samples` measurements each.

    The measurements go A B A B …: a subject's k-th sample is next in time to every other
    subject's k-th, so a slow spell of the machine (it comes and goes over seconds here, the
    same factor on every subject) falls on a pair alike and its ratio keeps steady. The
    order rotates from one sample to the next and from round to round, so that no subject
    always runs right after the same other one.
    """
    shape, model, base_url = spec
    live = [Live(name, shape, model, base_url, extra) for name in names]
    try:
        for one in live:
            one.ready()
        taken: dict[str, list[dict]] = {name: [] for name in names}
        for k in range(samples):
            shift = (turn + k) % len(live)
            for one in live[shift:] + live[:shift]:
                taken[one.name].append(one.take())
        return taken
    finally:
        for one in live:
            one.close()


def summary(taken: dict[str, list[dict]], keys: tuple[str, ...]) -> dict[str, dict]:
    """A round's row per subject: the median of its samples, ratios paired sample by sample.

    `ratio` is the median over k of (the subject's k-th CPU per event ÷ raw aiohttp's k-th),
    `ratio_lines` the same over `raw_aiohttp_lines`, `ratio_p99` over raw aiohttp's p99
    time to first event; `kib` (memory per concurrent stream) is the first measurement's,
    the only one whose peak is its own.
    """
    rows: dict[str, dict] = {}
    for name, samples in taken.items():
        good = [s for s in samples if "error" not in s]
        if not good:
            rows[name] = samples[0]
            continue
        row = {key: statistics.median(s[key] for s in good) for key in keys if key in good[0]}
        row["samples"] = [s["cpu_us"] for s in good]
        if "kib" in good[0]:
            row["kib"] = good[0]["kib"]
        rows[name] = row
    for key, base, of in (("ratio", "raw_aiohttp", "cpu_us"),
                          ("ratio_lines", "raw_aiohttp_lines", "cpu_us"),
                          ("ratio_p99", "raw_aiohttp", "ttfe_p99")):  # fmt: skip
        for name, samples in taken.items():
            pairs = _pairs(samples, taken.get(base, []), of)
            if pairs and "error" not in rows[name]:
                rows[name][key] = statistics.median(pairs)
    return rows


def _pairs(samples: list[dict], base: list[dict], of: str) -> list[float]:
    return [s[of] / b[of] for s, b in zip(samples, base, strict=False) if s.get(of) and b.get(of)]


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
        samples = args.samples or SAMPLES[stream]
        for shape in args.wires:
            if stream == "tool" and shape == "gemini":
                continue
            names = [s for s in args.subjects if shape in subjects.SHAPES[s]]
            if stream == "tool":
                names = [s for s in names if s not in subjects.TEXT_ONLY]
            rows: dict[str, list[dict]] = {s: [] for s in names}
            for turn in range(args.rounds):
                taken = one_round(names, (shape, model, server.base_url), args.child, samples, turn)
                for name, row in summary(taken, _STREAM_KEYS).items():
                    rows[name].append(row)
            title = f"{stream} ({model}, {shape} shape, {n} events, {samples} samples a round)"
            _print_table(title, rows)
            tables[(stream, shape)] = rows
    return tables


_STREAM_KEYS = ("wall_us", "cpu_us", "rss_mib")


def spread(runs: list[dict], key: str) -> str:
    """`median (min-max)` of a key over the rounds, or `—`."""
    values = [r[key] for r in runs if key in r]
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


_COLUMNS = (("wall_us", ".1f"), ("cpu_us", ".1f"), ("ratio", ""), ("ratio_lines", ""),
            ("rss_mib", ".0f"))  # fmt: skip


def _cell(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _print_table(title: str, rows: dict[str, list[dict]]) -> None:
    print(f"\n### {title}\n")
    print("| subject | wall µs/event | CPU µs/event | CPU ÷ raw aiohttp (bytes), median "
          "(min-max) of the rounds | (lines) | peak RSS MiB |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, runs in rows.items():
        errors = [r["error"] for r in runs if "error" in r]
        if errors:
            print(f"| {name} | failed: {errors[0]} | | | | |")
            continue
        cells = [_cell(_median(runs, k), f) if f else spread(runs, k) for k, f in _COLUMNS]
        print(f"| {name} | {' | '.join(cells)} |")
    sys.stdout.flush()


def run_concurrent(args: argparse.Namespace, server: _wire.Server) -> dict[str, list[dict]]:
    """Every subject's streams share one client, its pool and admission cap = the streams."""
    names = [s for s in ("raw_aiohttp", "raw_httpx", "ours_aiohttp", "ours_httpx", "ours_default")
             if s in args.subjects]  # fmt: skip
    model = f"text-{args.stream_events}-0"
    rows: dict[str, list[dict]] = {s: [] for s in names}
    extra = [*args.child, "--streams", str(args.concurrent)]
    samples = args.samples or SAMPLES["concurrent"]
    for turn in range(args.rounds):
        taken = one_round(names, ("chat", model, server.base_url), extra, samples, turn)
        for name, row in summary(taken, _MANY_KEYS).items():
            rows[name].append(row)
    print(f"\n### {args.concurrent} concurrent streams of {args.stream_events} events (chat), "
          f"{samples} samples a round\n")  # fmt: skip
    print("| subject | CPU µs/event | ÷ raw aiohttp, median (min-max) | first event p50 ms "
          "| p99 ms | p99 ÷ raw aiohttp | all done s | KiB/stream |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    keys = ("cpu_us", "ratio", "ttfe_p50", "ttfe_p99", "ratio_p99", "wall_s", "kib")
    specs = (".1f", "", ".0f", ".0f", "", ".2f", ".0f")
    for name, runs in rows.items():
        errors = [r["error"] for r in runs if "error" in r]
        if errors:
            print(f"| {name} | failed: {errors[0]} | | | | | | |")
            continue
        cells = [_cell(_median(runs, k), f) if f else spread(runs, k)
                 for k, f in zip(keys, specs, strict=True)]  # fmt: skip
        print(f"| {name} | {' | '.join(cells)} |")
    sys.stdout.flush()
    return rows


_MANY_KEYS = ("cpu_us", "ttfe_p50", "ttfe_p99", "wall_s", "rss_mib")


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


def pin(server: _wire.Server, wanted: bool) -> list[str]:
    """With `--pin`, the server's own CPU and the subjects' options that keep them off it."""
    cpus = sorted(os.sched_getaffinity(0))
    if not wanted or len(cpus) < 2:
        return []
    os.sched_setaffinity(server.pid, {cpus[-1]})
    print(f"pinned: the server on CPU {cpus[-1]}, the subjects on CPU {cpus[0]}")
    return ["--cpu", str(cpus[0])]


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
    parser.add_argument("--samples", type=int, default=0,
                        help=f"measurements per subject and round (default {SAMPLES})")  # fmt: skip
    parser.add_argument("--pin", action="store_true",
                        help="the server on the last CPU, the subjects on the others")  # fmt: skip
    parser.add_argument("--readme", action="store_true",
                        help="README's table: its subjects, chat text and paced")  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 1 or args.samples < 0:
        parser.error("--rounds must be at least 1, --samples at least 0 (0: the defaults)")
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
    args.child = pin(server, args.pin)
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
