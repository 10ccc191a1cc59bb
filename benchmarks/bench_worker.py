"""The Worker's own costs.

Run: `uv run python benchmarks/bench_worker.py`

1. Overhead of a scripted turn (3 requests, 4 tool calls, ~1,500 streamed deltas) through
   `Worker.run`, as a ratio to iterating the bare client streams of the same responses
   (target <= 1.2). Both use `ScriptedClient`, so no network noise enters either side.
2. Wall time of one batch of 4 tools that each sleep 200 ms (target < 260 ms).
3. Memory per idle Worker with 10 tools registered (target < 64 KiB), by tracemalloc.
4. 1,000 Workers running concurrently on one event loop against a local OpenAI-compatible
   server in a child process: events per second of client CPU.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _harness import start_script_server, start_server

from llm_worker import Message, Request, TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedResponse


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def script() -> list[ScriptedResponse]:
    text = "word " * 500
    return [
        ScriptedResponse(
            [
                TextPart(text),
                ToolUsePart("", "lookup", {"key": "a"}),
                ToolUsePart("", "lookup", {"key": "b"}),
            ],
            chunk_size=5,
        ),
        ScriptedResponse(
            [
                TextPart(text),
                ToolUsePart("", "lookup", {"key": "c"}),
                ToolUsePart("", "lookup", {"key": "d"}),
            ],
            chunk_size=5,
        ),
        ScriptedResponse([TextPart(text)], chunk_size=5),
    ]


async def bare_streams(responses: list[ScriptedResponse]) -> int:
    client = ScriptedClient(responses)
    n = 0
    for _ in responses:
        async for _event in client.stream(Request([Message.user("go")])):
            n += 1
    return n


async def worker_turn(responses: list[ScriptedResponse]) -> int:
    worker = Worker(ScriptedClient(responses), tools=[lookup])
    result = await worker.run("go")
    return result.requests


async def cpu_of(fn: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(rounds):
            await fn(script())
        best = min(best, time.process_time() - start)
    return best / rounds


async def overhead() -> None:
    await bare_streams(script())
    await worker_turn(script())
    bare = await cpu_of(bare_streams, 20)
    ours = await cpu_of(worker_turn, 20)
    print(
        f"scripted turn (3 requests, 4 tool calls): bare streams {bare * 1e3:.2f} ms, "
        f"Worker.run {ours * 1e3:.2f} ms, ratio {ours / bare:.2f}"
    )


async def overhead_http(rounds: int = 40) -> None:
    """The same turn over HTTP through the real OpenAI Chat client (server in a child)."""
    from llm_worker.providers import OpenAIChatClient

    # Two servers, one per side, so that each side replays the script from its start.
    servers = [start_script_server("openai_chat", rounds + 2) for _ in range(2)]
    try:
        clients = [
            OpenAIChatClient(model="m", base_url=s.base_url + "/v1", api_key="k") for s in servers
        ]
        bare_client, worker_client = clients

        async def bare() -> None:
            for _ in range(3):
                async for _event in bare_client.stream(Request([Message.user("go")])):
                    pass

        async def through_worker() -> None:
            await Worker(worker_client, tools=[lookup]).run("go")

        await bare()
        await through_worker()
        timings = []
        for fn in (bare, through_worker):
            best = float("inf")
            for _ in range(rounds // 4):
                start = time.process_time()
                for _ in range(4):
                    await fn()
                best = min(best, (time.process_time() - start) / 4)
            timings.append(best)
        base, ours = timings
        print(
            f"same turn over HTTP (OpenAIChatClient, server in a child process): bare client "
            f"streams {base * 1e3:.2f} ms, Worker.run {ours * 1e3:.2f} ms, ratio {ours / base:.2f}"
        )
        for client in clients:
            await client.aclose()
    finally:
        for server in servers:
            server.close()


async def parallel_sleeps() -> None:
    @tool
    async def nap(n: int) -> str:
        """Sleep 200 ms."""
        await asyncio.sleep(0.2)
        return str(n)

    responses = [
        ScriptedResponse([ToolUsePart("", "nap", {"n": i}) for i in range(4)]),
        ScriptedResponse.text("done"),
    ]
    worker = Worker(ScriptedClient(responses), tools=[nap])
    start = time.perf_counter()
    await worker.run("go")
    print(f"4 tools sleeping 200 ms each: wall {(time.perf_counter() - start) * 1e3:.0f} ms")


def idle_memory() -> None:
    tools = []
    for i in range(10):

        async def f(x: int) -> int:
            return x

        f.__name__ = f"tool_{i}"
        f.__doc__ = f"Tool number {i}."
        tools.append(tool(f))
    client = ScriptedClient([])
    n = 1000
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    workers = [Worker(client, tools=tools) for _ in range(n)]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename"))
    print(f"idle Worker with 10 tools: {size / n / 1024:.1f} KiB each ({len(workers)} measured)")


def chat_body(deltas: int) -> bytes:
    import orjson

    chunks = [
        orjson.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}],
            }
        )
        for _ in range(deltas)
    ]
    chunks.append(
        orjson.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        )
    )
    chunks.append(
        orjson.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [],
                "usage": {
                    "prompt_tokens": 5,
                    "completion_tokens": deltas,
                    "total_tokens": 5 + deltas,
                },
            }
        )
    )
    return b"".join(b"data: " + c + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


async def many_workers(count: int = 1000, deltas: int = 50) -> None:
    import httpx

    from llm_worker.providers import OpenAIChatClient

    server = start_server(chat_body(deltas))
    try:
        limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
        async with httpx.AsyncClient(limits=limits, timeout=120) as http:
            client = OpenAIChatClient(
                model="m", base_url=server.base_url + "/v1", api_key="k", http_client=http
            )
            events = 0

            def on_text(_event: object) -> None:
                nonlocal events
                events += 1

            async def one() -> None:
                worker = Worker(client)
                worker.on_text_block(on_text)
                await worker.run("hi")

            start_cpu, start_wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(one() for _ in range(count)))
            cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
        print(
            f"{count} concurrent Workers x {deltas} deltas: {events} text events, "
            f"wall {wall:.2f} s, client CPU {cpu:.2f} s, {events / cpu:,.0f} events per CPU-second"
        )
    finally:
        server.close()


async def main() -> None:
    await overhead()
    await overhead_http()
    await parallel_sleeps()
    idle_memory()
    await many_workers()


if __name__ == "__main__":
    asyncio.run(main())
