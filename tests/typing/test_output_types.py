# pyright: reportUnnecessaryTypeIgnoreComment=true
"""Structured output's types, checked by pyright strict (CI runs it on tests/typing).

`Worker(client)` is a `Worker[str]` whose results hold text; `Worker(client,
output_type=Invoice)` a `Worker[Invoice]` whose `RunResult[Invoice].output` is an `Invoice`;
a JSON Schema dict gives `Worker[Any]`. The tests also run under pytest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_type

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import OutputPartial, RunResult, RunStatus, RunStream, Worker
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


class Invoice(BaseModel):
    number: str
    total: float


@dataclass
class Point:
    x: int
    y: int


def test_the_output_type_gives_the_workers_type() -> None:
    client = ScriptedClient([])
    assert_type(Worker(client), Worker[str])
    assert_type(Worker(client, output_type=Invoice), Worker[Invoice])
    assert_type(Worker(client, output_type=Point, output_mode="tool"), Worker[Point])
    assert_type(Worker(client, output_type=list[Point]), Worker[list[Point]])
    assert_type(Worker(client, output_type={"type": "object"}), Worker[Any])


async def test_run_gives_a_typed_result() -> None:
    client = ScriptedClient([ScriptedResponse.output(Invoice(number="1", total=2))])
    worker = Worker(client, output_type=Invoice)
    with anyio.fail_after(5):
        result = await worker.run("Go.")
    assert_type(result, RunResult[Invoice])
    assert_type(result.output, Invoice)
    assert result.output.total == 2


async def test_a_text_run_gives_a_str_result_and_streams_are_typed() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("Hi.")]))
    stream = worker.stream("Hello.")
    assert_type(stream, RunStream[str])
    with anyio.fail_after(5):
        async with stream:
            async for event in stream:
                assert not isinstance(event, OutputPartial)
    assert_type(stream.result, RunResult[str])
    assert_type(stream.result.output, str)
    assert stream.result.output == "Hi."


def test_a_bare_run_result_annotation_means_a_text_result() -> None:
    def text_of(result: RunResult) -> str:
        return result.output

    assert text_of(RunResult(RunStatus.FINISHED, output="x")) == "x"
