"""`count_tokens` on every client: the providers' counting endpoints over real HTTP, else the
calibrated estimate; the scripted model answers the endpoints with its own usage count."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker.errors import MalformedStreamError, NotFoundError
from llm_worker.messages import Message, Request, ToolSpec
from llm_worker.models import TokenEstimator
from llm_worker.providers import AnthropicClient
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.testing._script import prompt_tokens
from llm_worker.testing._server import WireResponse, WireServer

WIRES = ("anthropic", "gemini", "openai_responses")
TOOL = ToolSpec(
    "lookup",
    "Look a word up.",
    {"type": "object", "properties": {"word": {"type": "string", "description": "the word"}}},
)


def request(text: str = "hello there " * 40) -> Request:
    return Request([Message.user(text)], system="Be brief.", tools=[TOOL], max_tokens=99)


@pytest.mark.anyio
@pytest.mark.parametrize("wire", WIRES)
async def test_the_counting_endpoint_answers_the_scripted_usage_count(
    wire: str, http_transport: str
) -> None:
    ask = request()
    async with ScriptedModelServer(wire, ScriptedResponse.text("ok")) as server:
        async with server.client() as client:
            with anyio.fail_after(10):
                count = await client.count_tokens(ask)
                await drain(client.stream(ask))
        counting, answered = server.requests
    assert count.input_tokens == prompt_tokens(ask)
    assert (count.source, count.exact) == ("provider", True)
    assert server.remaining == 0  # the count played no step: the answer got it
    body = counting.json()
    assert "stream" not in body and "max_tokens" not in body
    assert counting.path != answered.path


@pytest.mark.anyio
async def test_the_endpoints_are_the_documented_ones() -> None:
    paths: dict[str, str] = {}
    for wire in WIRES:
        async with ScriptedModelServer(wire, ScriptedResponse.text("ok")) as server:
            async with server.client() as client:
                with anyio.fail_after(10):
                    await client.count_tokens(request())
            paths[wire] = server.requests[0].path
            body = server.requests[0].json()
        if wire == "gemini":
            inner = body["generateContentRequest"]
            assert inner["model"] == "models/scripted-model"
            assert inner["systemInstruction"] and inner["tools"]
    assert paths == {
        "anthropic": "/v1/messages/count_tokens",
        "gemini": "/v1beta/models/scripted-model:countTokens",
        "openai_responses": "/v1/responses/input_tokens",
    }


async def drain(events: Any) -> None:
    async for _ in events:
        pass


@pytest.mark.anyio
async def test_chat_completions_estimates_and_calibrates_on_reported_usage() -> None:
    ask = request("word " * 400)
    async with (
        ScriptedModelServer("openai_chat", ScriptedResponse.text("ok")) as server,
        server.client() as client,
    ):
        first = await client.count_tokens(ask)
        assert first.source == "estimate"
        # The usage a real answer reported calibrates the ratio (a Worker does this).
        client.estimator.observe_request(ask, 2 * prompt_tokens(ask))
        second = await client.count_tokens(ask)
    assert server.requests == []  # no endpoint: nothing sent
    assert second.source == "calibrated" and not second.exact
    assert abs(second.input_tokens - 2 * prompt_tokens(ask)) <= 2


@pytest.mark.anyio
async def test_estimates_fall_within_ten_percent_of_scripted_usage_after_calibration() -> None:
    """Calibrated on three answers of one conversation, later requests of another mix."""
    client = ScriptedClient(ScriptedResponse.text("ok"))
    calibrated = TokenEstimator()
    for n in (10, 40, 80):
        seen = request("prose and code() {} " * n)
        calibrated.observe_request(seen, (await client.count_tokens(seen)).input_tokens)
    for n in (5, 60, 300):
        later = request('{"key": [1, 2, 3]} ' * n)
        truth = prompt_tokens(later)
        estimate = calibrated.estimate(later)
        assert estimate.source == "calibrated"
        assert abs(estimate.input_tokens - truth) <= 0.1 * truth


@pytest.mark.anyio
async def test_a_count_answer_without_a_count_is_a_typed_error() -> None:
    answer = WireResponse({"nothing": 1}, content_type="application/json")
    async with (
        WireServer([answer]) as srv,
        AnthropicClient(model="m", api_key="k", base_url=srv.base_url) as client,
    ):
        with anyio.fail_after(10), pytest.raises(MalformedStreamError, match="no count"):
            await client.count_tokens(request())


@pytest.mark.anyio
async def test_a_failed_count_request_raises_the_providers_error() -> None:
    error = {"type": "error", "error": {"type": "not_found_error", "message": "no such model"}}
    answer = WireResponse(error, status=404, content_type="application/json")
    async with (
        WireServer([answer]) as srv,
        AnthropicClient(model="m", api_key="k", base_url=srv.base_url) as client,
    ):
        with anyio.fail_after(10), pytest.raises(NotFoundError):
            await client.count_tokens(request())


@pytest.mark.anyio
async def test_the_scripted_client_counts_as_its_usage_reports() -> None:
    ask = request()
    client = ScriptedClient(ScriptedResponse.text("ok"))
    count = await client.count_tokens(ask)
    assert count.input_tokens == prompt_tokens(ask) and count.source == "provider"
    assert client.remaining == 1 and client.requests == []


@pytest.mark.anyio
async def test_a_fallback_client_counts_with_the_first_client_that_can() -> None:
    from llm_worker.providers import FallbackClient

    error = {"type": "error", "error": {"type": "not_found_error", "message": "no such model"}}
    missing = WireResponse(error, status=404, content_type="application/json")
    ask = request()
    async with (
        WireServer([missing]) as srv,
        AnthropicClient(model="m", api_key="k", base_url=srv.base_url) as broken,
    ):
        both = FallbackClient([broken, ScriptedClient(ScriptedResponse.text("ok"))])
        with anyio.fail_after(10):
            count = await both.count_tokens(ask)
        assert (count.input_tokens, count.source) == (prompt_tokens(ask), "provider")
        assert len(srv.requests) == 1  # the first client was asked first
        nobody = FallbackClient([broken])
        srv.enqueue(missing)
        with anyio.fail_after(10):
            estimated = await nobody.count_tokens(ask)
    assert estimated.source == "estimate"
