"""Review probes: hostile structured answers in the browser over the four wires.

A large answer that is rejected, then one that validates only after coercion, read by the
official `ai` and @ag-ui/client consumers (every chunk and event checked by their schemas).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from llm_worker import Worker
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

from .conftest import AGUI, VERCEL, Consumer, serve

pytestmark = pytest.mark.anyio

DATA = "data-llm-worker-output"


class Invoice(BaseModel):
    number: str
    total: float
    lines: list[str]


LINES = [f"line {n:05} \u00e9\u6f22\U0001f600" for n in range(3000)]  # ~70 kB, non-ASCII
BAD = orjson.dumps({"number": "INV-1", "total": "a lot", "lines": LINES}).decode()
GOOD = orjson.dumps({"number": "INV-1", "total": "12.5", "lines": LINES}).decode()  # coerced


def _values(consumer: Consumer, out: dict[str, Any]) -> list[dict[str, Any]]:
    if consumer is VERCEL:
        return [c["data"] for c in out["chunks"] if c["type"] == DATA]
    return [
        e["value"]
        for e in out["events"]
        if e["type"] == "CUSTOM" and e["name"] == "llm-worker.output"
    ]


@pytest.mark.parametrize(
    ("consumer", "provider"),
    [
        (VERCEL, "anthropic"),
        (VERCEL, "openai_chat"),
        (AGUI, "gemini"),
        (AGUI, "openai_responses"),
    ],
    ids=["ai-anthropic", "ai-openai_chat", "ag-ui-gemini", "ag-ui-openai_responses"],
)
async def test_a_large_rejected_answer_then_a_coerced_one(
    consumer: Consumer, provider: str, node_modules: Path
) -> None:
    script = [
        ScriptedResponse.output(BAD, chunk_size=97),
        ScriptedResponse.output(GOOD, chunk_size=97),
    ]
    async with ScriptedModelServer(provider, script) as server, server.client() as client:

        def factory() -> Worker[Invoice]:
            return Worker(client, output_type=Invoice, output_partial_interval=0)

        async with serve(consumer.adapter(factory)) as url:
            out = await consumer.consume(node_modules, url, [{"send": "Read it."}])
    values = _values(consumer, out)
    statuses = [v["status"] for v in values]
    # The bad answer never fits, even in part ("a lot" is no number): no partial before it.
    assert statuses[0] == "rejected" and statuses[-1] == "final"
    # (The ai client updates the part it keeps in place, which the consumer's recorded first
    # chunk of the answer is: its status reads "final" there. Its message holds the two.)
    assert set(statuses[1:-1]) <= {"partial", "final"} and len(statuses) > 5
    if consumer is VERCEL:
        parts = [p["data"]["status"] for p in out["messages"][-1]["parts"] if p["type"] == DATA]
        assert parts == ["rejected", "final"]
    rejected = values[0]
    assert rejected["errors"][0].startswith("total: Input should be a valid number")
    final = values[-1]["value"]
    assert final["total"] == 12.5 and final["lines"] == LINES  # the coerced value, whole
    # Each answer's partials carry the whole value so far, but only after an eighth of growth:
    # the output parts stay within ~9x the two answers (not one value per delta: ~700x).
    sent = sum(len(orjson.dumps(v)) for v in values)
    answers = len(BAD.encode()) + len(GOOD.encode())
    assert sent < 10 * answers
