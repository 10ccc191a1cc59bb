"""Anthropic's sampling parameters: sent where the API takes them, refused where it does not.

This client sends `anthropic-version: 2023-06-01`: older models take `temperature`, the
models from Opus 4.7 and Claude 5 on refuse it (HTTP 400 "`temperature` is deprecated for
this model"); API version 2026-10-21, whose request types the installed anthropic SDK
carries, declares no sampling parameter at all. See `_anthropic_request`'s docstring.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message, Request
from llm_worker.providers._anthropic_request import build_body
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from support.sdk_types import mismatches

OLDER = ("claude-sonnet-4-5", "claude-haiku-4-5-20251001", "claude-opus-4-6", "claude-3-7-sonnet")
NEWER = ("claude-opus-4-7", "claude-opus-5", "claude-sonnet-5-5", "claude-mythos-preview")


def _body(model: str, **settings: Any) -> dict[str, Any]:
    return build_body(Request([Message.user("Hi.")], **settings), model=model)


def _sdk_mismatches(body: dict[str, Any]) -> list[str]:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    return mismatches(body, MessageCreateParamsStreaming)


@pytest.mark.parametrize("model", OLDER)
def test_older_models_get_the_temperature(model: str) -> None:
    body = _body(model, temperature=0.2)
    assert body["temperature"] == 0.2
    # Only the field API version 2026-10-21 dropped differs from the SDK's request types.
    assert _sdk_mismatches(body) == ["$.temperature: not a field of MessageCreateParamsStreaming"]


@pytest.mark.parametrize("model", NEWER)
def test_newer_models_refuse_a_temperature_before_the_round_trip(model: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"temperature=0.2 is not accepted by {model}"):
        _body(model, temperature=0.2)


@pytest.mark.parametrize("model", NEWER)
def test_the_default_temperature_is_left_out_for_newer_models(model: str) -> None:
    body = _body(model, temperature=1.0)
    assert "temperature" not in body
    assert _sdk_mismatches(body) == []


@pytest.mark.parametrize("option", [{"top_p": 0.9}, {"top_k": 40}, {"temperature": 0.5}])
def test_sampling_options_are_refused_for_newer_models(option: dict[str, Any]) -> None:
    (name,) = option
    with pytest.raises(ConfigurationError, match=rf"{name}=.* is not accepted"):
        _body("claude-opus-5", options=option)


def test_a_model_name_not_read_gets_the_temperature_as_asked() -> None:
    assert _body("my-proxy-alias", temperature=0.4)["temperature"] == 0.4


@pytest.mark.anyio
@pytest.mark.usefixtures("http_transport")
async def test_the_worker_sends_the_temperature_to_an_older_model_over_http() -> None:
    answer = ScriptedResponse.text("Hi.")
    async with ScriptedModelServer("anthropic", [answer], model="claude-sonnet-4-5") as server:
        client = server.client()
        try:
            worker = Worker(client, temperature=0.3)
            with anyio.fail_after(10):
                result = await worker.run("Hello")
        finally:
            await client.aclose()
        sent = server.requests[0].json()
    assert result.text == "Hi."
    assert sent["temperature"] == 0.3


@pytest.mark.anyio
@pytest.mark.usefixtures("http_transport")
async def test_the_worker_gets_a_typed_error_for_a_newer_model_and_sends_nothing() -> None:
    async with ScriptedModelServer(
        "anthropic", [ScriptedResponse.text("never")], model="claude-opus-5"
    ) as server:
        client = server.client()
        try:
            worker = Worker(client, temperature=0.3)
            with anyio.fail_after(10), pytest.raises(ConfigurationError, match="temperature"):
                await worker.run("Hello")
        finally:
            await client.aclose()
        assert server.requests == []
