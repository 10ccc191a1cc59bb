"""Review probes of the Temporal engine (issue 38).

Payloads, heartbeats, secrets in the history, a hostile client, the output type.
"""

from __future__ import annotations

import base64
import json
from typing import Any, assert_type, cast

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import RunResult, TextPart, ToolUsePart, Worker, tool
from llm_worker.blobs import MemoryBlobStore
from llm_worker.durable import PayloadTooLargeError
from llm_worker.durable.temporal import TemporalWorker
from llm_worker.errors import APITimeoutError
from llm_worker.events import UsageEvent
from llm_worker.messages import Part
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)
BIG = 1_200_000  # under Temporal's 2 MB payload limit; two are over it


def decoded(value: object) -> str:
    """The history's JSON with every payload's data decoded (JSON stores it as base64)."""
    if isinstance(value, dict):
        items = cast("dict[str, object]", value)
        data = items.get("data")
        text = base64.b64decode(data).decode(errors="replace") if isinstance(data, str) else ""
        return text + "".join(decoded(v) for v in items.values())
    if isinstance(value, list):
        return "".join(decoded(v) for v in cast("list[object]", value))
    return str(value)


@tool(effect="read_only")
def fetch(size: int) -> str:
    """Fetch a page of `size` characters."""
    return "x" * size


def two_pages() -> list[ScriptedResponse]:
    calls: list[Part] = [
        ToolUsePart("f1", "fetch", {"size": BIG}),
        ToolUsePart("f2", "fetch", {"size": BIG}),
    ]
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


@pytest.mark.timeout(120)
async def test_a_request_streaming_for_several_heartbeats_is_sent_once(
    temporal_client: Any,
) -> None:
    """A live process's long stream keeps its activity: its heartbeats reach the server.

    The SDK sends heartbeats at 0.8 times the heartbeat timeout: on a busy machine one came
    late, Temporal took the process for dead and made the request again beside the first.
    """
    slow = ScriptedResponse([TextPart("x" * 400)], usage=USAGE, chunk_size=4, delay=0.06)
    async with ScriptedModelServer("anthropic", [slow]) as server, server.client() as c:
        durable = TemporalWorker(Worker(c), name="t", client=temporal_client, heartbeat=1.0)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                result = await durable.run("Talk", run_id="long-stream")
        assert len(server.requests) == 1
    assert result.text == "x" * 400


@pytest.mark.timeout(120)
async def test_the_api_key_is_nowhere_in_the_workflow_history_or_memo(
    temporal_client: Any,
) -> None:
    """The history is readable by anyone with the namespace: requests go in it, keys never."""
    from llm_worker.providers import AnthropicClient

    canary = "sk-ant-canary-5e1f0c2d9b"
    script = [
        ScriptedResponse([ToolUsePart("f1", "fetch", {"size": 10})], usage=USAGE),
        ScriptedResponse.text("Read.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server:
        client = AnthropicClient(model="scripted-model", base_url=server.base_url, api_key=canary)
        async with client:
            durable = TemporalWorker(
                Worker(client, tools=[fetch]), name="t", client=temporal_client
            )
            with anyio.fail_after(TIMEOUT):
                async with durable:
                    result = await durable.run("Fetch", run_id="keyed")
        assert canary in str(server.requests[0].headers)  # the key was sent, to the model
    handle = temporal_client.get_workflow_handle("keyed")
    history = decoded(json.loads((await handle.fetch_history()).to_json()))
    memo = await (await handle.describe()).memo()
    assert result.text == "Read."
    assert '"scripted-model"' in history  # the requests are in it, decoded
    assert canary not in history
    assert canary not in str(memo)


@pytest.mark.timeout(120)
async def test_a_hostile_client_signals_queries_and_forged_waits_leave_the_pause_as_it_is(
    temporal_client: Any,
) -> None:
    """Another client of the server: unknown signals, bad query arguments, forged updates."""
    from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError

    from llm_worker import Decision

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 5})], usage=USAGE),
        ScriptedResponse.text("Paid.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = TemporalWorker(Worker(c, tools=[pay]), name="t", client=temporal_client)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="hostile-2")
                assert await durable.paused(run_id) is not None
                handle: Any = temporal_client.get_workflow_handle(run_id)
                await handle.signal("llm-worker.decide", {"wait": 0, "decisions": {}})
                await handle.signal("whatever", "\ud800" * 3)
                with pytest.raises(WorkflowQueryFailedError):
                    await handle.query("llm-worker.progress", "x")
                for forged in (
                    {"wait": 7, "decisions": {"p1": {"allow": True}}},
                    {"wait": True, "decisions": {"p9": {"allow": True}}},
                    ["not", "an", "object"],
                ):
                    with pytest.raises(WorkflowUpdateFailedError):
                        await handle.execute_update("llm-worker.decide", forged)
                assert await durable.status(run_id) == "paused"
                await durable.decide(run_id, {"p1": Decision.approve()})
                result = await durable.result(run_id)
    assert result.text == "Paid."


class Invoice(BaseModel):
    """A structured output."""

    number: str
    total: float


async def test_a_temporal_worker_carries_its_workers_output_type(temporal_client: Any) -> None:
    """TemporalWorker[Invoice] from Worker(output_type=Invoice), checked by pyright strict."""
    answer = ScriptedResponse([ToolUsePart("o1", "final_result", {"number": "7", "total": 2})])
    async with ScriptedModelServer("anthropic", [answer]) as server, server.client() as c:
        worker = Worker(c, output_type=Invoice, output_mode="tool")
        invoices = TemporalWorker(worker, name="t", client=temporal_client)
        assert_type(invoices, TemporalWorker[Invoice])
        texts = TemporalWorker(Worker(c), name="x", client=temporal_client, serve=False)
        assert_type(texts, TemporalWorker[str])
        with anyio.fail_after(TIMEOUT):
            async with invoices:
                result = await invoices.run("Read it", run_id="inv-1")
                again = await invoices.result("inv-1")
    assert_type(result, RunResult[Invoice])
    assert_type(again, RunResult[Invoice])
    output: object = again.output
    assert output == Invoice(number="7", total=2)
    wrong: RunResult[str] = again  # pyright: ignore[reportAssignmentType]
    assert wrong is again


@pytest.mark.timeout(120)
async def test_a_request_over_its_timeout_is_not_sent_again(temporal_client: Any) -> None:
    """A stream past `request_timeout` had started: Temporal's timeout sent it again, 10 times."""
    slow = ScriptedResponse([TextPart("x" * 400)], usage=USAGE, chunk_size=4, delay=0.05)
    async with ScriptedModelServer("anthropic", [slow] * 10) as server, server.client() as c:
        durable = TemporalWorker(
            Worker(c), name="t", client=temporal_client, heartbeat=1.0, request_timeout=1.5
        )
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(APITimeoutError, match="request_timeout"):
                    await durable.run("Talk", run_id="timed-out")
        count = len(server.requests)
    assert count == 1
