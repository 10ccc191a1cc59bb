"""The 1,000-stream shape by instructions: CPU per stream of Chat deltas, ours over raw aiohttp.

`uv run --group bench python benchmarks/count_streams.py [--events 200] [--streams 100]
[--subjects raw_aiohttp ours_default]` runs `_peer_subjects.py SUBJECT chat text-E-0 URL
--streams S` (S streams at once on one loop, as peers.py's `--concurrent` runs them) under
valgrind's callgrind with S and 2S streams, against `_wire.py`'s server in its own process,
and prints the difference over S: the instructions of one stream of E deltas, start-up,
imports and the warm-up stream cancelled. Instruction counts do not depend on the machine's
load (timed figures under load move by more than most cuts); `PYTHONHASHSEED=0` and
`setarch -R` (when present) keep the hashes and addresses of two runs alike. `--events 1`
gives the per-stream fixed cost.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _wire

HERE = Path(__file__).parent


def count(subject: str, events: int, streams: int, base_url: str) -> int:
    """Instructions of one `_peer_subjects.py` run of `streams` streams of `events` deltas."""
    command = [sys.executable, str(HERE / "_peer_subjects.py"), subject, "chat",
               f"text-{events}-0", base_url, "--streams", str(streams)]  # fmt: skip
    grind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    fixed = ["setarch", "-R"] if shutil.which("setarch") else []
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [*fixed, *grind, *command], capture_output=True, text=True, env=env, check=False
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise RuntimeError(f"{subject}: no instruction count: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description="The 1,000-stream shape by instructions")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--subjects", nargs="+", default=["raw_aiohttp", "ours_default"])
    args = parser.parse_args()
    server = _wire.start()
    try:
        per_stream = {}
        for subject in args.subjects:
            once, twice = (count(subject, args.events, k, server.base_url)
                           for k in (args.streams, 2 * args.streams))  # fmt: skip
            per_stream[subject] = (twice - once) / args.streams
            print(f"{subject}: {per_stream[subject]:,.0f} instructions a stream of "
                  f"{args.events} deltas ({per_stream[subject] / args.events:,.0f} a delta)",
                  flush=True)  # fmt: skip
    finally:
        server.close()
    first, *rest = args.subjects
    for subject in rest:
        print(f"{subject} ÷ {first}: {per_stream[subject] / per_stream[first]:.3f}x")


if __name__ == "__main__":
    main()
