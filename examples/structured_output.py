"""Structured output: a typed answer, streamed as it is built, retried when invalid.

`Worker(client, output_type=Invoice)` asks the provider for JSON of the model's schema (its
native structured output), validates the answer and returns the `Invoice` in
`result.output` (typed: `RunResult[Invoice]`). While the answer streams, `worker.stream()`
yields `OutputPartial[Invoice]` events with the value validated so far — what a live form or
table is built from: the first as soon as the JSON so far fits, then one every
`output_partial_interval` seconds (0.05 by default). An answer that does not validate goes
back to the model with its errors, at most `output_retries` times; the stream says so with an
`OutputRejected` event (its partials were of the rejected answer). `result.output` raises
`NoOutputError` on a run that has none (paused, cancelled, refused): check `result.status`,
or read `result.output_or_none`.

Run: `python examples/structured_output.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import anyio
from _common import model
from pydantic import BaseModel

from llm_worker import OutputPartial, OutputRejected, Worker
from llm_worker.testing import ScriptedResponse


class Line(BaseModel):
    item: str
    quantity: int
    price: float


class Invoice(BaseModel):
    """An invoice read from a document."""

    number: str
    customer: str
    total: float
    # Last: while it streams, the partial invoice has its lines so far (a partial model
    # validates once its required fields have begun to arrive).
    lines: list[Line]


INVOICE = Invoice(
    number="INV-2041",
    customer="Kyoto Tea House",
    total=315.0,
    lines=[
        Line(item="Sencha, 100 g", quantity=12, price=8.5),
        Line(item="Matcha, 30 g", quantity=6, price=14.0),
        Line(item="Kyusu teapot", quantity=2, price=42.0),
        Line(item="Bamboo whisk", quantity=4, price=11.25),
        Line(item="Hojicha, 100 g", quantity=0, price=7.0),
        Line(item="Genmaicha, 100 g", quantity=0, price=6.5),
        Line(item="Tea towel", quantity=0, price=4.0),
        Line(item="Gift box", quantity=0, price=3.0),
    ],
)

SCRIPT = [
    # A first answer whose total is a word: it is sent back with the validation error.
    ScriptedResponse.text(
        '{"number": "INV-2041", "customer": "Kyoto Tea House", "lines": [], '
        '"total": "three hundred"}'
    ),
    ScriptedResponse.output(INVOICE, chunk_size=8),
]

DOCUMENT = """INVOICE INV-2041 — Kyoto Tea House
12 x Sencha, 100 g @ 8.50 · 6 x Matcha, 30 g @ 14.00 · 2 x Kyusu teapot @ 42.00
4 x Bamboo whisk @ 11.25 · (not ordered: Hojicha 7.00, Genmaicha 6.50, Tea towel 4.00,
Gift box 3.00) · TOTAL 315.00"""


async def main() -> None:
    async with model(SCRIPT, provider="openai_responses") as (client, server):
        worker = Worker(client, output_type=Invoice, output_retries=2)
        async with worker.stream(f"Read this invoice:\n{DOCUMENT}") as stream:
            async for event in stream:
                if isinstance(event, OutputPartial):
                    partial = event.value
                    print(f"… {event.size:4} chars: {len(partial.lines)} line(s) so far")
                elif isinstance(event, OutputRejected):
                    print(f"✗ answer {event.attempt} rejected: {'; '.join(event.errors)}")
        result = stream.result
        invoice = result.output  # an Invoice, checked by pydantic
        print(f"finished after {result.requests} requests")
        print(f"invoice {invoice.number} for {invoice.customer}: {len(invoice.lines)} lines")
        for line in invoice.lines:
            print(f"  {line.quantity:3} x {line.item:<16} {line.price:7.2f}")
        print(f"total = {invoice.total:.2f}")
        if server is not None:
            body = server.requests[0].json()
            print(f"asked for: {body['text']['format']['type']} {body['text']['format']['name']}")


if __name__ == "__main__":
    anyio.run(main)
