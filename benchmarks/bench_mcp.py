"""MCP call overhead: one call of a trivial tool over MCP stdio vs the same tool called locally.

Both go through `execute_call` (what a Worker runs per call). The MCP server is this script
run with `--serve` (llm_worker.mcp.serve over stdio, the same @tool), so the difference is the
MCP round trip: JSON-RPC encoding, the pipe both ways, the server's SDK dispatch.

    uv run python benchmarks/bench_mcp.py [--calls 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import anyio

from llm_worker.collectors import ToolCall
from llm_worker.tools import Tool, execute_call, tool


@tool(effect="read_only")
def echo(text: str) -> str:
    """Return the text."""
    return text


@tool(effect="read_only")
async def echo_async(text: str) -> str:
    """Return the text (async: no worker thread)."""
    return text


async def per_call_us(target: Tool, calls: int) -> float:
    call = ToolCall("c", target.name, {"text": "hello"})
    start = time.perf_counter()
    for _ in range(calls):
        result = await execute_call(target, call)
        assert not result.is_error, result.content
    return (time.perf_counter() - start) / calls * 1e6


async def measure(calls: int, runs: int) -> None:
    from llm_worker.mcp import MCPServer

    local: list[float] = []
    local_async: list[float] = []
    remote: list[float] = []
    async with MCPServer.stdio(sys.executable, [__file__, "--serve"], timeout=None) as server:
        [mcp_echo] = [t for t in await server.list_tools() if t.name == "echo_async"]
        await per_call_us(mcp_echo, 50)  # warm up both sides
        for _ in range(runs):
            local.append(await per_call_us(echo, calls))
            local_async.append(await per_call_us(echo_async, calls))
            remote.append(await per_call_us(mcp_echo, calls))
    print(f"{calls} calls x {runs} runs, best run / median of runs (µs per call)")
    for label, values in (
        ("local sync @tool (worker thread)", local),
        ("local async @tool", local_async),
        ("MCP stdio (async @tool served)", remote),
    ):
        print(f"  {label:36} {min(values):9.1f} / {statistics.median(values):9.1f}")
    print(f"  MCP overhead over the local async tool: {min(remote) - min(local_async):.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.serve:
        from llm_worker.mcp import serve

        anyio.run(lambda: serve([echo, echo_async], name="bench"))
        return
    anyio.run(lambda: measure(args.calls, args.runs))


if __name__ == "__main__":
    main()
