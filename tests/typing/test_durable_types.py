# pyright: reportUnnecessaryTypeIgnoreComment=true
"""`DurableWorker` is generic in its Worker's output type, checked by pyright strict.

`DurableWorker(Worker(client, output_type=Invoice), ...)` is a `DurableWorker[Invoice]` whose
`run()` and `result()` give `RunResult[Invoice]`; over a text Worker, `RunResult[str]`. The
expected errors below fail pyright if they stop firing. The tests also run under pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import RunResult, ToolUsePart, Worker
from llm_worker.durable import DurableWorker
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio


class Invoice(BaseModel):
    number: str
    total: float


def _text_only(durable: DurableWorker[str]) -> str:
    return durable.name


async def test_a_durable_worker_carries_its_workers_output_type(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    answer = ScriptedResponse([ToolUsePart("o1", "final_result", {"number": "7", "total": 2})])
    async with ScriptedModelServer("anthropic", [answer]) as server, server.client() as c:
        invoices = DurableWorker(
            Worker(c, output_type=Invoice, output_mode="tool"), name="t", database_url=url
        )
        assert_type(invoices, DurableWorker[Invoice])
        texts = DurableWorker(Worker(c), name="x", database_url=url, serve=False)
        assert_type(texts, DurableWorker[str])
        assert _text_only(texts) == "x"
        _text_only(invoices)  # pyright: ignore[reportArgumentType]
        with anyio.fail_after(60):
            async with invoices:
                result = await invoices.run("Read it", run_id="inv-1")
                again = await invoices.result("inv-1")
    assert_type(result, RunResult[Invoice])
    assert_type(again, RunResult[Invoice])
    output: object = again.output
    assert output == Invoice(number="7", total=2)
    wrong: RunResult[str] = again  # pyright: ignore[reportAssignmentType]
    assert wrong is again


def test_a_text_durable_worker_gives_text_results() -> None:
    async def result_of(durable: DurableWorker[str]) -> None:
        assert_type(await durable.result("r"), RunResult[str])
        assert_type(await durable.run("hi"), RunResult[str])

    assert callable(result_of)


def test_both_engines_meet_the_engine_neutral_protocol() -> None:
    from llm_worker.durable import DurableRuns
    from llm_worker.durable.temporal import TemporalWorker

    def on_either(runs: DurableRuns[Invoice]) -> str:
        return runs.name

    def check(
        dbos: DurableWorker[Invoice], temporal: TemporalWorker[Invoice], texts: DurableWorker[str]
    ) -> None:
        on_either(dbos)
        on_either(temporal)
        on_either(texts)  # pyright: ignore[reportArgumentType]

    assert callable(check)
