"""The per-event cost of a sub-agent's event against a root event, through `Worker.stream()`.

Run: `uv run python benchmarks/bench_subagents.py`

Root: a Worker streams an answer of N text deltas to a `Worker.stream()` reader, with a
Timeline text handler registered. Nested: the same answer streamed by a sub-agent
(`as_tool`) that the root calls, the root's own answers being a call and one short text: each
delta then goes through the child's run, the Forwarder (path stamped, the root Timeline's
branch for the child) and the reader. Both over `ScriptedClient` (no HTTP, ~1 µs an event),
which is the hardest case for the ratio: over a real client each event also costs its HTTP,
SSE and JSON work (~7 µs, see "Worker" in docs/benchmarks.md), on both sides. CPU time per
streamed delta, best of 5 rounds. Target: nested ≤ 1.2 x root.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from llm_worker import TextPart, ToolUsePart, Worker
from llm_worker.events import BlockDelta
from llm_worker.testing import ScriptedClient, ScriptedResponse

DELTAS = 20_000


def answer() -> ScriptedResponse:
    return ScriptedResponse([TextPart("word " * DELTAS)], chunk_size=5)


def root() -> Worker:
    return Worker(ScriptedClient(answer()))


def nested() -> Worker:
    child = Worker(ScriptedClient(answer()))
    script = [
        ScriptedResponse([ToolUsePart("c1", "kid", {"input": "go"})]),
        ScriptedResponse.text("ok"),
    ]
    return Worker(ScriptedClient(script), tools=[child.as_tool(name="kid", description="A kid.")])


async def per_delta(make: Callable[[], Worker]) -> float:
    best = float("inf")
    for _ in range(5):
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


async def main() -> None:
    await per_delta(root)
    await per_delta(nested)
    base = await per_delta(root)
    ours = await per_delta(nested)
    print(
        f"{DELTAS:,} deltas through Worker.stream() with a Timeline handler: root event "
        f"{base * 1e6:.2f} µs, sub-agent event {ours * 1e6:.2f} µs, ratio {ours / base:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
