"""Per-event cost of each provider client against raw httpx + orjson, in the same run.

Run: `uv run python benchmarks/bench_stream.py [--events 20000] [--runs 5] [provider ...]`

Each provider module `benchmarks/stream_<provider>.py` defines `PROVIDER`, `make_body(n)`
(a recorded-shape stream of n content deltas) and `make_client(base_url)`. The baseline reads
the same body with httpx `aiter_lines` and parses each `data:` JSON payload. The ratio compares
client CPU time per provider chunk (baseline) with the client's CPU time for the same body.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import pkgutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import best_of, count_events, raw_baseline, start_server

from llm_worker import Message, Request


def providers() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        m.name.removeprefix("stream_")
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("stream_")
    )


async def bench(provider: str, events: int, runs: int) -> None:
    module = importlib.import_module(f"stream_{provider}")
    body: bytes = module.make_body(events)
    server = start_server(body)
    try:
        url = server.base_url + "/raw"
        request = Request([Message.user("benchmark")])
        client = module.make_client(server.base_url)
        # Warm up both paths (connection pool, imports).
        await raw_baseline(url)
        await count_events(client.stream(request))
        base = await best_of(runs, lambda: raw_baseline(url))
        ours = await best_of(runs, lambda: count_events(client.stream(request)))
        per_chunk_base = base.cpu_s / base.events * 1e6
        per_chunk_ours = ours.cpu_s / base.events * 1e6
        print(
            f"{provider:18} chunks={base.events:6d}  "
            f"raw httpx+orjson {per_chunk_base:6.2f} µs/chunk"
            f"  client {per_chunk_ours:6.2f} µs/chunk ({ours.events} events)"
            f"  ratio {per_chunk_ours / per_chunk_base:5.2f}"
        )
        await client.aclose()
    finally:
        server.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("providers", nargs="*")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for provider in args.providers or providers():
        await bench(provider, args.events, args.runs)


if __name__ == "__main__":
    asyncio.run(main())
