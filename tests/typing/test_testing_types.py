# pyright: reportUnnecessaryTypeIgnoreComment=true
"""The test doubles' types, checked by pyright strict (CI runs it on tests/typing).

`ScriptedModelServer.client()` is the client class of its wire format, so type checking goes
on through the client; script steps of the wrong shape are rejected. The tests also run under
pytest.
"""

from __future__ import annotations

from typing import assert_type

import anyio
import pytest

from llm_worker import Message, Request
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.testing import (
    WIRE_PROVIDERS,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)


def echo(call: ScriptedRequest) -> ScriptedResponse:
    return ScriptedResponse.text(call.request.messages[-1].text)


def untyped_step(call: str) -> ScriptedResponse:
    return ScriptedResponse.text(call)


@pytest.mark.anyio
async def test_each_wire_format_makes_its_own_client() -> None:
    server = ScriptedModelServer("anthropic", [echo])
    async with server, server.client(betas=["x"]) as client:
        assert_type(client, AnthropicClient)
        assert isinstance(client, AnthropicClient)
        with anyio.fail_after(10):
            events = [e async for e in client.stream(Request([Message.user("hi")]))]
        assert events
    chat = ScriptedModelServer("openai_chat")
    responses = ScriptedModelServer("openai_responses")
    gemini = ScriptedModelServer("gemini")
    assert_type(chat, ScriptedModelServer[OpenAIChatClient])
    assert_type(responses, ScriptedModelServer[OpenAIResponsesClient])
    assert_type(gemini, ScriptedModelServer[GeminiClient])


def test_a_wire_format_known_only_at_run_time_makes_an_http_client() -> None:
    for provider in WIRE_PROVIDERS:
        server = ScriptedModelServer(provider, [echo])
        assert_type(server, ScriptedModelServer[HttpClient])


def test_steps_of_the_wrong_shape_are_rejected() -> None:
    ScriptedModelServer("gemini", [untyped_step])  # pyright: ignore[reportArgumentType, reportCallIssue]
    ScriptedClient([untyped_step])  # pyright: ignore[reportArgumentType]
    ScriptedClient(["not an answer"])  # pyright: ignore[reportArgumentType]
    ScriptedClient([echo, ScriptedResponse.text("fine")])
