"""A Worker on a FallbackClient: structured output, pause -> JSON -> resume, streams, tracing.

Scripted clients in process: the wire is not the point here (tests/providers/test_fallback*.py
cover it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from llm_worker import Decision, PauseState, Worker, tool
from llm_worker.errors import OverloadedError
from llm_worker.events import UsageEvent
from llm_worker.messages import Origin, TextPart, ThinkingPart, ToolUsePart
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.state import OutputPartial, RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse
from support.telemetry import Telemetry, attrs

pytestmark = pytest.mark.anyio


def broken(*parts: Any) -> ScriptedResponse:
    error = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
    return ScriptedResponse(list(parts), fail_with=error, chunk_size=3)


def pair(first: list[Any], second: list[Any]) -> FallbackClient:
    a = ScriptedClient(first, provider="alpha", model="a-1")
    b = ScriptedClient(second, provider="beta", model="b-1")
    return FallbackClient([a, b], cooldown=Cooldown.disabled())


@dataclass
class Invoice:
    number: str
    total: float


async def test_structured_output_from_the_client_after_a_mid_stream_failure() -> None:
    client = pair(
        [broken(TextPart('{"number": "A-1", "tot'))],
        [ScriptedResponse.output(Invoice("B-7", 12.5))],
    )
    worker = Worker(client, output_type=Invoice)
    partials: list[Any] = []
    with anyio.fail_after(5):
        async with worker.stream("Invoice?") as stream:
            async for event in stream:
                if isinstance(event, OutputPartial):
                    partials.append(event.value)
        result = stream.result
    assert result.output == Invoice("B-7", 12.5)
    # The withdrawn answer's half JSON never became the output, nor the history.
    assert all("A-1" not in m.text for m in result.messages)
    assert partials  # the partials of the answer that completed reached the reader


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund an amount."""
    return f"refunded {amount}"


async def test_pause_to_json_and_resume_keeps_the_answering_client() -> None:
    client = pair(
        [broken(ThinkingPart("hmm", signature="sig-a"), TextPart("Refun"))],
        [
            ScriptedResponse(
                [ThinkingPart("ok", signature="sig-b"), ToolUsePart("c1", "refund", {"amount": 5})]
            ),
            ScriptedResponse.text("Refunded."),
        ],
    )
    worker = Worker(client, tools=[refund])
    with anyio.fail_after(5):
        paused = await worker.run("Refund 5")
    assert paused.status is RunStatus.PAUSED
    assert paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    thinking = [p for m in state.history for p in m.content if isinstance(p, ThinkingPart)]
    assert [(t.signature, t.origin) for t in thinking] == [("sig-b", Origin("beta", "b-1"))]
    # A new Worker (another process, say) resumes; alpha now answers first, and is still down.
    resumed_client = pair([broken(TextPart("x"))], [ScriptedResponse.text("Refunded.")])
    again = Worker(resumed_client, tools=[refund])
    with anyio.fail_after(5):
        result = await again.resume(state, decisions={"c1": Decision.approve()})
    assert result.text == "Refunded."
    assert [(u.provider, u.model) for u in result.request_usage] == [
        ("beta", "b-1"),
        ("beta", "b-1"),
    ]


async def test_the_chat_span_names_the_client_that_answered() -> None:
    t = Telemetry()
    client = pair(
        [broken(TextPart("partial"))],
        [ScriptedResponse.text("whole", usage=UsageEvent(input_tokens=9, output_tokens=2))],
    )
    worker = Worker(client, instrument=t.instrumentation())
    with anyio.fail_after(5):
        await worker.run("go")
    chat = attrs(t.one("chat a-1"))
    assert chat["gen_ai.request.model"] == "a-1"  # what was asked
    assert chat["llm_worker.answer.provider"] == "beta"
    assert chat["llm_worker.answer.model"] == "b-1"
    assert chat["gen_ai.response.model"] == "b-1"
    [span] = t.named("chat a-1")
    retries = [e for e in span.events if e.name == "llm_worker.retry"]
    assert [dict(e.attributes or {})["llm_worker.retry.kind"] for e in retries] == ["fallback"]
    [duration] = t.points("gen_ai.client.operation.duration")
    assert (duration.attributes or {})["gen_ai.response.model"] == "b-1"


async def test_cancel_during_the_second_clients_answer_leaves_no_half_answer() -> None:
    slow = ScriptedResponse.text("x" * 400, chunk_size=2, delay=0.01)
    client = pair([broken(TextPart("first"))], [slow])
    worker = Worker(client)
    texts: list[str] = []

    def on_delta(event: Any) -> None:
        texts.append(event)
        if len(texts) == 5:
            worker.cancel()

    worker.on_text_block(on_delta)
    with anyio.fail_after(5):
        result = await worker.run("go")
    assert result.status is RunStatus.CANCELLED
    assert [m.role for m in worker.history] == ["user"]
