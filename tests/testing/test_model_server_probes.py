"""ScriptedModelServer and ScriptedClient under stress: steps that raise what is not an
Exception, steps that are coroutines, two requests in flight at once."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from llm_worker import Message, Request
from llm_worker.errors import APIStatusError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.providers import LLMClient, RetryPolicy
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
    ScriptStepError,
)

pytestmark = pytest.mark.anyio


def cancelled(call: ScriptedRequest) -> ScriptedResponse:
    raise asyncio.CancelledError  # no one cancelled the server: the step raised it itself


async def test_a_step_raising_cancelled_error_fails_like_any_failing_step() -> None:
    # The connection task used to take the step's CancelledError for its own cancellation:
    # the connection dropped, the client retried it as a network fault, and leaving the
    # server raised nothing.
    server = ScriptedModelServer("anthropic", [cancelled])
    answers: list[APIStatusError] = []

    async def play() -> None:
        async with server, server.client(retry=RetryPolicy(max_attempts=1)) as client:
            answers.append(await _failure_of(client))

    with anyio.fail_after(5), pytest.raises(ScriptStepError, match="raised CancelledError"):
        await play()
    assert [(a.status_code, a.error_type) for a in answers] == [(424, "script_step_failed")]


async def test_a_step_raising_cancelled_error_on_a_scripted_client_is_a_step_error() -> None:
    client = ScriptedClient([cancelled])
    with pytest.raises(ScriptStepError, match="raised CancelledError"):
        client.stream(Request([Message.user("hi")]))
    assert client.remaining == 1


async def test_a_coroutine_step_is_refused_naming_the_fix() -> None:
    async def step(call: ScriptedRequest) -> ScriptedResponse:
        return ScriptedResponse.text("never")

    client = ScriptedClient([step])  # type: ignore[list-item]
    with pytest.raises(ScriptStepError, match="synchronous"):
        client.stream(Request([Message.user("hi")]))


async def test_two_requests_in_flight_get_two_steps_in_order() -> None:
    seen: list[int] = []

    def step(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(call.index)
        return ScriptedResponse.text(f"answer {call.index}", chunk_size=2, delay=0.01)

    answers: dict[int, str] = {}
    server = ScriptedModelServer("openai_chat", [step, step])
    async with server, server.client() as client:

        async def ask(n: int) -> None:
            answers[n] = await _text_of(client)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, 0)
                tg.start_soon(ask, 1)
    assert seen == [0, 1]
    assert sorted(answers.values()) == ["answer 0", "answer 1"]
    assert server.remaining == 0


async def _failure_of(client: LLMClient) -> APIStatusError:
    with pytest.raises(APIStatusError) as raised:
        await _text_of(client)
    return raised.value


async def _text_of(client: LLMClient) -> str:
    texts: list[str] = []
    async for event in client.stream(Request([Message.user("hi")])):
        if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
            texts.append(event.delta.text)
    return "".join(texts)
