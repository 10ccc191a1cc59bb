"""Structured output end to end: `Worker(output_type=...)` over each of the four wire formats.

Every run goes through a real client and a `ScriptedModelServer` speaking that provider's wire
format; the request body is checked for the provider's structured-output field, and a wrong
answer is sent back with its validation errors before the valid one is accepted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from llm_worker import Message, OutputValidationError, Request, RunStatus, StopReason, Worker
from llm_worker.hooks import ContinueWithMessages, TurnEndContext
from llm_worker.providers import HttpClient
from llm_worker.testing import (
    WIRE_PROVIDERS,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)

pytestmark = pytest.mark.anyio

PROVIDERS = sorted(WIRE_PROVIDERS)


class Clients:
    """The clients a test opens on its servers, closed after it."""

    def __init__(self) -> None:
        self.made: list[HttpClient] = []

    def open(self, server: ScriptedModelServer[Any]) -> HttpClient:
        client = server.client()
        self.made.append(client)
        return client


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    made = Clients()
    yield made
    for client in made.made:
        await client.aclose()


class Invoice(BaseModel):
    """An invoice read from a document."""

    number: str
    total: float
    paid: bool = False
    note: str | None = None


def format_field(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """The schema the body asks the answer to follow, wherever the provider puts it."""
    if provider == "openai_chat":
        assert body["response_format"]["type"] == "json_schema"
        return body["response_format"]["json_schema"]["schema"]
    if provider == "openai_responses":
        assert body["text"]["format"]["type"] == "json_schema"
        return body["text"]["format"]["schema"]
    if provider == "anthropic":
        assert body["output_config"]["format"]["type"] == "json_schema"
        return body["output_config"]["format"]["schema"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    return body["generationConfig"]["responseJsonSchema"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_structured_run_validates_the_answer(provider: str, clients: Clients) -> None:
    answer = ScriptedResponse.output(Invoice(number="A-1", total=12.5), chunk_size=7)
    async with ScriptedModelServer(provider, [answer]) as server:
        worker = Worker(clients.open(server), output_type=Invoice)
        with anyio.fail_after(10):
            result = await worker.run("Read the invoice.")
    assert result.status is RunStatus.FINISHED
    assert result.output == Invoice(number="A-1", total=12.5)
    assert result.refusal is None
    schema = format_field(provider, server.requests[0].json())
    assert schema["required"] == ["number", "total", "paid", "note"]
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_invalid_answer_is_sent_back_with_its_errors_then_retried(
    provider: str, clients: Clients
) -> None:
    wrong = ScriptedResponse.text('{"number": "A-1", "total": "twelve"}')
    right = ScriptedResponse.output({"number": "A-1", "total": 12, "paid": None, "note": None})
    async with ScriptedModelServer(provider, [wrong, right]) as server:
        worker = Worker(clients.open(server), output_type=Invoice)
        with anyio.fail_after(10):
            result = await worker.run("Read the invoice.")
    assert result.output == Invoice(number="A-1", total=12.0, paid=False)  # null -> default
    assert result.requests == 2
    feedback = worker.history[2]
    assert feedback.role == "user"
    assert "total" in feedback.text
    assert "valid number" in feedback.text
    # The second request carries the wrong answer and the feedback, on every wire format.
    second = orjson.dumps(server.requests[1].json()).decode()
    assert "twelve" in second
    assert "does not match the required output" in second


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_past_output_retries_the_run_fails_with_the_raw_text_and_errors(
    provider: str, clients: Clients
) -> None:
    script = [ScriptedResponse.text("not json"), ScriptedResponse.text('{"number": 5}')]
    async with ScriptedModelServer(provider, script) as server:
        worker = Worker(clients.open(server), output_type=Invoice, output_retries=1)
        with anyio.fail_after(10), pytest.raises(OutputValidationError) as caught:
            await worker.run("Read the invoice.")
    assert caught.value.raw == '{"number": 5}'
    assert caught.value.attempts == 2
    assert any(e.startswith("number:") for e in caught.value.errors)
    assert any(e.startswith("total: required") for e in caught.value.errors)


async def test_output_retries_zero_fails_at_the_first_invalid_answer(clients: Clients) -> None:
    async with ScriptedModelServer("anthropic", [ScriptedResponse.text("{}")]) as server:
        worker = Worker(clients.open(server), output_type=Invoice, output_retries=0)
        with anyio.fail_after(10), pytest.raises(OutputValidationError) as caught:
            await worker.run("Read the invoice.")
    assert caught.value.attempts == 1
    assert worker.history[-1].role == "assistant"  # nothing half-sent is left behind


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_mode_ends_the_run_with_the_final_tool_call(
    provider: str, clients: Clients
) -> None:
    script = [
        ScriptedResponse.output({"number": "A-1"}, tool="final_result"),  # total missing
        ScriptedResponse.output(Invoice(number="A-1", total=3), tool="final_result"),
    ]
    async with ScriptedModelServer(provider, script) as server:
        worker = Worker(clients.open(server), output_type=Invoice, output_mode="tool")
        with anyio.fail_after(10):
            result = await worker.run("Read the invoice.")
    assert result.output == Invoice(number="A-1", total=3)
    assert result.requests == 2
    first = server.requests[0].json()
    assert "final_result" in orjson.dumps(first).decode()
    assert "response_format" not in first
    assert "output_config" not in first
    # The invalid call got an error result naming the problem; the valid one, an ack.
    results = [r for m in worker.history for r in m.tool_results]
    assert results[0].is_error
    assert "total: required" in results[0].content
    assert not results[1].is_error


async def test_tool_mode_answer_without_the_call_is_asked_again(clients: Clients) -> None:
    script = [
        ScriptedResponse.text("Here it is: A-1, 3 euros."),
        ScriptedResponse.output(Invoice(number="A-1", total=3), tool="final_result"),
    ]
    async with ScriptedModelServer("openai_chat", script) as server:
        worker = Worker(clients.open(server), output_type=Invoice, output_mode="tool")
        with anyio.fail_after(10):
            result = await worker.run("Read the invoice.")
    assert result.output == Invoice(number="A-1", total=3)
    assert "final_result" in worker.history[2].text


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses", "anthropic"])
async def test_a_refusal_ends_the_run_with_result_refusal_not_a_retry(
    provider: str, clients: Clients
) -> None:
    refusal = ScriptedResponse.text("I can't help with that.", stop_reason=StopReason.REFUSAL)
    async with ScriptedModelServer(provider, [refusal]) as server:
        worker = Worker(clients.open(server), output_type=Invoice)
        with anyio.fail_after(10):
            result = await worker.run("Something forbidden.")
    assert result.status is RunStatus.FINISHED
    assert result.output_or_none is None
    assert result.stop_reason is StopReason.REFUSAL
    assert result.refusal is not None
    assert result.requests == 1


@dataclass
class Point:
    x: int
    y: int


class Row(TypedDict):
    name: str
    qty: int


@pytest.mark.parametrize(
    ("output_type", "value", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Row, {"name": "a", "qty": 2}, {"name": "a", "qty": 2}),
        (list[Point], [{"x": 1, "y": 2}], [Point(1, 2)]),
        (int, 7, 7),
        # A union's schema is no object either: it comes wrapped too.
        (Point | Invoice, '{"result": {"number": "n", "total": 1}}', Invoice(number="n", total=1)),
    ],
)
async def test_dataclasses_typeddicts_lists_and_unions(
    output_type: Any, value: Any, expected: Any, clients: Clients
) -> None:
    async with ScriptedModelServer("openai_chat", [ScriptedResponse.output(value)]) as server:
        worker = Worker(clients.open(server), output_type=output_type)
        with anyio.fail_after(10):
            result = await worker.run("Go.")
    assert result.output == expected
    schema = server.requests[0].json()["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "object"  # a non-object is wrapped: OpenAI takes objects only


async def test_a_json_schema_dict_gives_the_parsed_json(clients: Clients) -> None:
    schema = {
        "title": "Totals",
        "type": "object",
        "properties": {"sum": {"type": "integer"}},
        "required": ["sum"],
    }
    async with ScriptedModelServer("gemini", [ScriptedResponse.text('{"sum": 3}')]) as server:
        worker = Worker(clients.open(server), output_type=schema)
        with anyio.fail_after(10):
            result = await worker.run("Add.")
    assert result.output == {"sum": 3}
    sent = server.requests[0].json()["generationConfig"]["responseJsonSchema"]
    assert sent["additionalProperties"] is False


async def test_on_turn_end_sees_the_parsed_output_and_may_continue(clients: Clients) -> None:
    script = [
        ScriptedResponse.output(Invoice(number="A-1", total=-1)),
        ScriptedResponse.output(Invoice(number="A-1", total=1)),
    ]
    seen: list[Any] = []
    async with ScriptedModelServer("anthropic", script) as server:
        worker = Worker(clients.open(server), output_type=Invoice)

        def check(ctx: TurnEndContext) -> ContinueWithMessages | None:
            seen.append(ctx.output)
            if ctx.output.total < 0:
                return ContinueWithMessages([Message.user("A total is never negative.")])
            return None

        worker.add_on_turn_end_hook(check)
        with anyio.fail_after(10):
            result = await worker.run("Read the invoice.")
    assert seen == [Invoice(number="A-1", total=-1), Invoice(number="A-1", total=1)]
    assert result.output == Invoice(number="A-1", total=1)


async def test_without_an_output_type_the_output_is_the_text(clients: Clients) -> None:
    async with ScriptedModelServer("openai_chat", [ScriptedResponse.text("Hi.")]) as server:
        worker = Worker(clients.open(server))
        with anyio.fail_after(10):
            result = await worker.run("Hello.")
    assert result.output == "Hi."
    assert "response_format" not in server.requests[0].json()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_script_step_reads_the_output_schema_the_request_carried(
    provider: str, clients: Clients
) -> None:
    seen: list[Any] = []

    def answer(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(call.request.output_schema)
        return ScriptedResponse.output(Invoice(number="A-1", total=1))

    async with ScriptedModelServer(provider, [answer]) as server:
        client = clients.open(server)
        worker = Worker(client, output_type=Invoice)
        with anyio.fail_after(10):
            result = await worker.run("Read the invoice.")
        [decoded] = seen
        assert decoded is not None
        assert decoded.schema["required"] == ["number", "total", "paid", "note"]
        # Decoded and built again, the body is the one the client sent.
        rebuilt = client.build_body(Request([Message.user("Go.")], output_schema=decoded))
    assert result.output == Invoice(number="A-1", total=1)
    assert format_field(provider, rebuilt) == format_field(provider, server.requests[0].json())
    assert "response_format" not in str(decoded.schema)
