"""A structured output in the browser: its partial, rejected and final values as parts.

The `ai` package's client and @ag-ui/client (tests/ui/node) read them; every chunk and event
passes their schemas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from pydantic import BaseModel, Field

from llm_worker import OutputPartial, StopReason, Worker
from llm_worker.hooks import Pause
from llm_worker.messages import Origin
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.ui import messages_from_ui, to_agui_events, to_vercel_stream

from .conftest import AGUI, VERCEL, Consumer, serve

pytestmark = pytest.mark.anyio

DATA = "data-llm-worker-output"


class Invoice(BaseModel):
    number: str = Field(alias="invoiceNumber")
    total: float
    lines: list[str]


INVOICE = Invoice(invoiceNumber="INV-7", total=12.5, lines=["tea", "cups", "a whisk"])
WIRE = {"invoiceNumber": "INV-7", "total": 12.5, "lines": ["tea", "cups", "a whisk"]}
BAD = '{"invoiceNumber": "INV-7", "total": "a lot", "lines": []}'
SCRIPT = [ScriptedResponse.output(BAD), ScriptedResponse.output(WIRE, chunk_size=6)]


class Factory:
    def __init__(self, client: Any) -> None:
        self.client = client

    def __call__(self) -> Worker[Invoice]:
        return Worker(self.client, output_type=Invoice, output_partial_interval=0)


@asynccontextmanager
async def consumed(
    consumer: Consumer, node_modules: Path, provider: str
) -> AsyncIterator[dict[str, Any]]:
    async with (
        ScriptedModelServer(provider, SCRIPT) as server,
        server.client() as client,
        serve(consumer.adapter(Factory(client))) as url,
    ):
        yield await consumer.consume(node_modules, url, [{"send": "Read the invoice."}])


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
async def test_the_ai_client_holds_one_part_per_answer_rejected_then_final(
    provider: str, node_modules: Path
) -> None:
    async with consumed(VERCEL, node_modules, provider) as out:
        pass
    chunks = [c for c in out["chunks"] if c["type"] == DATA]
    statuses = [c["data"]["status"] for c in chunks]
    assert statuses[0] == "rejected" and statuses[-1] == "final"
    assert statuses.count("partial") >= 3  # the second answer, as it streamed
    assistant = out["messages"][-1]
    parts = [p for p in assistant["parts"] if p["type"] == DATA]
    # The client replaced each answer's part in place: one part per answer.
    assert [p["data"]["status"] for p in parts] == ["rejected", "final"]
    rejected, final = (p["data"] for p in parts)
    assert rejected["errors"] == [
        "total: Input should be a valid number, unable to parse string as a number (got 'a lot')"
    ]
    assert rejected["attempt"] == 1 and rejected["retriesLeft"] == 1
    assert final["value"] == WIRE  # by alias, as the model wrote it
    # The parts are for the page only: the history the client sends back has none of them.
    assert DATA not in str(messages_from_ui(out["messages"]))


@pytest.mark.parametrize("provider", ["gemini", "openai_chat"])
async def test_the_ag_ui_client_gets_custom_events_rejected_then_final(
    provider: str, node_modules: Path
) -> None:
    async with consumed(AGUI, node_modules, provider) as out:
        pass
    values = [
        e["value"]
        for e in out["events"]
        if e["type"] == "CUSTOM" and e["name"] == "llm-worker.output"
    ]
    assert [v["status"] for v in values if v["status"] != "partial"] == ["rejected", "final"]
    assert [v["answer"] for v in values if v["status"] != "partial"] == [1, 2]
    partials = [v for v in values if v["status"] == "partial"]
    assert len(partials) >= 3 and all(v["answer"] == 2 for v in partials)
    assert values[-1]["value"] == WIRE
    assert out["finished"][-1]["outcome"] == {"type": "success"}


async def _vercel(worker: Worker[Any]) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    stream = worker.stream("Go.")
    with anyio.fail_after(5):
        async for line in to_vercel_stream(stream, message_id="m1", origin=Origin("s", "s")):
            if line.startswith("data: {"):
                chunks.append(orjson.loads(line[6:]))
    return chunks


async def test_a_text_run_has_no_output_part() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text('{"looks": "like JSON"}')]))
    chunks = await _vercel(worker)
    assert chunks and not [c for c in chunks if c["type"] == DATA]


@dataclass
class Point:
    x: int
    y: int


async def test_a_tool_mode_output_of_dataclasses_is_sent_as_json() -> None:
    answer = ScriptedResponse.output([Point(1, 2), Point(3, 4)], tool="final_result")
    client = ScriptedClient([answer])
    worker = Worker(client, output_type=list[Point], output_mode="tool")
    chunks = await _vercel(worker)
    [*_, final] = [c for c in chunks if c["type"] == DATA]
    assert final["data"] == {"status": "final", "value": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]} | {
        "answer": 1
    }
    # The final part comes before the run's finish.
    kinds = [c["type"] for c in chunks]
    assert kinds.index(DATA) < kinds.index("finish")


async def test_ag_ui_events_of_a_rejected_answer_without_a_partial() -> None:
    client = ScriptedClient([ScriptedResponse.output("{}"), ScriptedResponse.output(WIRE)])
    worker = Worker(client, output_type=Invoice)
    events: list[dict[str, Any]] = []
    with anyio.fail_after(5):
        async for line in to_agui_events(
            worker.stream("Go."), thread_id="t", run_id="r", origin=Origin("s", "s")
        ):
            events.append(orjson.loads(line[6:]))
    values = [e["value"] for e in events if e.get("name") == "llm-worker.output"]
    assert values[0]["status"] == "rejected" and values[0]["answer"] == 1
    assert sorted(values[0]["errors"]) == [
        "invoiceNumber: required, but missing",
        "lines: required, but missing",
        "total: required, but missing",
    ]
    assert values[-1] == {"status": "final", "value": WIRE, "answer": 2}


def _outputs(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c["data"] for c in chunks if c["type"] == DATA]


async def test_a_run_paused_after_its_answer_marks_the_open_part_paused() -> None:
    client = ScriptedClient([ScriptedResponse.output(WIRE, chunk_size=4)])
    worker = Worker(client, output_type=Invoice, output_partial_interval=0)
    worker.add_on_turn_end_hook(lambda ctx: Pause("check it first"))
    outputs = _outputs(await _vercel(worker))
    assert {o["status"] for o in outputs[:-1]} == {"partial"}
    last = outputs[-1]
    assert (last["status"], last["value"], last["answer"]) == ("paused", WIRE, 1)


async def test_a_refusal_marks_the_open_part_refused() -> None:
    refusal = ScriptedResponse.text(
        '{"invoiceNumber": "INV-7", "total": 1, "lines": ["I will not',
        stop_reason=StopReason.REFUSAL,
    )
    worker = Worker(ScriptedClient([refusal]), output_type=Invoice)
    outputs = _outputs(await _vercel(worker))
    assert outputs[-1]["status"] == "refused"


async def test_partial_parts_of_a_long_answer_stay_within_nine_times_its_size() -> None:
    long = {"invoiceNumber": "INV-9", "total": 1.0, "lines": [f"line {n:04}" for n in range(2000)]}
    answer = ScriptedResponse.output(long, chunk_size=5)
    worker = Worker(ScriptedClient([answer]), output_type=Invoice, output_partial_interval=0)
    chunks = await _vercel(worker)
    size = len(orjson.dumps(long))
    sent = sum(len(orjson.dumps(c)) for c in chunks if c["type"] == DATA)
    partials = [o for o in _outputs(chunks) if o["status"] == "partial"]
    assert len(partials) >= 20  # still a live view
    assert sent < 10 * size  # but not the whole value on every try (~80 tries of ~60 kB)
    assert _outputs(chunks)[-1]["value"] == long


async def test_a_run_cancelled_while_its_answer_streams_marks_the_part_cancelled() -> None:
    client = ScriptedClient([ScriptedResponse.output(WIRE, chunk_size=4)])
    worker = Worker(client, output_type=Invoice, output_partial_interval=0)

    async def cancel_at_first_partial(stream: Any) -> AsyncIterator[object]:
        async with stream:
            async for event in stream:
                if isinstance(event, OutputPartial):
                    worker.cancel()
                yield event

    chunks: list[dict[str, Any]] = []
    events = cancel_at_first_partial(worker.stream("Go."))
    with anyio.fail_after(5):
        async for line in to_vercel_stream(events, message_id="m1", origin=Origin("s", "s")):
            if line.startswith("data: {"):
                chunks.append(orjson.loads(line[6:]))
    outputs = _outputs(chunks)
    assert outputs[-1]["status"] == "cancelled" and outputs[-1]["answer"] == 1
    assert chunks[-1]["type"] == "abort"
