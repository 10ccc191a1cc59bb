"""Review probes: structured output retried across a fallover, cost by the answering model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from llm_worker import Worker, tool
from llm_worker._cost import price
from llm_worker.errors import OverloadedError
from llm_worker.events import StatusEvent, UsageEvent
from llm_worker.messages import Origin, TextPart, ToolResultPart, ToolUsePart
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.state import RunStatus
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


_started: list[str] = []
_running: dict[str, anyio.Event] = {}


@tool(effect="read_only")
async def slow_lookup(key: str) -> str:
    """Look a key up (never ends: the run is cancelled while it runs)."""
    _started.append(key)
    _running["event"].set()
    await anyio.sleep_forever()
    return key


async def test_cancel_while_a_carried_early_tool_runs_ends_the_run_cleanly() -> None:
    _started.clear()
    _running["event"] = anyio.Event()
    call = ToolUsePart("", "slow_lookup", {"key": "k"})
    first = ScriptedClient(
        [broken(call, TextPart("and then"))], provider=CLAUDE[0], model=CLAUDE[1]
    )
    second = ScriptedClient([ScriptedResponse([call])], provider=FLASH[0], model=FLASH[1])
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    worker = Worker(client, tools=[slow_lookup], early_tool_start=True)
    with anyio.fail_after(10):
        async with worker.stream("go") as stream:
            async for event in stream:
                if isinstance(event, StatusEvent) and event.source == Origin(*FLASH):
                    # the second answer began; the first answer's call was started early
                    await _running["event"].wait()
                    worker.cancel()
        result = stream.result
    assert result.status is RunStatus.CANCELLED
    assert _started == ["k"]  # started once, on the withdrawn answer
    for message in worker.history:  # no call without its result, nothing half
        assert "and then" not in message.text
    calls = [p.id for m in worker.history for p in m.content if isinstance(p, ToolUsePart)]
    results = [
        p.tool_use_id for m in worker.history for p in m.content if isinstance(p, ToolResultPart)
    ]
    assert sorted(calls) == sorted(results)
