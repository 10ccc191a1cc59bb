# pyright: reportUnnecessaryTypeIgnoreComment=true
"""The newcomer's invoice desk (issue 31), written without a cast, checked by pyright strict.

A typed `Worker[Invoice]` streams `OutputPartial[Invoice]`s and ends with a `RunResult[Invoice]`;
the same factory serves the web adapters; a `DurableWorker` over it gives `RunResult[Invoice]`
back from its record. Nothing here needs `cast`, `Any` or an unchecked `None`: each value is
used as an `Invoice` where pyright says it is one, and checked where it may be missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import (
    NoOutputError,
    OutputPartial,
    OutputRejected,
    PauseState,
    RunCompleted,
    RunResult,
    RunStatus,
    Worker,
)
from llm_worker.durable import DurableWorker
from llm_worker.hooks import Pause
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

pytestmark = pytest.mark.anyio


class Line(BaseModel):
    item: str
    amount: float


class Invoice(BaseModel):
    number: str
    total: float
    lines: list[Line]


INVOICE = Invoice(number="INV-7", total=12.5, lines=[Line(item="tea", amount=12.5)])


def total_of(invoice: Invoice) -> float:
    return invoice.total


async def read_invoice(worker: Worker[Invoice], prompt: str) -> tuple[list[float], Invoice]:
    """The desk's loop: show each partial's lines so far, then book the validated invoice."""
    shown: list[float] = []
    rejected: list[str] = []
    async with worker.stream(prompt) as stream:
        async for event in stream:
            if isinstance(event, OutputPartial):
                shown.append(sum(line.amount for line in event.value.lines))
            elif isinstance(event, OutputRejected):
                rejected.extend(event.errors)
            elif isinstance(event, RunCompleted):
                result = event.result
                assert_type(result, RunResult[Invoice])
                if result.status is RunStatus.FINISHED:
                    return shown, result.output  # an Invoice: no cast, no None check
    raise AssertionError(f"no invoice: {rejected}")


async def test_the_invoice_desk_types_end_to_end(tmp_path: Path) -> None:
    bad = ScriptedResponse.output('{"number": "INV-7", "total": "a lot", "lines": []}')
    good = ScriptedResponse.output(INVOICE, chunk_size=5)
    async with ScriptedModelServer("openai_chat", [bad, good]) as server, server.client() as c:

        def desk() -> Worker[Invoice]:
            return Worker(c, output_type=Invoice, output_partial_interval=0)

        with anyio.fail_after(10):
            shown, invoice = await read_invoice(desk(), "Read the invoice.")
        assert_type(invoice, Invoice)
        assert invoice == INVOICE and total_of(invoice) == 12.5
        assert shown and shown[-1] == 12.5
        # The same factory serves the browser, typed as it stands.
        assert VercelAIAdapter(desk) is not None and AGUIAdapter(desk) is not None

    url = f"sqlite:///{tmp_path / 'desk.sqlite'}"
    async with ScriptedModelServer("anthropic", good) as server, server.client() as c:
        durable = DurableWorker(Worker(c, output_type=Invoice), name="desk", database_url=url)
        assert_type(durable, DurableWorker[Invoice])
        with anyio.fail_after(60):
            async with durable:
                await durable.run("Read it.", run_id="inv-7")
                again = await durable.result("inv-7")
        assert_type(again, RunResult[Invoice])
        assert total_of(again.output) == 12.5  # from the JSON record, an Invoice again


async def test_a_paused_desk_run_says_so_in_its_type() -> None:
    answer = ScriptedResponse.output(INVOICE)
    async with ScriptedModelServer("gemini", answer) as server, server.client() as c:
        worker = Worker(c, output_type=Invoice)
        worker.add_on_turn_end_hook(lambda ctx: Pause("a person checks it"))
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        maybe = paused.output_or_none
        with pytest.raises(AttributeError):  # None on a paused run: pyright says so
            total_of(maybe)  # pyright: ignore[reportArgumentType]
        with pytest.raises(NoOutputError, match="paused"):
            total_of(paused.output)
        fresh = Worker(c, output_type=Invoice)
        with anyio.fail_after(10):
            resumed = await fresh.resume(PauseState.from_json(paused.state.to_json()))
    assert_type(resumed, RunResult[Invoice])
    assert resumed.output == INVOICE
