"""Time of `python -c "import llm_worker"` against `python -c "pass"`, in fresh processes.

Run: `uv run python benchmarks/bench_import.py [--runs 15]`

Each command runs `--runs` times in a new interpreter (the same one that runs this script);
the median wall time is reported, so a run disturbed by other load on the machine does not
count. Target: `import llm_worker` under 150 ms in all. Also shown: what the first use of a
provider client adds (`from llm_worker.providers import OpenAIChatClient`), and a first client
built on each transport (which loads httpx, or aiohttp and never httpx).
"""

from __future__ import annotations

import argparse
import resource
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
    "+ a first client on httpx": (
        "from llm_worker.providers import OpenAIChatClient; "
        "OpenAIChatClient(model='m', api_key='k')"
    ),
    "+ a first client on aiohttp": (
        "from llm_worker.providers import OpenAIChatClient; "
        "OpenAIChatClient(model='m', api_key='k', transport='aiohttp')"
    ),
}


def median_ms(code: str, runs: int) -> float:
    times: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        before = _children_cpu()
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((_children_cpu() - before) * 1000)
    CPU_MS[code] = statistics.median(cpu)
    return statistics.median(times)


# The interpreters' own CPU time (user + system): on a loaded machine, wall time also counts
# the waits for a core; CPU time does not.
CPU_MS: dict[str, float] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    median_ms("import llm_worker", 2)  # warm the file cache and the .pyc files
    results = {label: median_ms(code, args.runs) for label, code in COMMANDS.items()}
    base = results["python -c pass"]
    base_cpu = CPU_MS["pass"]
    for label, ms in results.items():
        extra = "" if label == "python -c pass" else f"  (+{ms - base:5.1f} ms over bare Python)"
        cpu = CPU_MS[COMMANDS[label]]
        print(f"{label:38} median {ms:6.1f} ms{extra}; CPU {cpu:6.1f} ms (+{cpu - base_cpu:5.1f})")
    total = results["import llm_worker"]
    print(f"target: import llm_worker < 150 ms: {'met' if total < 150 else 'NOT met'}")
    for label in ("+ a first client on httpx", "+ a first client on aiohttp"):
        over = CPU_MS[COMMANDS[label]] - base_cpu
        print(
            f"target: {label} < 100 ms CPU over bare Python: {'met' if over < 100 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
