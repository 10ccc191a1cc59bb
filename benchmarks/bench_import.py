"""Time of `python -c "import llm_worker"` against `python -c "pass"`, in fresh processes.

Run: `uv run python benchmarks/bench_import.py [--runs 15]`

Each command runs `--runs` times in a new interpreter (the same one that runs this script);
the median wall time is reported, so a run disturbed by other load on the machine does not
count. Target: `import llm_worker` under 150 ms in all. Also shown: what the first use of a
provider client adds (`from llm_worker.providers import OpenAIChatClient`, which loads httpx).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": "pass",
    "import llm_worker": "import llm_worker",
    "import llm_worker + OpenAIChatClient": (
        "import llm_worker; from llm_worker.providers import OpenAIChatClient"
    ),
}


def median_ms(code: str, runs: int) -> float:
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    median_ms("import llm_worker", 2)  # warm the file cache and the .pyc files
    results = {label: median_ms(code, args.runs) for label, code in COMMANDS.items()}
    base = results["python -c pass"]
    for label, ms in results.items():
        extra = "" if label == "python -c pass" else f"  (+{ms - base:5.1f} ms over bare Python)"
        print(f"{label:38} median {ms:6.1f} ms{extra}")
    total = results["import llm_worker"]
    print(f"target: import llm_worker < 150 ms: {'met' if total < 150 else 'NOT met'}")


if __name__ == "__main__":
    main()
