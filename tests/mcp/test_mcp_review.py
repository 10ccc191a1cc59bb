"""Adversarial probes of MCPServer crossed with cancel, pause/resume, hooks and hostile input."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import pytest

from llm_worker import HookError, MCPConnectionError, PauseState, RunStatus, ToolProgress, Worker
from llm_worker.blobs import MemoryBlobStore
from llm_worker.errors import ConfigurationError, ToolError
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.mcp import MCPServer
from llm_worker.messages import ImagePart, ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer
from support.mcp_servers import scripted

pytestmark = pytest.mark.anyio


def _log_lines(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_the_cancelled_notification_names_the_call_that_was_cancelled(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    script = [ScriptedResponse([ToolUsePart("", "slow", {})])]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("normal", log)) as server,
            ScriptedModelServer("openai_chat", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            stream = worker.stream("go")
            async for event in stream:
                if isinstance(event, ToolProgress):
                    worker.cancel()
            [echo] = [t for t in await server.list_tools() if t.remote_name == "echo"]
            assert await echo.execute('{"text": "after"}') == "echo: after"
    assert stream.result.status is RunStatus.CANCELLED
    lines = _log_lines(log)
    [call] = [n["id"] for n in lines if n.get("name") == "slow"]
    [cancelled] = [n for n in lines if n.get("notification") == "notifications/cancelled"]
    assert cancelled["params"]["requestId"] == call  # type: ignore[index]


async def _pause_first_time(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("check the echo")


@pytest.mark.parametrize("provider", ["openai_responses", "gemini"])
async def test_a_paused_mcp_call_resumes_in_a_fresh_worker_on_a_new_connection(
    provider: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": "hi"})]),
        ScriptedResponse.text("done"),
    ]
    with anyio.fail_after(30):
        async with ScriptedModelServer(provider, script) as model, model.client() as client:
            async with MCPServer.stdio(*scripted("normal", log)) as first:
                worker = Worker(client, tools=[first])
                worker.add_before_tool_call_hook(_pause_first_time)
                paused = await worker.run("echo hi")
            assert paused.status is RunStatus.PAUSED and paused.state is not None
            state = PauseState.from_json(paused.state.to_json())
            async with MCPServer.stdio(*scripted("normal", log)) as second:
                fresh = Worker(client, tools=[second])
                fresh.add_before_tool_call_hook(_pause_first_time)
                result = await fresh.resume(state)
    assert result.status is RunStatus.FINISHED, result
    assert "echo: hi" in json.dumps(model.requests[-1].json())
    assert [n["name"] for n in _log_lines(log) if n.get("request")] == ["echo"]


async def test_a_failing_neighbour_hook_fails_the_run_and_the_server_stays_usable(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"

    async def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook bug")

    script = [ScriptedResponse([ToolUsePart("c1", "echo", {"text": "hi"})])]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("normal", log)) as server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
        ):
            worker = Worker(client, tools=[server])
            worker.add_before_tool_call_hook(broken)
            with pytest.raises(HookError):
                await worker.run("echo")
            [echo] = [t for t in await server.list_tools() if t.remote_name == "echo"]
            assert await echo.execute('{"text": "b"}') == "echo: b"
    assert [n["name"] for n in _log_lines(log) if n.get("request")] == ["echo"]


async def test_http_headers_never_reach_an_error_or_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-live-SECRET-0123456789"
    caplog.set_level(logging.DEBUG)
    server = MCPServer.http(
        "http://127.0.0.1:9/mcp", headers={"Authorization": f"Bearer {secret}"}, init_timeout=2
    )
    assert secret not in repr(server)
    with anyio.fail_after(15), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    text = "".join(repr(e) + str(e) for e in (caught.value, caught.value.__cause__))
    assert secret not in text
    assert secret not in caplog.text


async def _echo(server: MCPServer):
    [echo] = [t for t in await server.list_tools() if t.remote_name == "echo"]
    return echo


@pytest.mark.parametrize("what", ["badblock", "notcontent"])
async def test_malformed_content_is_an_error_the_model_reads_and_the_server_stays(
    what: str,
) -> None:
    with anyio.fail_after(20):
        async with MCPServer.stdio(*scripted("normal")) as server:
            echo = await _echo(server)
            with pytest.raises(ToolError, match=r"MCP server"):
                await echo.execute(json.dumps({"text": f"!{what}"}))
            assert await echo.execute('{"text": "b"}') == "echo: b"


@pytest.mark.parametrize("what", ["badimg", "svg"])
async def test_an_image_no_model_takes_becomes_a_placeholder(what: str) -> None:
    with anyio.fail_after(20):
        async with MCPServer.stdio(*scripted("normal")) as server:
            out = await (await _echo(server)).execute(json.dumps({"text": f"!{what}"}))
    assert isinstance(out, str) and "not shown to the model" in out


async def test_an_image_over_the_default_max_image_bytes_is_an_error_naming_the_limit() -> None:
    limit = 5 * 1024 * 1024  # the documented default: Anthropic's per-image limit
    with anyio.fail_after(30):
        async with MCPServer.stdio(*scripted("normal")) as server:
            assert server.max_image_bytes == limit
            echo = await _echo(server)
            at_limit = await echo.execute(json.dumps({"text": f"!hugeimg:{limit}"}))
            with pytest.raises(ToolError, match=rf"max_image_bytes={limit}\b") as caught:
                await echo.execute(json.dumps({"text": f"!hugeimg:{limit + 4}"}))
            assert await echo.execute('{"text": "b"}') == "echo: b"  # the server stays
    assert isinstance(at_limit, list)
    [image] = at_limit
    assert isinstance(image, ImagePart) and image.data is not None
    assert len(image.data) == limit * 3 // 4
    assert f"{limit + 4} bytes" in str(caught.value) and "MCP server" in str(caught.value)


@pytest.mark.parametrize("limit", [0, -1])
def test_max_image_bytes_must_be_positive(limit: int) -> None:
    with pytest.raises(ConfigurationError, match="max_image_bytes"):
        MCPServer.stdio(*scripted("normal"), max_image_bytes=limit)


@pytest.mark.parametrize("what", ["big:2000000", "bigimg:2000000", "bigerr:2000000"])
async def test_a_huge_mcp_result_goes_to_the_blob_store(what: str) -> None:
    store = MemoryBlobStore()
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": f"!{what}"})]),
        ScriptedResponse.text("done"),
    ]
    with anyio.fail_after(30):
        async with (
            MCPServer.stdio(*scripted("normal")) as server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
            Worker(client, tools=[server], blob_store=store) as worker,
        ):
            result = await worker.run("big")
    assert result.status is RunStatus.FINISHED, result
    sent = model.requests[-1].body
    assert len(sent) < 200_000, len(sent)
    if what.startswith("bigimg"):  # the image still reaches the model beside the summary
        assert b'"type":"image"' in sent.replace(b" ", b"")


async def test_a_key_in_the_url_stays_out_of_the_name_repr_and_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "sk-live-QUERY-0123456789"
    server = MCPServer.http(
        f"http://user:{secret}@127.0.0.1:9/mcp?api_key={secret}", init_timeout=2
    )
    assert secret not in repr(server) and secret not in server.name
    with anyio.fail_after(15), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    assert secret not in str(caught.value)
    # Ours only: the SDK logs the endpoint it connects to at DEBUG (its choice, not ours).
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("llm_worker")]
    assert not [m for m in ours if secret in m]


async def test_a_401_names_the_server_and_leaks_neither_header_nor_url_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "sk-live-401-0123456789"
    refuse = WireResponse({"error": "unauthorized"}, status=401, content_type="application/json")
    async with WireServer([refuse] * 4) as http:
        server = MCPServer.http(
            f"{http.base_url}/mcp?key={secret}",
            headers={"Authorization": f"Bearer {secret}"},
            init_timeout=5,
        )
        with anyio.fail_after(15), pytest.raises(MCPConnectionError) as caught:
            async with server:
                pass
    assert http.requests[0].headers["authorization"] == f"Bearer {secret}"
    message = str(caught.value)
    assert "127.0.0.1" in message and secret not in message, message
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("llm_worker")]
    assert not [m for m in ours if secret in m]


async def test_a_call_timeout_tells_the_server_and_the_model_reads_an_error(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    script = [
        ScriptedResponse([ToolUsePart("c1", "slow", {})]),
        ScriptedResponse.text("done"),
    ]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("normal", log), timeout=0.5) as server,
            ScriptedModelServer("gemini", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            result = await worker.run("go")
            await (await _echo(server)).execute('{"text": "sync"}')  # the log is written
    assert result.status is RunStatus.FINISHED
    assert "slow done" not in json.dumps(model.requests[-1].json())
    lines = _log_lines(log)
    [call] = [n["id"] for n in lines if n.get("name") == "slow"]
    [cancelled] = [n for n in lines if n.get("notification") == "notifications/cancelled"]
    assert cancelled["params"]["requestId"] == call  # type: ignore[index]


async def test_cancelling_async_with_during_initialize_ends_promptly() -> None:
    server = MCPServer.stdio(*scripted("silent"), init_timeout=30)
    with anyio.fail_after(10):
        with anyio.move_on_after(0.5) as scope:
            async with server:
                pytest.fail("a silent server initialized")
        assert scope.cancelled_caught
    with anyio.fail_after(10), pytest.raises(MCPConnectionError, match="silent"):
        async with MCPServer.stdio(*scripted("silent"), init_timeout=0.3):
            pass


async def test_parallel_calls_that_time_out_each_cancel_their_own_request(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    hang = {"text": "!hang"}
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", hang), ToolUsePart("c2", "echo", hang)]),
        ScriptedResponse.text("done"),
    ]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("normal", log), timeout=0.5) as server,
            ScriptedModelServer("openai_responses", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            result = await worker.run("go")
            await (await _echo(server)).execute('{"text": "sync"}')
    assert result.status is RunStatus.FINISHED
    lines = _log_lines(log)
    calls = sorted(n["id"] for n in lines if n.get("request"))[:2]  # type: ignore[type-var]
    notes = [n for n in lines if n.get("notification") == "notifications/cancelled"]
    assert sorted(n["params"]["requestId"] for n in notes) == calls  # type: ignore[index]


async def test_an_mcp_server_outside_async_with_is_a_typed_error() -> None:
    script = [ScriptedResponse.text("never")]
    with anyio.fail_after(20):
        async with ScriptedModelServer("anthropic", script) as model, model.client() as client:
            worker = Worker(client, tools=[MCPServer.stdio(*scripted("normal"), name="cold")])
            with pytest.raises(MCPConnectionError, match="cold"):
                await worker.run("go")


async def test_tool_names_that_clash_once_made_valid_still_give_a_working_run() -> None:
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": "hi"})]),
        ScriptedResponse.text("done"),
    ]
    with anyio.fail_after(20):
        async with (
            MCPServer.stdio(*scripted("clash")) as server,
            ScriptedModelServer("openai_chat", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            result = await worker.run("go")
            remote = {t.name: t.remote_name for t in await server.list_tools()}
    assert remote["a_b"] == "a.b" and remote["a_b_2"] == "a_b", remote
    assert result.status is RunStatus.FINISHED, result
    names = [t["function"]["name"] for t in model.requests[0].json()["tools"]]
    assert len(names) == len(set(names)), names
