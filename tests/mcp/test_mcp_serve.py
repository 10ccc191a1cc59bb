"""`llm_worker.mcp.serve`: our tools over MCP, read back by MCPServer and by the SDK's client."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest

from llm_worker.errors import MCPConnectionError, ToolError
from llm_worker.mcp import MCPServer, MCPTool
from support.mcp_servers import SERVERS, free_port

SERVED = (sys.executable, [str(SERVERS / "served_tools.py")])


@pytest.mark.anyio
async def test_served_tools_round_trip_through_mcpserver() -> None:
    from servers.served_tools import forecast

    with anyio.fail_after(30):
        async with MCPServer.stdio(*SERVED) as server:
            tools = {t.name: t for t in await server.list_tools()}
            added = await tools["add"].execute('{"a": 2, "b": 3}')
            weather = await tools["forecast"].execute('{"city": "Kyoto", "unit": "F"}')
            with pytest.raises(ToolError, match="refused: no"):
                await tools["refuse"].execute('{"reason": "no"}')
            with pytest.raises(ToolError, match="valid integer"):  # validation, field by field
                await tools["add"].execute('{"a": "two", "b": 3}')
    assert added == "5"
    assert isinstance(weather, str)
    assert json.loads(weather) == {"city": "Kyoto", "temperature": 70, "unit": "F"}
    # what a model would be given, as it is
    assert tools["forecast"].input_schema == forecast.input_schema
    assert tools["forecast"].description == forecast.description
    effects = {name: t.meta.effect for name, t in tools.items()}
    assert effects == {"add": "read_only", "forecast": "idempotent", "refuse": "side_effect"}


@pytest.mark.anyio
async def test_served_tools_through_the_sdks_own_client() -> None:
    from mcp.client.stdio import stdio_client

    from mcp import ClientSession, StdioServerParameters

    params = StdioServerParameters(command=SERVED[0], args=SERVED[1])
    with anyio.fail_after(30), open(os.devnull, "w") as errlog:  # noqa: ASYNC230
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool("forecast", {"city": "Oslo"})
            failed = await session.call_tool("refuse", {"reason": "because"})
    assert init.serverInfo.name == "served-tools"
    assert [t.name for t in listed.tools] == ["add", "forecast", "refuse"]
    assert listed.tools[1].annotations is not None and listed.tools[1].annotations.idempotentHint
    assert result.structuredContent == {"city": "Oslo", "temperature": 21, "unit": "C"}
    assert failed.isError and "refused: because" in failed.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_served_tools_over_streamable_http() -> None:
    port = free_port()
    command = [sys.executable, "-m", "llm_worker.cli", "mcp-serve", "servers.served_tools:tools"]
    process = await anyio.open_process(
        [*command, "--http", f"127.0.0.1:{port}"], cwd=SERVERS.parent
    )
    try:
        with anyio.fail_after(30):
            tools = await _list_when_up(f"http://127.0.0.1:{port}/mcp")
        assert [t.name for t in tools] == ["add", "forecast", "refuse"]
    finally:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        await process.aclose()


async def _list_when_up(url: str) -> list[MCPTool]:
    # The child listens once uvicorn has started: connect until it does (bounded by the
    # caller's fail_after), then list and call through streamable HTTP.
    for _ in range(400):
        try:
            async with MCPServer.http(url, init_timeout=5) as server:
                tools = list(await server.list_tools())
                [add] = [t for t in tools if t.name == "add"]
                assert await add.execute('{"a": 1, "b": 2}') == "3"
                return tools
        except MCPConnectionError:
            await anyio.sleep(0.05)
    raise AssertionError("the server never came up")
