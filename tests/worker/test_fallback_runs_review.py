"""Review probes: structured output retried across a fallover, cost by the answering model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from llm_worker import Worker
from llm_worker._cost import price
from llm_worker.errors import OverloadedError
from llm_worker.events import UsageEvent
from llm_worker.messages import TextPart
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

CLAUDE = ("anthropic", "claude-sonnet-4-5")
FLASH = ("gemini", "gemini-2.5-flash")


def broken(*parts: Any, usage: UsageEvent | None = None) -> ScriptedResponse:
    error = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
    return ScriptedResponse(list(parts), fail_with=error, chunk_size=3, usage=usage)


@dataclass
class Invoice:
    number: str
    total: float


async def test_structured_output_retried_after_the_fallback_answered_wrong() -> None:
    first = ScriptedClient(
        [
            broken(TextPart('{"number": "A-1", "tot')),
            ScriptedResponse.output(Invoice("A-2", 3.0)),
        ],
        provider=CLAUDE[0],
        model=CLAUDE[1],
    )
    second = ScriptedClient(
        [ScriptedResponse.text('{"number": 7}')], provider=FLASH[0], model=FLASH[1]
    )
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    worker = Worker(client, output_type=Invoice)
    with anyio.fail_after(5):
        result = await worker.run("Invoice?")
    assert result.output == Invoice("A-2", 3.0)
    answered = [(u.provider, u.model) for u in result.request_usage]
    assert answered[-2:] == [FLASH, CLAUDE]  # the wrong output was Gemini's, the retry Claude's
    assert all("A-1" not in m.text for m in result.messages)


async def test_each_answer_is_priced_by_the_model_that_streamed_it() -> None:
    pytest.importorskip("genai_prices")
    # Anthropic reports the input tokens in message_start: the cut answer's usage is known.
    cut = UsageEvent(input_tokens=1000, output_tokens=10)
    whole = UsageEvent(input_tokens=1000, output_tokens=200)
    async with (
        ScriptedModelServer(
            "anthropic", [broken(TextPart("half of it"), usage=cut)], model=CLAUDE[1]
        ) as a,
        ScriptedModelServer(
            "gemini", [ScriptedResponse.text("whole", usage=whole)], model=FLASH[1]
        ) as b,
        a.client() as first,
        b.client() as second,
    ):
        client = FallbackClient([first, second], cooldown=Cooldown.disabled())
        with anyio.fail_after(10):
            result = await Worker(client).run("go")
    assert [(u.provider, u.model) for u in result.request_usage] == [CLAUDE, FLASH]
    assert result.request_usage[0].usage.input_tokens == 1000
    cost_a, cost_b = price(*CLAUDE, result.request_usage[0].usage), price(*FLASH, whole)
    assert cost_a is not None and cost_b is not None
    assert result.cost == cost_a + cost_b
    assert cost_b != price(*CLAUDE, whole)
