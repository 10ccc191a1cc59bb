"""`benchmarks/issue39.py`'s pure parts: the verdict on a bound, and reading the benchmarks' output.

The measurements themselves take minutes (they are run by hand, docs/benchmarks.md); this
proves that a run's figures turn into the right verdicts, not any figure.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def issue39() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:  # by name: the benchmarks folder is not on the path of the type checker
        return importlib.import_module("issue39")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_a_bound_is_settled_only_when_every_round_is_on_one_side_of_it(
    issue39: ModuleType,
) -> None:
    def verdict(*values: float) -> str:
        return issue39.Figure("2", "chat bulk", values, 1.5).verdict

    assert verdict(1.41, 1.46, 1.5) == "met"
    assert verdict(1.51, 1.7, 1.52) == "not met"
    assert verdict(1.43, 1.48, 1.54) == "unsettled"
    assert verdict() == "no figure"
    line = issue39.Figure("2", "chat bulk", (1.54, 1.43, 1.48), 1.5).line()
    assert line == "| 2 | chat bulk | 1.480x (1.430-1.540) | ≤ 1.5x | **unsettled** |"
    check = issue39.Check("1", "the default's library", "httpx", "aiohttp").line()
    assert check.endswith("| httpx | aiohttp | **not met** |")


def test_the_serve_benchmarks_waves_are_read_per_run(issue39: ModuleType) -> None:
    # bench_serve.py's lines as it prints them (f-strings of `main`), 1,000 runs.
    text = (
        "1000 concurrent runs through `llm-worker serve --protocol vercel`, 100 deltas each, "
        "one shared client; load 0.80\n"
        "wave 1: idle 56.0 MiB, held 130.2 MiB, peak 138.5 MiB, after 136.1 MiB (trimmed "
        "122.0 MiB): 0.082 MiB per run, 80.1 MiB left, 44.6 MiB after 20 s; 14.2 s\n"
        "wave 2: idle 100.6 MiB, held 110.0 MiB, peak 142.6 MiB, after 115.2 MiB (trimmed "
        "114.9 MiB): 0.041 MiB per run, 14.6 MiB left, 28.3 MiB after 20 s; 12.9 s\n"
        "per run (the worst wave): 0.082 MiB\n"
    )
    per_run, kept = issue39.parse_serve(text, 1000)
    assert per_run.values == (0.082, 0.041)
    assert per_run.verdict == "met"
    assert kept.values == pytest.approx((28.3 * 1024 / 1000,))
    assert kept.verdict == "met"  # 29 KiB a run, under a tenth of 0.5 MiB
    leaking = text.replace("28.3 MiB after", "90.0 MiB after")
    assert issue39.parse_serve(leaking, 1000)[1].verdict == "not met"
    (nothing,) = issue39.parse_serve("Traceback …", 1000)
    assert nothing.verdict == "no figure"


def test_the_encoders_ratios_are_read_timed_or_counted(issue39: ModuleType) -> None:
    timed = (
        "Worker.stream: 1523 events, 5.10 ms per turn (median)\n"
        "Vercel UI stream: 1530 SSE events, 6.38 ms per turn, ratio 1.25 (rounds 1.19-1.31; "
        "0.84 µs per Worker event)\n"
        "AG-UI: 1530 SSE events, 6.50 ms per turn, ratio 1.27 (rounds 1.22-1.35; 0.92 µs per "
        "Worker event)\n"
    )
    vercel, agui = issue39.parse_ui(timed)
    assert (vercel.values, vercel.verdict) == ((1.19, 1.25, 1.31), "unsettled")
    assert (agui.values, agui.verdict) == ((1.22, 1.27, 1.35), "not met")
    counted = "Worker.stream: 9.10 M instructions per turn\nAG-UI: 11.57 M per turn, ratio 1.272\n"
    (only,) = issue39.parse_ui(counted)
    assert (only.what, only.values) == ("AG-UI encoder ÷ Worker.stream", (1.272,))
