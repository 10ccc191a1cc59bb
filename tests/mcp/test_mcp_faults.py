"""MCPServer against hostile servers (servers/scripted_server.py): bounded, typed, no hang."""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from llm_worker import MCPConnectionError, RunStatus, ToolProgress, Worker
from llm_worker.errors import MissingExtraError, ToolError
from llm_worker.mcp import MCPServer
from llm_worker.messages import ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from support.mcp_servers import scripted


async def tool_named(server: MCPServer, name: str):
    [found] = [t for t in await server.list_tools() if t.remote_name == name]
    return found


@pytest.mark.anyio
async def test_a_server_that_never_initializes_fails_async_with_in_time() -> None:
    server = MCPServer.stdio(*scripted("silent"), name="silent-one", init_timeout=0.5)
    with anyio.fail_after(15), pytest.raises(MCPConnectionError, match="silent-one") as caught:
        async with server:
            pytest.fail("connected to a server that never answered initialize")
    assert "initialize" in str(caught.value) and caught.value.server == "silent-one"


@pytest.mark.anyio
async def test_a_command_that_does_not_exist_is_a_typed_error() -> None:
    with anyio.fail_after(15), pytest.raises(MCPConnectionError, match="could not be started"):
        async with MCPServer.stdio("/nonexistent/mcp-server"):
            pass


@pytest.mark.anyio
async def test_a_server_killed_mid_call_gives_an_error_and_reconnects(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with anyio.fail_after(20):
        async with MCPServer.stdio(*scripted("dies-once", log)) as server:
            echo = await tool_named(server, "echo")
            with pytest.raises(ToolError, match="closed the connection"):
                await echo.execute('{"text": "a"}')
            assert await echo.execute('{"text": "b"}') == "echo: b"  # a new process


@pytest.mark.anyio
async def test_reconnects_are_bounded() -> None:
    with anyio.fail_after(20):
        async with MCPServer.stdio(*scripted("dies"), max_reconnects=2) as server:
            echo = await tool_named(server, "echo")
            for _ in range(3):  # the first call, then two restarts
                with pytest.raises(ToolError, match="closed the connection"):
                    await echo.execute("{}")
            with pytest.raises(ToolError, match="no more tries"):
                await echo.execute("{}")


@pytest.mark.anyio
async def test_malformed_json_rpc_fails_the_call_at_once() -> None:
    with anyio.fail_after(20):
        async with MCPServer.stdio(*scripted("malformed"), timeout=None) as server:
            echo = await tool_named(server, "echo")
            with pytest.raises(ToolError, match="not valid JSON-RPC"):
                await echo.execute("{}")


@pytest.mark.anyio
async def test_cancelling_a_run_sends_notifications_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "log"
    script = [ScriptedResponse([ToolUsePart("", "slow", {})])]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("normal", log)) as server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            stream = worker.stream("go")
            async for event in stream:
                if isinstance(event, ToolProgress):
                    worker.cancel()
            result = stream.result
            # The server reads its stdin in order: once echo answers, it has logged the
            # notification sent before.
            echo = await tool_named(server, "echo")
            assert await echo.execute('{"text": "after"}') == "echo: after"
    assert result.status is RunStatus.CANCELLED
    notes = [json.loads(line) for line in log.read_text().splitlines()]
    [cancelled] = [n for n in notes if n.get("notification") == "notifications/cancelled"]
    assert isinstance(cancelled["params"]["requestId"], int)


@pytest.mark.anyio
async def test_list_changed_refreshes_the_tools_before_the_next_request() -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "s_add_tool", {})]),
        ScriptedResponse.text("done"),
    ]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("normal"), prefix="s_") as server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            await worker.run("add one")
    first, second = ([t["name"] for t in r.json()["tools"]] for r in model.requests)
    assert first == ["s_echo", "s_slow", "s_add_tool"]
    assert second == ["s_echo", "s_slow", "s_add_tool", "s_extra"]


@pytest.mark.anyio
async def test_stderr_goes_to_the_logger(capfd: pytest.CaptureFixture[str]) -> None:
    code = "import sys; sys.stderr.write('hello from stderr\\n'); sys.stderr.flush()"
    seen: list[logging.LogRecord] = []
    logged = threading.Event()

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "hello from stderr" in record.getMessage():
                seen.append(record)
                logged.set()

    logger = logging.getLogger("llm_worker.mcp")
    handler, level = Catch(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with anyio.fail_after(15), pytest.raises(MCPConnectionError):
            async with MCPServer.stdio(sys.executable, ["-c", code], name="talker"):
                pass
        # The reader thread logs the line: wait for it, bounded.
        assert await anyio.to_thread.run_sync(logged.wait, 5)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert "talker" in seen[0].getMessage()
    assert "hello from stderr" not in capfd.readouterr().err  # never the terminal


@pytest.mark.anyio
async def test_a_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(MissingExtraError, match=r"llm-worker\[mcp\]"):
        async with MCPServer.stdio("anything"):
            pass
