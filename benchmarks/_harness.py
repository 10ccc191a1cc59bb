"""Shared benchmark plumbing: a body server in a child process and the raw httpx baseline.

The server runs in its own process so that the client's CPU time (time.process_time in this
process) measures only the client. Each measurement is repeated and the best run is kept:
the minimum is the least disturbed by other load on the machine.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson


def _serve(body: bytes, content_type: str, port_queue: Any, stop: Any) -> None:
    from llm_worker.testing import WireResponse, WireServer

    async def main() -> None:
        server = WireServer(handler=lambda _request: WireResponse(body, content_type=content_type))
        await server.start()
        port_queue.put(server.port)
        await asyncio.to_thread(stop.wait)
        await server.close()

    asyncio.run(main())


def _serve_script(provider: str, rounds: int, port_queue: Any, stop: Any) -> None:
    import bench_worker  # the script lives with the benchmark that uses it

    from llm_worker.testing import ScriptedModelServer

    async def main() -> None:
        server = ScriptedModelServer(provider, bench_worker.script() * rounds, model="m")
        await server.start()
        port_queue.put(server.port)
        await asyncio.to_thread(stop.wait)
        await server.close()

    asyncio.run(main())


def start_script_server(provider: str, rounds: int) -> BodyServer:
    """A child process playing `bench_worker.script()` `rounds` times in a wire format."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    stop = ctx.Event()
    process = ctx.Process(target=_serve_script, args=(provider, rounds, queue, stop), daemon=True)
    process.start()
    port = queue.get(timeout=30)
    return BodyServer(f"http://127.0.0.1:{port}", process, stop)


@dataclass
class BodyServer:
    """A child process serving one body to every request."""

    base_url: str
    _process: Any
    _stop: Any

    def close(self) -> None:
        self._stop.set()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()


def start_server(body: bytes, content_type: str = "text/event-stream") -> BodyServer:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    stop = ctx.Event()
    process = ctx.Process(target=_serve, args=(body, content_type, queue, stop), daemon=True)
    process.start()
    port = queue.get(timeout=30)
    return BodyServer(f"http://127.0.0.1:{port}", process, stop)


async def raw_baseline(url: str) -> int:
    """httpx reading lines and parsing each JSON `data:` payload, nothing more."""
    n = 0
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", url, content=b"{}") as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    orjson.loads(data)
                    n += 1
    return n


async def count_events(stream: AsyncIterator[Any]) -> int:
    n = 0
    async for _event in stream:
        n += 1
    return n


@dataclass
class Measure:
    events: int
    cpu_s: float
    wall_s: float

    @property
    def us_per_event(self) -> float:
        return self.cpu_s / max(1, self.events) * 1e6


async def best_of(runs: int, fn: Callable[[], Awaitable[int]]) -> Measure:
    best: Measure | None = None
    for _ in range(runs):
        wall = time.perf_counter()
        cpu = time.process_time()
        events = await fn()
        m = Measure(events, time.process_time() - cpu, time.perf_counter() - wall)
        if best is None or m.cpu_s < best.cpu_s:
            best = m
    assert best is not None
    return best
