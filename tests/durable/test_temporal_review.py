"""Review probes of the Temporal engine (issue 38): payloads, secrets, hostile clients."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.blobs import MemoryBlobStore
from llm_worker.durable import PayloadTooLargeError
from llm_worker.durable.temporal import TemporalWorker
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)
BIG = 1_200_000  # under Temporal's 2 MB payload limit; two are over it


@tool(effect="read_only")
def fetch(size: int) -> str:
    """Fetch a page of `size` characters."""
    return "x" * size


def two_pages() -> list[ScriptedResponse]:
    calls = [ToolUsePart("f1", "fetch", {"size": BIG}), ToolUsePart("f2", "fetch", {"size": BIG})]
    return [
        ScriptedResponse(calls, usage=USAGE),
        ScriptedResponse.text("Read.", usage=USAGE),
    ]


@pytest.mark.timeout(120)
async def test_outputs_under_the_limit_each_but_over_it_together_fail_naming_the_blob_store(
    temporal_client: Any,
) -> None:
    """The next request holds both: the server refused it and the run hung, never ending."""
    async with ScriptedModelServer("anthropic", two_pages()) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[fetch]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(PayloadTooLargeError, match="blob store") as raised:
                    await durable.run("Fetch", run_id="two-big")
                assert await durable.status("two-big") == "failed"
        assert len(server.requests) == 1  # the second was never sent
    assert "request 2" in raised.value.what


@pytest.mark.timeout(120)
async def test_with_a_blob_store_the_same_outputs_fit(temporal_client: Any) -> None:
    async with ScriptedModelServer("anthropic", two_pages()) as server, server.client() as c:
        worker = Worker(c, tools=[fetch], blob_store=MemoryBlobStore())
        durable = TemporalWorker(worker, name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                result = await durable.run("Fetch", run_id="two-big-stored")
    assert result.text == "Read."
    assert len(server.requests) == 2
