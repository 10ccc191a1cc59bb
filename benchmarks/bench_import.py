"""Time of `python -c "import llm_worker"` against `python -c "pass"`, in fresh processes.

Run: `uv run python benchmarks/bench_import.py [--runs 15]`

Each command runs `--runs` times in a new interpreter (the same one that runs this script),
the commands in turn within each round; the median wall and CPU time are reported, so a run
disturbed by other load on the machine does not count. Target: `import llm_worker` under 150
ms in all. Also shown: what the first use of a provider client adds (`from llm_worker.providers
import OpenAIChatClient`), a first client built on each transport and on the default (the
HTTP library is imported at its first request, not here), and that first request (to a closed
local port: the imports, the HTTP client, one refused connection) against a bare asyncio
program, on httpx with and without its command line (`import httpx` loads click, rich and
pygments when they are installed, as in this project's environment; a plain install has none
of them), on aiohttp and on the default (`"auto"`: aiohttp under asyncio).

The children import from bytecode, as after `pip install` (which compiles every module when it
installs): `uv sync` does not compile, and where `PYTHONDONTWRITEBYTECODE` is set (as on the
project's machine) every import then compiles its module's source again, so a figure measured
the compiler more than the import (`import aiohttp`: about twice the CPU). The bytecode goes
to a folder of this run (`PYTHONPYCACHEPREFIX`), written by a warm-up round, so neither the
checkout nor the environment is touched. `--no-bytecode` measures as before (a fresh compile
at each import: an install that never wrote bytecode).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

_CLIENT = (
    "from llm_worker.providers import OpenAIChatClient, RetryPolicy\n"
    "c = OpenAIChatClient(model='m', api_key='k', base_url='http://127.0.0.1:9/v1', "
    "retry=RetryPolicy.disabled(), transport={transport!r})\n"
)
_REQUEST = """import asyncio
from llm_worker import Message, Request

async def first():
    try:
        async for _ in c.stream(Request([Message.user("hi")])):
            pass
    except Exception:
        pass
    await c.aclose()

asyncio.run(first())
"""
# As a plain install of httpx: its command line (click, rich, pygments) is not there.
_NO_CLI = "import sys; sys.modules['click'] = None\n"
ASYNCIO = "import asyncio; asyncio.run(asyncio.sleep(0))"

COMMANDS = {
    "python -c pass": "pass",
    "import llm_worker": "import llm_worker",
    "import llm_worker + OpenAIChatClient": (
        "import llm_worker; from llm_worker.providers import OpenAIChatClient"
    ),
    "+ a first client on httpx": "import llm_worker\n" + _CLIENT.format(transport="httpx"),
    "+ a first client on aiohttp": "import llm_worker\n" + _CLIENT.format(transport="aiohttp"),
    "+ a first client, the default": "import llm_worker\n" + _CLIENT.format(transport=None),
    "import httpx": "import httpx",
    "import httpx (no CLI)": _NO_CLI + "import httpx",
    "import aiohttp": "import aiohttp",
    "a bare asyncio program": ASYNCIO,
    "+ llm_worker, a client, its first request, httpx": _CLIENT.format(transport="httpx")
    + _REQUEST,
    "+ llm_worker, a client, its first request, httpx (no CLI)": _NO_CLI
    + _CLIENT.format(transport="httpx")
    + _REQUEST,
    "+ llm_worker, a client, its first request, aiohttp": _CLIENT.format(transport="aiohttp")
    + _REQUEST,
    # A plain install's default under asyncio ("auto": aiohttp there).
    "+ llm_worker, a client, its first request, the default": _CLIENT.format(transport=None)
    + _REQUEST,
}
CLIENTS = (
    "+ a first client on httpx",
    "+ a first client on aiohttp",
    "+ a first client, the default",
)
REQUESTS = tuple(label for label in COMMANDS if "first request" in label)


# The children's environment (`main` sets where their bytecode goes).
ENV: dict[str, str] = dict(os.environ)


def one_run(code: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of `code` in a fresh interpreter."""
    before = _children_cpu()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    return (time.perf_counter() - start) * 1000, (_children_cpu() - before) * 1000


def with_bytecode(folder: str) -> None:
    """Children write and read bytecode in `folder`: imports as after `pip install`."""
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = folder
    for code in COMMANDS.values():  # the warm-up round writes every module's bytecode
        one_run(code)


def medians(runs: int) -> dict[str, float]:
    """Each command once per round, the commands in turn, so load falls on all of them alike.

    Returns the median wall time per label; the median CPU time goes to `CPU_MS`.
    """
    wall: dict[str, list[float]] = {label: [] for label in COMMANDS}
    cpu: dict[str, list[float]] = {label: [] for label in COMMANDS}
    for _ in range(runs):
        for label, code in COMMANDS.items():
            ms, cpu_ms = one_run(code)
            wall[label].append(ms)
            cpu[label].append(cpu_ms)
    for label, code in COMMANDS.items():
        CPU_MS[code] = statistics.median(cpu[label])
    return {label: statistics.median(times) for label, times in wall.items()}


# The interpreters' own CPU time (user + system): on a loaded machine, wall time also counts
# the waits for a core; CPU time does not.
CPU_MS: dict[str, float] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--no-bytecode", action="store_true", help="compile every module at each import"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-pyc-") as folder:
        if args.no_bytecode:
            ENV["PYTHONDONTWRITEBYTECODE"] = "1"
            ENV.pop("PYTHONPYCACHEPREFIX", None)
        else:
            with_bytecode(folder)
        for _ in range(2):  # warm the file cache
            one_run("import llm_worker")
        results = medians(args.runs)
    print("bytecode:", "none (compiled at each import)" if args.no_bytecode else "read")
    for label, ms in results.items():
        base = "a bare asyncio program" if label in REQUESTS else "python -c pass"
        cpu, base_cpu = CPU_MS[COMMANDS[label]], CPU_MS[COMMANDS[base]]
        extra = "" if label == base else f"  (+{ms - results[base]:5.1f} ms over {base})"
        print(f"{label:58} median {ms:6.1f} ms{extra}; CPU {cpu:6.1f} ms (+{cpu - base_cpu:5.1f})")
    total = results["import llm_worker"]
    print(f"target: import llm_worker < 150 ms: {'met' if total < 150 else 'NOT met'}")
    for label in CLIENTS:
        over = CPU_MS[COMMANDS[label]] - CPU_MS["pass"]
        verdict = "met" if over < 100 else "NOT met"
        print(f"target: {label} < 100 ms CPU over bare Python: {verdict}")


if __name__ == "__main__":
    main()
