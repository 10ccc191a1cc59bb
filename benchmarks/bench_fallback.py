"""Per-event overhead of FallbackClient over the bare client it wraps, in the same run.

Run: `uv run python benchmarks/bench_fallback.py [--events 20000] [--runs 7] [provider ...]`

The same recorded-shape stream (`benchmarks/stream_<provider>.py`) is read through the bare
client and through `FallbackClient([client, spare])` whose first client answers (the common
case: the wrapper only passes events on and stamps the status events). Rounds alternate
bare / wrapped, best of `--runs` each: CPU time of this process (the server is another).
Target: the wrapped stream at most 1.05x the bare one.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import Measure, count_events, start_server

from llm_worker import Message, Request
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.testing import ScriptedClient, ScriptedResponse


async def bench(provider: str, events: int, runs: int) -> float:
    module = importlib.import_module(f"stream_{provider}")
    server = start_server(module.make_body(events))
    try:
        request = Request([Message.user("benchmark")])
        client = module.make_client(server.base_url)
        spare = ScriptedClient(ScriptedResponse.text("never used"))
        wrapped = FallbackClient([client, spare], cooldown=Cooldown.disabled())
        await count_events(client.stream(request))  # warm up: pool, imports
        await count_events(wrapped.stream(request))
        bare = wrap = None
        for _ in range(runs):  # alternate, so load changes hit both alike
            bare = _best(bare, await _measure(lambda: count_events(client.stream(request))))
            wrap = _best(wrap, await _measure(lambda: count_events(wrapped.stream(request))))
        assert bare is not None
        assert wrap is not None
        ratio = wrap.cpu_s / bare.cpu_s
        print(
            f"{provider:18} events={bare.events:6d}  bare {bare.us_per_event:6.2f} µs/event"
            f"  FallbackClient {wrap.us_per_event:6.2f} µs/event  ratio {ratio:5.3f}"
        )
        await client.aclose()
        return ratio
    finally:
        server.close()


async def _measure(fn: Callable[[], Awaitable[int]]) -> Measure:
    wall, cpu = time.perf_counter(), time.process_time()
    events = await fn()
    return Measure(events, time.process_time() - cpu, time.perf_counter() - wall)


def _best(best: Measure | None, new: Measure) -> Measure:
    return new if best is None or new.cpu_s < best.cpu_s else best


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("providers", nargs="*", default=["anthropic", "openai_chat"])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    for provider in args.providers:
        await bench(provider, args.events, args.runs)


if __name__ == "__main__":
    asyncio.run(main())
