"""MCPServer against servers nobody here wrote: mcp-server-time and server-everything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import RunStatus, ToolProgress, ToolResultReady, Worker
from llm_worker.mcp import MCPServer
from llm_worker.messages import ImagePart, ToolResultPart, ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse
from support.mcp_servers import TIME_SERVER


@pytest.mark.anyio
async def test_time_server_lists_its_tools_with_their_schemas() -> None:
    with anyio.fail_after(30):
        async with MCPServer.stdio(*TIME_SERVER) as server:
            tools = {t.name: t for t in await server.list_tools()}
    assert set(tools) == {"get_current_time", "convert_time"}
    get_time = tools["get_current_time"]
    assert get_time.input_schema["required"] == ["timezone"]
    assert "timezone" in get_time.input_schema["properties"]
    assert get_time.meta.effect == "read_only"  # its readOnlyHint
    assert get_time.description


def answer_with_result(call: ScriptedRequest) -> ScriptedResponse:
    [result] = call.tool_results
    return ScriptedResponse.text(f"It is {json.loads(result.content)['datetime']}")


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai_chat"])
async def test_a_worker_calls_the_time_server_and_reads_its_answer(provider: str) -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "get_current_time", {"timezone": "Asia/Tokyo"})]),
        answer_with_result,
    ]
    with anyio.fail_after(30):
        async with (
            MCPServer.stdio(*TIME_SERVER) as time_server,
            ScriptedModelServer(provider, script) as model,
            model.client() as client,
            Worker(client, tools=[time_server]) as worker,
        ):
            result = await worker.run("What time is it in Tokyo?")
    assert result.status is RunStatus.FINISHED
    assert result.text.startswith("It is 20") and "+09:00" in result.text
    offered = json.dumps(model.requests[0].json())
    assert "get_current_time" in offered and "convert_time" in offered


# -- server-everything ---------------------------------------------------------------------


def everything_stdio(js: Path, **options: object) -> MCPServer:
    return MCPServer.stdio("node", [str(js), "stdio"], name="everything", **options)  # type: ignore[arg-type]


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest, everything_js: Path) -> MCPServer:
    if request.param == "stdio":
        return everything_stdio(everything_js)
    url: str = request.getfixturevalue("everything_http")
    return MCPServer.http(url, name="everything")


@pytest.mark.anyio
async def test_everything_annotations_become_effects(everything: MCPServer) -> None:
    with anyio.fail_after(30):
        async with everything as server:
            effects = {t.remote_name: t.meta.effect for t in await server.list_tools()}
    assert effects["echo"] == "read_only"
    assert effects["gzip-file-as-resource"] == "idempotent"
    assert effects["toggle-simulated-logging"] == "side_effect"


@pytest.mark.anyio
async def test_everything_results_structured_image_resource(everything: MCPServer) -> None:
    with anyio.fail_after(30):
        async with everything as server:
            tools = {t.remote_name: t for t in await server.list_tools()}
            structured = await tools["get-structured-content"].execute('{"location": "Chicago"}')
            image = await tools["get-tiny-image"].execute("{}")
            resource = await tools["get-resource-reference"].execute(
                '{"resourceType": "Text", "resourceId": 1}'
            )
            echoed = await tools["echo"].execute('{"message": "hi"}')
    assert isinstance(structured, str)
    assert set(json.loads(structured)) == {"temperature", "conditions", "humidity"}
    assert isinstance(image, list)
    [picture] = [i for i in image if isinstance(i, ImagePart)]
    assert picture.media_type == "image/png" and picture.data is not None
    assert picture.data.startswith(b"\x89PNG")
    assert "Here's the image you requested:" in image
    assert "[resource demo://resource/dynamic/text/1]" in resource
    assert echoed == "Echo: hi"


@pytest.mark.anyio
async def test_everything_progress_reaches_the_worker_stream(everything_js: Path) -> None:
    call = ToolUsePart("", "trigger-long-running-operation", {"duration": 0.3, "steps": 3})
    script = [ScriptedResponse([call]), ScriptedResponse.text("done")]
    with anyio.fail_after(30):
        async with (
            everything_stdio(everything_js) as server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            events = [e async for e in worker.stream("go")]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(p.progress, p.total) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {p.name for p in progress} == {"trigger-long-running-operation"}
    [ready] = [e for e in events if isinstance(e, ToolResultReady)]
    assert progress[0].tool_use_id == ready.result.tool_use_id
    assert not ready.result.is_error


@pytest.mark.anyio
async def test_everything_call_timeout_is_an_error_result(everything_js: Path) -> None:
    call = ToolUsePart("", "trigger-long-running-operation", {"duration": 30, "steps": 3})
    sent = await error_result_sent(everything_stdio(everything_js, timeout=0.5), call)
    assert "0.5" in json.dumps(sent)


async def error_result_sent(server: MCPServer, call: ToolUsePart) -> dict[str, Any]:
    """The tool result a Worker sends the model for `call`, checked to be an error; the
    server is checked to be still usable after it."""
    script = [ScriptedResponse([call]), ScriptedResponse.text("ok")]
    with anyio.fail_after(30):
        async with (
            server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            result = await worker.run("go")
            [echo] = [t for t in await server.list_tools() if t.remote_name == "echo"]
            assert await echo.execute('{"message": "still here"}') == "Echo: still here"
    assert result.status is RunStatus.FINISHED
    [sent] = model.requests[1].json()["messages"][-1]["content"]
    assert sent["is_error"] is True
    return sent


@pytest.mark.anyio
async def test_prefix_include_exclude(everything_js: Path) -> None:
    with anyio.fail_after(30):
        async with everything_stdio(
            everything_js, prefix="ev_", include=["echo", "get-sum", "get-env"], exclude=["get-env"]
        ) as server:
            names = [t.name for t in await server.list_tools()]
    assert names == ["ev_echo", "ev_get-sum"]


@pytest.mark.anyio
async def test_an_mcp_image_becomes_an_image_result(everything_js: Path) -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "get-tiny-image", {})]),
        ScriptedResponse.text("ok"),
    ]
    with anyio.fail_after(30):
        async with (
            everything_stdio(everything_js) as server,
            ScriptedModelServer("anthropic", script) as model,
            model.client() as client,
            Worker(client, tools=[server]) as worker,
        ):
            stream = worker.stream("show me")
            ready = [e async for e in stream if isinstance(e, ToolResultReady)]
    [result] = [e.result for e in ready]
    assert result.content == "Here's the image you requested:\nThe image above is the MCP logo."
    [image] = result.media
    assert isinstance(image, ImagePart) and image.media_type == "image/png"
    [part] = [p for m in worker.history for p in m.content if isinstance(p, ToolResultPart)]
    assert part.media == [image]  # in the history the next request is built from


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_an_image_over_max_image_bytes_is_an_error_result_naming_the_limit(
    kind: str, request: pytest.FixtureRequest, everything_js: Path
) -> None:
    # server-everything's tiny image is about 2 KB of base64: over a 1,000-byte limit
    if kind == "stdio":
        server = everything_stdio(everything_js, max_image_bytes=1000)
    else:
        url: str = request.getfixturevalue("everything_http")
        server = MCPServer.http(url, name="everything", max_image_bytes=1000)
    sent = await error_result_sent(server, ToolUsePart("", "get-tiny-image", {}))
    assert "max_image_bytes=1000" in json.dumps(sent)
    assert '"image"' not in json.dumps(sent)  # the image never reached the model


@pytest.mark.anyio
async def test_strict_tools_take_the_strict_form_and_nulls_are_left_out(
    everything_js: Path,
) -> None:
    with anyio.fail_after(30):
        async with everything_stdio(everything_js, strict=True) as server:
            tools = {t.remote_name: t for t in await server.list_tools()}
            echo = tools["echo"]
            # get-sum's schema is closed and typed: strict; the model's null for an optional
            # argument of trigger-long-running-operation is dropped before the server sees it
            slow = tools["trigger-long-running-operation"]
            done = await slow.execute('{"duration": 0.1, "steps": null}')
    assert echo.meta.strict
    assert echo.input_schema["additionalProperties"] is False
    assert slow.meta.strict
    assert slow.input_schema["required"] == ["duration", "steps"]
    assert "Steps: 5" in str(done)  # the server's default, not a null
