# pyright: strict
"""Tools from an MCP server: `mcp-server-time` (the MCP project's, from PyPI) over stdio.

1. `async with MCPServer.stdio(...)` starts the server and lists its tools; their JSON
   Schemas go to the model as they are, their annotations set each tool's effect.
2. `Worker(tools=[server])` offers them; the model calls `get_current_time` and reads the
   answer in its next request. The server's stderr goes to the `llm_worker.mcp` logger.
3. `llm_worker.mcp.serve(tools)` is the other way round: your `@tool`s as an MCP server
   (`llm-worker mcp-serve module:tools` on the command line).

Needs the `mcp` extra and the server: `pip install 'llm-worker[mcp]' mcp-server-time`
(both are in this project's dev group). Run: `python examples/mcp_tools.py` (offline unless
an API key is set; see _common.py).
"""

from __future__ import annotations

import json
import sys

import anyio
from _common import model

from llm_worker import RunStatus, ToolResultReady, ToolUsePart, Worker
from llm_worker.mcp import MCPServer
from llm_worker.testing import ScriptedRequest, ScriptedResponse


def answer(call: ScriptedRequest) -> ScriptedResponse:
    [result] = call.tool_results
    when = json.loads(result.content)
    return ScriptedResponse.text(
        f"It is {when['datetime'][11:16]} in Tokyo ({when['day_of_week']})."
    )


SCRIPT = [
    ScriptedResponse([ToolUsePart("", "get_current_time", {"timezone": "Asia/Tokyo"})]),
    answer,
]


async def main() -> None:
    time_server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    async with MCPServer.stdio(time_server[0], time_server[1:], name="time") as server:
        for each in await server.list_tools():
            print(f"tool {each.name} ({each.meta.effect}): {each.description.splitlines()[0]}")
        async with (
            model(SCRIPT) as (client, _server),
            Worker(client, tools=[server]) as worker,
            # `async with` the stream: leaving early (an error, Ctrl-C) cancels the run.
            worker.stream("What time is it in Tokyo?") as stream,
        ):
            async for event in stream:
                if isinstance(event, ToolResultReady):
                    tz = json.loads(event.result.content)["timezone"]
                    print(f"← {event.result.name}: timezone {tz}")
    # Read to its end, the stream holds the result (a failed run raised in the loop above).
    # A run that ended without an answer, paused by a hook or cancelled, says so here.
    result = stream.result
    if result.status is not RunStatus.FINISHED:
        raise SystemExit(f"the run did not finish: {result.status} ({result.reason})")
    print(f"final answer: {result.text}")


if __name__ == "__main__":
    anyio.run(main)
