"""What a durable run costs over a plain one, per step and per run.

Run: `uv run python benchmarks/bench_durable.py [--postgres postgresql://user@host:port]
[--runs 5] [--requests 20]`

A run of N requests (each answer but the last calls one read-only tool: 2N-1 steps) through
`Worker.run` and through `DurableWorker.run`, both on `ScriptedClient` (no network). The
per-step overhead is the slope between a 1-request and an N-request run, so the fixed cost of
a durable run (queueing, waiting for the result) is reported apart. Median of `--runs`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.testing import ScriptedClient, ScriptedResponse


@tool(effect="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def script(requests: int) -> list[ScriptedResponse]:
    calls = [
        ScriptedResponse([ToolUsePart(f"c{i}", "lookup", {"key": f"k{i}"})])
        for i in range(requests - 1)
    ]
    return [*calls, ScriptedResponse.text("done " * 50)]


async def plain(requests: int) -> float:
    worker = Worker(ScriptedClient(script(requests)), tools=[lookup])
    start = time.perf_counter()
    await worker.run("go")
    return time.perf_counter() - start


async def durable(durable: DurableWorker, client: ScriptedClient, requests: int) -> float:
    client.add(*script(requests))
    start = time.perf_counter()
    await durable.run("go", run_id=uuid.uuid4().hex)
    return time.perf_counter() - start


async def measure(url: str, requests: int, runs: int) -> tuple[float, float]:
    """(per-step overhead, fixed per-run overhead), in seconds."""
    client = ScriptedClient([])
    worker = Worker(client, tools=[lookup])
    async with DurableWorker(worker, name="bench", database_url=url, poll_interval=0.01) as d:
        await durable(d, client, 1)  # warm up: the queue's first dispatch, connections
        one = [await durable(d, client, 1) - await plain(1) for _ in range(runs)]
        many = [await durable(d, client, requests) - await plain(requests) for _ in range(runs)]
    fixed = statistics.median(one)
    per_step = (statistics.median(many) - fixed) / (2 * requests - 2)
    return per_step, fixed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", help="a PostgreSQL server URL (no database)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        urls = {"sqlite": f"sqlite:///{Path(folder) / 'bench.sqlite'}"}
        if args.postgres:
            urls["postgresql"] = f"{args.postgres}/bench_{uuid.uuid4().hex[:8]}"
        for name, url in urls.items():
            per_step, fixed = asyncio.run(measure(url, args.requests, args.runs))
            print(f"{name}: {per_step * 1000:.1f} ms per step, {fixed * 1000:.0f} ms per run")


if __name__ == "__main__":
    main()
