"""Overhead per request of a budget check and of a session append (docs/benchmarks.md).

`uv run python benchmarks/bench_limits_sessions.py` — a Worker on a ScriptedClient (no
network), 200 runs of one request each: without limits, with `Limits` (requests and
tool_calls only: no token counting), with `Limits(total_tokens=...)` (the client's
count_tokens per request), and with a `SqliteSession` (claim, load, append per run).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio

from llm_worker import Limits, Worker
from llm_worker.sessions import SqliteSession
from llm_worker.testing import ScriptedClient, ScriptedResponse

RUNS = 200


async def timed(limits: Limits | None, session: SqliteSession | None) -> float:
    worker = Worker(ScriptedClient(ScriptedResponse.text("ok")))
    start = time.perf_counter()
    for i in range(RUNS):
        await worker.run(f"message {i}", limits=limits, session=session)
    return (time.perf_counter() - start) / RUNS * 1e6


async def main() -> None:
    base = await timed(None, None)
    simple = await timed(Limits(requests=10**9, tool_calls=10**9), None)
    tokens = await timed(Limits(total_tokens=10**12), None)
    with tempfile.TemporaryDirectory() as folder:
        async with SqliteSession("bench", Path(folder) / "s.db") as session:
            stored = await timed(None, session)
    print(f"plain run (1 request)        {base:8.1f} µs")
    print(f"+ Limits(requests, tools)    {simple - base:+8.1f} µs per request")
    print(f"+ Limits(total_tokens)       {tokens - base:+8.1f} µs per request (count_tokens)")
    print(f"+ SqliteSession              {stored - base:+8.1f} µs per run (claim, load, append)")


if __name__ == "__main__":
    anyio.run(main)
