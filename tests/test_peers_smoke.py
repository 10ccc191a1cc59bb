"""`benchmarks/peers.py` still runs: tiny sizes, our clients and the raw baselines only.

The peers themselves (the `bench` group) and the full sizes are far too slow for the suite;
this proves the script, its server and its subjects work, not any figure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).parent.parent / "benchmarks" / "peers.py"
SUBJECTS = ["raw_aiohttp", "ours_aiohttp", "ours_httpx", "worker_aiohttp"]


@pytest.mark.timeout(240)  # sixteen fresh interpreters, on a machine that may be loaded
def test_the_peer_benchmark_measures_every_subject_it_is_given() -> None:
    command = [sys.executable, str(PEERS), "--rounds", "1", "--events", "50",
               "--streams", "text", "--subjects", *SUBJECTS]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=220, check=True)
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert not [row for row in rows if "failed" in row]
    measured = {row.split(" | ")[0].removeprefix("| ") for row in rows}
    assert set(SUBJECTS) <= measured
    # one row a wire: Chat Completions, Anthropic, OpenAI Responses, Gemini
    assert sum(row.startswith("| worker_aiohttp |") for row in rows) == 4
