"""Many agent runs at once over the aiohttp transport, on one event loop.

1. aiohttp is the default transport under asyncio (`transport="auto"`; httpx under trio):
   the same events, typed errors, retries and timeouts as httpx, with less CPU per event (see
   docs/benchmarks.md). httpx is never imported.
2. An `aiohttp.ClientSession` of your own (`http_client=`) carries your settings (here a
   bigger pool and a request counter); the client uses it and leaves it open.
3. 50 Workers run concurrently on that one client; each streams its answer.

Run: `python examples/aiohttp_transport.py` (offline: a scripted model server on 127.0.0.1;
with `LLM_WORKER_MODEL=provider:model` and its API key, the real model).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import aiohttp
import anyio

from llm_worker import BlockDelta, TextDelta, Worker
from llm_worker.providers import from_string, model_from_env
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

RUNS = 50
SENT: list[str] = []


async def count_request(_session: object, _ctx: object, _params: Any) -> None:
    SENT.append("request")


async def one_run(worker: Worker, results: list[int]) -> None:
    pieces = 0
    async with worker.stream("Say hello in five words.") as stream:
        async for event in stream:
            if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                pieces += 1
    results.append(pieces)


async def run_all(client: Any) -> None:
    results: list[int] = []
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(RUNS):
            tg.start_soon(one_run, Worker(client), results)
    seconds = time.perf_counter() - started
    print(f"transport: {client.transport.transport}")
    print(f"{len(results)} runs done, {sum(results)} text pieces streamed in {seconds:.2f} s")
    print(f"requests through our session: {len(SENT)}")
    print(f"httpx imported: {'httpx' in sys.modules}")


async def main() -> None:
    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(count_request)
    connector = aiohttp.TCPConnector(limit=200)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:
        offline = "--offline" in sys.argv
        target = None if offline else model_from_env(os.environ.get("LLM_WORKER_MODEL"))
        if target is not None:
            print(f"(live: {target})")
            async with from_string(target, http_client=session, max_concurrency=200) as client:
                await run_all(client)
            return
        script = [ScriptedResponse.text("Hello there, nice to meet you.")] * RUNS
        async with (
            ScriptedModelServer("openai_chat", script) as server,
            server.client(http_client=session, max_concurrency=200) as client,
        ):
            print("(offline: a scripted model behind the openai_chat wire format on 127.0.0.1)")
            await run_all(client)
        print(f"session still open after the client closed: {not session.closed}")


if __name__ == "__main__":
    anyio.run(main)
