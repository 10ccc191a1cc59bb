"""Encoding cost of the web protocols, per event, as a ratio to `Worker.stream` alone.

Run: `uv run python benchmarks/bench_ui.py`

The same scripted turn as bench_worker.py (3 requests, 4 tool calls, ~1,500 streamed deltas,
through `ScriptedClient`: no network noise) is read three ways: the bare `Worker.stream`, the
stream encoded as the Vercel AI SDK UI message stream (`to_vercel_stream`: SSE text, one
JSON object per chunk), and as AG-UI events (`to_agui_events`). Target: <= 1.3x. CPU time,
best of 5.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_worker import lookup, script

from llm_worker import Worker
from llm_worker.messages import Origin
from llm_worker.testing import ScriptedClient
from llm_worker.ui import to_agui_events, to_vercel_stream

ORIGIN = Origin("scripted", "scripted-model")


async def bare() -> int:
    worker = Worker(ScriptedClient(script()), tools=[lookup])
    n = 0
    async with worker.stream("go") as stream:
        async for _event in stream:
            n += 1
    return n


async def vercel() -> int:
    worker = Worker(ScriptedClient(script()), tools=[lookup])
    n = 0
    async with worker.stream("go") as stream:
        async for _text in to_vercel_stream(stream, message_id="m1", origin=ORIGIN):
            n += 1
    return n


async def agui() -> int:
    worker = Worker(ScriptedClient(script()), tools=[lookup])
    n = 0
    async with worker.stream("go") as stream:
        async for _text in to_agui_events(stream, thread_id="t", run_id="r", origin=ORIGIN):
            n += 1
    return n


async def cpu_of(fn: Any, rounds: int = 20) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(rounds):
            await fn()
        best = min(best, time.process_time() - start)
    return best / rounds


async def main() -> None:
    events = await bare()
    chunks, agui_events = await vercel(), await agui()
    base = await cpu_of(bare)
    print(f"Worker.stream: {events} events, {base * 1e3:.2f} ms per turn")
    for name, fn, count in (("Vercel UI stream", vercel, chunks), ("AG-UI", agui, agui_events)):
        cost = await cpu_of(fn)
        print(
            f"{name}: {count} SSE events, {cost * 1e3:.2f} ms per turn, ratio {cost / base:.2f} "
            f"({(cost - base) / events * 1e6:.2f} µs per Worker event)"
        )


if __name__ == "__main__":
    asyncio.run(main())
