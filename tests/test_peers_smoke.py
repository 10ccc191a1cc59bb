"""`benchmarks/peers.py` still runs: tiny sizes, our clients and the raw baselines only.

The peers themselves (the `bench` group) and the full sizes are far too slow for the suite;
this proves the script, its server and its subjects work, not any figure.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).parent.parent / "benchmarks" / "peers.py"
SUBJECTS = ["raw_aiohttp", "ours_aiohttp", "ours_httpx", "worker_aiohttp"]


@pytest.mark.timeout(240)  # sixteen fresh interpreters, on a machine that may be loaded
def test_the_peer_benchmark_measures_every_subject_it_is_given() -> None:
    command = [sys.executable, str(PEERS), "--rounds", "1", "--events", "50",
               "--streams", "text", "--samples", "2", "--subjects", *SUBJECTS]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=220, check=True)
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert not [row for row in rows if "failed" in row]
    measured = {row.split(" | ")[0].removeprefix("| ") for row in rows}
    assert set(SUBJECTS) <= measured
    # one row a wire: Chat Completions, Anthropic, OpenAI Responses, Gemini
    assert sum(row.startswith("| worker_aiohttp |") for row in rows) == 4


def test_the_readme_table_is_printed_from_the_runs_rows() -> None:
    # `peers.py --readme` prints README.md's table from its run's rows (the default's, built
    # without transport=, against the limit); the header is the README's, so a pasted refresh
    # replaces the table as it is. (Its subjects run in the test above's way; the paced
    # stream is too slow for the suite.)
    sys.path.insert(0, str(PEERS.parent))
    try:  # by name: the benchmarks folder is not on the path of the type checker
        _peer_subjects = importlib.import_module("_peer_subjects")
        _readme_table = importlib.import_module("_readme_table")
    finally:
        sys.path.remove(str(PEERS.parent))
    assert set(_readme_table.SUBJECTS) <= set(_peer_subjects.SHAPES)
    text = {
        "raw_aiohttp": [{"cpu_us": 2.0, "ratio": 1.0}, {"cpu_us": 4.0, "ratio": 1.0}],
        "ours_default": [{"cpu_us": 3.0, "ratio": 1.5}, {"cpu_us": 6.0, "ratio": 1.7}],
        "litellm": [{"error": "ImportError"}],
    }
    paced = {"raw_aiohttp": [{"cpu_us": 100.0, "ratio": 1.0}],
             "ours_default": [{"cpu_us": 110.0, "ratio": 1.1}]}  # fmt: skip
    table = _readme_table.table(text, paced, when="then", loads=(1.0, 2.0), rounds=2).split("\n")
    assert "benchmarks/peers.py --readme`, then at main `" in table[0]
    assert "median of 2 rounds; load average 1.0 at the start, 2.0 at the end" in table[0]
    assert table[2] in (PEERS.parent.parent / "README.md").read_text()  # the header row
    assert table[4:] == [
        "| the limit: raw aiohttp, split by hand + orjson | 3.0 | 1.00 | 100.0 | 1.00 |",
        "| **llm-worker `OpenAIChatClient`, the default** | **4.5** | **1.60** | **110.0** "
        "| **1.10** |",
        "| litellm, `acompletion(stream=True)` | — | — | — | — |",
    ]
