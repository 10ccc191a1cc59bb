"""The per-event cost of a sub-agent's event against a root event, through `Worker.stream()`.

Run: `uv run python benchmarks/bench_subagents.py` (add `--wire` for the real-wire figures
only, `--scripted` for the in-process ones only).

Root: a Worker streams an answer of N text deltas to a `Worker.stream()` reader, with a
Timeline text handler registered. Nested: the same answer streamed by a sub-agent
(`as_tool`) that the root calls, the root's own answers being a call and one short text: each
delta then goes through the child's run, the Forwarder (path stamped, the root Timeline's
branch for the child) and the reader.

Two settings:
- `ScriptedClient` (no HTTP, ~1 µs an event): the hardest case for the ratio.
- A real client (Anthropic's wire, over httpx and over aiohttp) of a `ScriptedModelServer`
  running in a child process, so that this process's CPU time is the client's alone: each
  event then also costs its HTTP, SSE and JSON work, on both sides.

CPU time per streamed delta, best of 9 rounds taken in turns. Target: nested ≤ 1.2 x root.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import sys
import time
from collections.abc import Callable
from typing import Any

from llm_worker import TextPart, ToolUsePart, Worker
from llm_worker.events import BlockDelta
from llm_worker.testing import ScriptedClient, ScriptedResponse

DELTAS = 20_000
WIRE_DELTAS = 20_000
ROUNDS = 9


def answer(deltas: int = DELTAS) -> ScriptedResponse:
    return ScriptedResponse([TextPart("word " * deltas)], chunk_size=5)


def call_kid() -> ScriptedResponse:
    return ScriptedResponse([ToolUsePart("c1", "kid", {"input": "go"})])


def root(client: Any = None) -> Worker:
    return Worker(client or ScriptedClient(answer()))


def nested(client: Any = None, child_client: Any = None) -> Worker:
    child = Worker(child_client or ScriptedClient(answer()))
    parent = client or ScriptedClient([call_kid(), ScriptedResponse.text("ok")])
    return Worker(parent, tools=[child.as_tool(name="kid", description="A kid.")])


async def per_delta(make: Callable[[], Worker], rounds: int = 1) -> float:
    best = float("inf")
    for _ in range(rounds):
        worker = make()
        seen = [0]
        worker.on_text_block(lambda _event: None)
        start = time.process_time()
        async with worker.stream("go") as stream:
            async for event in stream:
                if type(event) is BlockDelta:
                    seen[0] += 1
        spent = time.process_time() - start
        best = min(best, spent / seen[0])
    return best


async def both(
    first: Callable[[], Worker], second: Callable[[], Worker], rounds: int = ROUNDS
) -> tuple[float, float]:
    """The best of `rounds` of each, measured in turns (a load spike hits both alike)."""
    await per_delta(first)
    await per_delta(second)
    a = b = float("inf")
    for _ in range(rounds):
        a = min(a, await per_delta(first))
        b = min(b, await per_delta(second))
    return a, b


# -- over a real wire -----------------------------------------------------------------------


def _wire_step(request: Any) -> ScriptedResponse:
    """The parent calls the kid, then says ok; the kid (and the lone root) streams."""
    if request.tool_results:
        return ScriptedResponse.text("ok")
    if any(t.name == "kid" for t in request.request.tools or ()):
        return call_kid()
    return answer(WIRE_DELTAS)


def _serve(port_queue: Any, stop: Any) -> None:
    from llm_worker.testing import ScriptedModelServer

    async def main() -> None:
        server = ScriptedModelServer("anthropic", _wire_step, model="m")
        async with server:
            port_queue.put(server.port)
            await asyncio.to_thread(stop.wait)

    asyncio.run(main())


async def wire(transport: str, port: int) -> tuple[float, float]:
    from llm_worker.providers import AnthropicClient

    base = f"http://127.0.0.1:{port}"

    def client() -> AnthropicClient:
        return AnthropicClient(model="m", api_key="k", base_url=base, transport=transport)  # type: ignore[arg-type]

    # One client each for the parent and the child, made (and connected) before measuring:
    # a client's construction (an SSL context) would weigh on the side with more clients.
    parent, child = client(), client()
    base_cost, ours = await both(lambda: root(child), lambda: nested(parent, child))
    await parent.aclose()
    await child.aclose()
    return base_cost, ours


def run_wire() -> None:
    ctx = mp.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    process = ctx.Process(target=_serve, args=(queue, stop), daemon=True)
    process.start()
    try:
        port = queue.get(timeout=60)
        for transport in ("httpx", "aiohttp"):
            base, ours = asyncio.run(wire(transport, port))
            print(
                f"{WIRE_DELTAS:,} deltas over Anthropic's wire ({transport}): root event "
                f"{base * 1e6:.2f} µs, sub-agent event {ours * 1e6:.2f} µs, "
                f"ratio {ours / base:.2f}"
            )
    finally:
        stop.set()
        process.join(timeout=10)


async def main() -> None:
    base, ours = await both(root, nested)
    print(
        f"{DELTAS:,} deltas through Worker.stream() with a Timeline handler (ScriptedClient): "
        f"root event {base * 1e6:.2f} µs, sub-agent event {ours * 1e6:.2f} µs, "
        f"ratio {ours / base:.2f}"
    )


if __name__ == "__main__":
    if "--wire" not in sys.argv:
        asyncio.run(main())
    if "--scripted" not in sys.argv:
        run_wire()
