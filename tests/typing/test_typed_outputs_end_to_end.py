# pyright: reportUnnecessaryTypeIgnoreComment=true
"""A typed output from the run to the stream to the web adapters, checked by pyright strict.

Each `# pyright: ignore[...]` marks a line pyright must reject: if it stops rejecting it, the
ignore becomes unnecessary and pyright fails. The other lines must type-check as they stand
(strict mode also fails on an unnecessary `None` check). The tests also run under pytest.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, assert_type

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import (
    NoOutputError,
    OutputPartial,
    OutputRejected,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStatus,
    RunStream,
    Worker,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

pytestmark = pytest.mark.anyio


class Invoice(BaseModel):
    number: str
    total: float


def invoice_worker(*answers: ScriptedResponse) -> Worker[Invoice]:
    return Worker(ScriptedClient(list(answers)), output_type=Invoice)


async def test_a_finished_result_reads_its_output_as_the_type() -> None:
    worker = invoice_worker(ScriptedResponse.output(Invoice(number="1", total=2)))
    with anyio.fail_after(5):
        result = await worker.run("Go.")
    assert_type(result.output, Invoice)
    assert_type(result.output_or_none, Invoice | None)
    assert result.output.total == 2
    # Not an unnecessary check (strict mode would fail on one): None is a real case here.
    if result.output_or_none is not None:
        assert result.output_or_none.number == "1"


def test_output_or_none_must_be_checked_before_use() -> None:
    paused: RunResult[Invoice] = RunResult(RunStatus.PAUSED)
    with pytest.raises(AttributeError):
        paused.output_or_none.total  # pyright: ignore[reportOptionalMemberAccess]  # noqa: B018
    sure: Invoice = paused.output_or_none  # pyright: ignore[reportAssignmentType]
    assert sure is None  # what an unchecked read would have let through
    with pytest.raises(NoOutputError, match="paused"):
        paused.output.total  # noqa: B018 (typed Invoice: reading it raises a typed error)


def test_a_text_result_is_a_str_or_none() -> None:
    result = RunResult(RunStatus.FINISHED, output="Hi.")
    assert_type(result, RunResult[str])
    assert_type(result.output, str)
    assert_type(result.output_or_none, str | None)
    cancelled = RunResult(RunStatus.CANCELLED)
    assert cancelled.output_or_none is None and not cancelled.has_output


async def test_the_stream_yields_typed_partials_and_a_typed_result() -> None:
    bad = ScriptedResponse.output('{"number": "1"}')
    good = ScriptedResponse.output(Invoice(number="1", total=2), chunk_size=4)
    stream = invoice_worker(bad, good).stream("Go.")
    assert_type(stream, RunStream[Invoice])
    values: list[Invoice] = []
    errors: list[str] = []
    with anyio.fail_after(5):
        async with stream:
            async for event in stream:
                assert_type(event, RunEvent[Invoice])
                if isinstance(event, OutputPartial):
                    assert_type(event, OutputPartial[Invoice])
                    values.append(event.value)
                elif isinstance(event, OutputRejected):
                    errors.extend(event.errors)
                elif isinstance(event, RunCompleted):
                    assert_type(event.result, RunResult[Invoice])
                    assert_type(event.result.output, Invoice)
    assert values[-1] == Invoice(number="1", total=2)
    assert errors == ["total: required, but missing"]


def test_a_partial_has_the_output_types_fields_only() -> None:
    partial = OutputPartial(Invoice(number="1", total=2), 20)
    assert_type(partial, OutputPartial[Invoice])
    with pytest.raises(AttributeError):
        partial.value.missing  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]  # noqa: B018


async def test_a_bare_run_event_takes_any_workers_events() -> None:
    seen: list[RunEvent] = []
    text: list[RunEvent[str]] = []
    stream = invoice_worker(ScriptedResponse.output(Invoice(number="1", total=2))).stream("Go.")
    with anyio.fail_after(5):
        async with stream:
            async for event in stream:
                seen.append(event)
                text.append(event)  # pyright: ignore[reportArgumentType]
    assert isinstance(seen[-1], RunCompleted)


def test_the_web_adapters_take_a_factory_of_any_output_type() -> None:
    def make() -> Worker[Invoice]:
        return invoice_worker()

    async def make_async(body: dict[str, Any]) -> Worker[Invoice]:
        return invoice_worker()

    def make_text() -> Awaitable[Worker[str]]:
        async def build() -> Worker[str]:
            return Worker(ScriptedClient([]))

        return build()

    def not_a_worker() -> str:
        return "no"

    assert VercelAIAdapter(make) is not None
    assert VercelAIAdapter(make_async) is not None
    assert AGUIAdapter(make) is not None
    assert AGUIAdapter(make_text) is not None
    VercelAIAdapter(not_a_worker)  # pyright: ignore[reportArgumentType]
    AGUIAdapter(not_a_worker)  # pyright: ignore[reportArgumentType]
