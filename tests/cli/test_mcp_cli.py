"""`llm-worker run/chat --mcp` and `llm-worker mcp-serve`."""

from __future__ import annotations

import io
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker.cli import main
from llm_worker.mcp import MCPServer
from llm_worker.messages import ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

TIME = shlex.join([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])
MCP_TESTS = Path(__file__).resolve().parents[1] / "mcp"


def says_the_time(call: ScriptedRequest) -> ScriptedResponse:
    [result] = call.tool_results
    return ScriptedResponse.text(f"Tokyo: {json.loads(result.content)['timezone']}")


def test_run_with_an_mcp_server(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any
) -> None:
    call = ToolUsePart("", "get_current_time", {"timezone": "Asia/Tokyo"})
    script = [ScriptedResponse([call]), says_the_time]
    with serve(ScriptedModelServer("anthropic", script)) as server:
        base = ["--model", "anthropic:m", "--base-url", server.base_url, "--api-key", "k"]
        assert main(["run", "time?", *base, "--mcp", TIME, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "Tokyo: Asia/Tokyo"
    names = [t["name"] for t in server.requests[0].json()["tools"]]
    assert names == ["get_current_time", "convert_time"]


def test_chat_keeps_its_mcp_servers_across_turns(
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    offline_env: Any,
) -> None:
    call = ToolUsePart("", "get_current_time", {"timezone": "Asia/Tokyo"})
    script = [ScriptedResponse([call]), says_the_time, ScriptedResponse([call]), says_the_time]
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\nsecond\n"))
    with serve(ScriptedModelServer("anthropic", script)) as server:
        base = ["--model", "anthropic:m", "--base-url", server.base_url, "--api-key", "k"]
        assert main(["chat", *base, "--mcp", TIME]) == 0
    assert capsys.readouterr().out.count("Tokyo: Asia/Tokyo") == 2
    assert len(server.requests) == 4


def test_a_server_that_cannot_start_is_one_error_line(
    capsys: pytest.CaptureFixture[str], offline_env: Any
) -> None:
    base = ["--model", "anthropic:m", "--base-url", "http://127.0.0.1:9", "--api-key", "k"]
    assert main(["run", "hi", *base, "--mcp", "/nonexistent/server"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: MCP server /nonexistent/server") and "Traceback" not in err


@pytest.mark.anyio
async def test_mcp_serve_serves_a_modules_tools() -> None:
    command = ["-m", "llm_worker.cli", "mcp-serve", "servers.served_tools:tools", "--name", "t"]
    with anyio.fail_after(30):
        async with MCPServer.stdio(sys.executable, command, cwd=MCP_TESTS) as server:
            tools = {t.name: t for t in await server.list_tools()}
            assert await tools["add"].execute('{"a": 40, "b": 2}') == "42"
    assert set(tools) == {"add", "forecast", "refuse"}
