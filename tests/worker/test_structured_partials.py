"""Partial structured outputs while the answer streams: `OutputPartial` from `worker.stream()`."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import OutputPartial, Worker
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.worker._output import PartialFeed

pytestmark = pytest.mark.anyio


@dataclass
class Point:
    x: int
    y: int


class Report(BaseModel):
    title: str
    rows: list[Point]


async def _partials(worker: Worker[Report] | Worker[list[Point]]) -> list[OutputPartial]:
    found: list[OutputPartial] = []
    with anyio.fail_after(30):
        async with worker.stream("Go.") as stream:
            async for event in stream:
                if isinstance(event, OutputPartial):
                    found.append(event)
    return found


def _report(rows: int) -> Report:
    return Report(title="Totals", rows=[Point(i, i * 2) for i in range(rows)])


async def test_partials_grow_as_the_json_arrives_and_the_result_is_whole() -> None:
    report = _report(60)
    answer = ScriptedResponse.output(report, chunk_size=5)
    async with ScriptedModelServer("openai_responses", [answer]) as server:
        client = server.client()
        worker = Worker(client, output_type=Report, output_partial_interval=0)
        partials = await _partials(worker)
        await client.aclose()
    assert len(partials) >= 3
    sizes = [p.size for p in partials]
    assert sizes == sorted(sizes)
    counts = [len(p.value.rows) for p in partials]
    assert counts == sorted(counts)
    assert counts[0] < 60
    assert all(isinstance(p.value, Report) and p.value.title == "Totals" for p in partials)
    assert partials[-1].value == report  # the last read, at the block's end, is complete


async def test_tool_mode_partials_come_from_the_output_calls_arguments() -> None:
    points = [Point(i, i) for i in range(80)]
    answer = ScriptedResponse.output(points, tool="final_result")
    async with ScriptedModelServer("anthropic", [answer, ScriptedResponse.text("done")]) as server:
        client = server.client()
        worker = Worker(client, output_type=list[Point], output_mode="tool")
        partials = await _partials(worker)
        await client.aclose()
    assert partials
    assert all(isinstance(p.value, list) for p in partials)
    assert partials[-1].value == points


async def test_many_small_deltas_are_validated_a_bounded_number_of_times() -> None:
    report = _report(1000)  # ~ 15 kB of JSON in 3-character deltas: ~5,000 deltas
    text = report.model_dump_json()
    answer = ScriptedResponse.text(text, chunk_size=3)
    # No interval: the worst case, where only the growth rule bounds the work.
    worker = Worker(ScriptedClient([answer]), output_type=Report, output_partial_interval=0)
    partials = await _partials(worker)
    deltas = len(text) // 3
    assert deltas > 4_900
    # Each validation reads the whole text: once a partial was sent it happens only when
    # the text has grown by a sixty-fourth, so the count grows with the log of the size.
    assert 100 < len(partials) < 64 * math.log(len(text)) + 64
    assert partials[-1].value == report
    gaps = [(b.size - a.size, a.size) for a, b in itertools.pairwise(partials)]
    assert all(gap >= size >> PartialFeed.shift for gap, size in gaps[:-1])


async def test_a_plain_run_sends_no_partials_and_a_text_stream_none() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.output(_report(3))]), output_type=Report)
    with anyio.fail_after(5):
        result = await worker.run("Go.")
    assert result.output == _report(3)
    text_worker = Worker(ScriptedClient([ScriptedResponse.text('{"a": 1}')]))
    with anyio.fail_after(5):
        async with text_worker.stream("Go.") as stream:
            kinds = {type(event) async for event in stream}
    assert OutputPartial not in kinds
