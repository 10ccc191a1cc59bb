"""The built-in inspect tool of a blob store: a clear name clash, a new name, metadata."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest

from llm_worker import ConfigurationError, MemoryBlobStore, RunStatus, ToolUsePart, Worker, tool
from llm_worker.hooks import ToolCallContext
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)

pytestmark = pytest.mark.anyio

BLOB = re.compile(r"\[blob:([0-9a-f-]{36})\]")


@tool(effect="read_only")
def inspect(path: str) -> str:
    """The application's own inspect: look at a file."""
    return f"{path}: 3 lines"


@tool(effect="read_only")
def big() -> str:
    """A large output."""
    return "\n".join(f"row {n}" for n in range(2_000))


def test_a_tool_named_like_the_built_in_gets_a_message_that_says_so() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Worker(ScriptedClient([]), tools=[inspect], blob_store=MemoryBlobStore())
    message = str(caught.value)
    assert "built-in" in message and "blob_store" in message
    assert "inspect_tool_name" in message
    worker = Worker(ScriptedClient([]), blob_store=MemoryBlobStore())
    with pytest.raises(ConfigurationError, match=r"built-in.*inspect_tool_name"):
        worker.add_tool(inspect)
    with pytest.raises(ConfigurationError, match="two tools are named 'big'"):
        Worker(ScriptedClient([]), tools=[big, big], blob_store=MemoryBlobStore())


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
async def test_the_built_in_renamed_reads_stored_outputs_beside_the_apps_inspect(
    provider: str,
) -> None:
    def read_it(request: ScriptedRequest) -> ScriptedResponse:
        blob = BLOB.search(request.tool_results[0].content)
        assert blob is not None
        args = {"blob_id": blob.group(1), "selector": "lines:7-8"}
        return ScriptedResponse([ToolUsePart("c3", "read_blob", args)])

    script: list[Any] = [
        ScriptedResponse(
            [ToolUsePart("c1", "big", {}), ToolUsePart("c2", "inspect", {"path": "a.txt"})]
        ),
        read_it,
        ScriptedResponse.text("Row 6 and row 7."),
    ]
    metas: dict[str, Any] = {}

    async def record(ctx: ToolCallContext) -> None:
        metas[ctx.call.name] = ctx.meta

    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        worker = Worker(
            client,
            tools=[big, inspect],
            blob_store=MemoryBlobStore(),
            inspect_tool_name="read_blob",
        )
        worker.add_before_tool_call_hook(record)
        with anyio.fail_after(10):
            result = await worker.run("look")
    assert result.status is RunStatus.FINISHED
    assert worker.tools.names == ("big", "inspect", "read_blob")
    meta = worker.tools.meta("read_blob")
    assert meta is not None and meta.name == "read_blob" and meta.effect == "read_only"
    assert not meta.exclusive and meta.timeout is None
    assert metas["read_blob"] == meta
    own, read = worker.history[-4].tool_results[1], worker.history[-2].tool_results[0]
    assert own.content == "a.txt: 3 lines"
    assert "row 6\nrow 7" in read.content and not read.is_error
