"""The scripted doubles' usage counts the request, and one step can answer every request."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import Worker, tool
from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message, Request, ToolUsePart
from llm_worker.testing import (
    WIRE_PROVIDERS,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
    ScriptExhaustedError,
    ScriptStepError,
    decode_request,
    prompt_tokens,
)

pytestmark = pytest.mark.anyio

PROVIDERS = sorted(WIRE_PROVIDERS)


@tool(effect="read_only")
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key} " * 20


def until_two_results(call: ScriptedRequest) -> ScriptedResponse:
    """Ask for a lookup until two results are in, then answer with text."""
    done = sum(len(m.tool_results) for m in call.request.messages)
    if done < 2:
        return ScriptedResponse([ToolUsePart("", "lookup", {"key": f"k{done}"})])
    return ScriptedResponse.text(f"Done after {call.index + 1} requests.")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_wire_reports_input_tokens_that_count_the_request(provider: str) -> None:
    async with ScriptedModelServer(provider, until_two_results) as server:
        client = server.client()
        worker = Worker(client, tools=[lookup], system="Be brief.")
        with anyio.fail_after(10):
            result = await worker.run("Look two keys up.")
        await client.aclose()
    assert result.text == "Done after 3 requests."
    counts = [r.usage.input_tokens or 0 for r in result.request_usage]
    assert len(counts) == 3 and all(c > 0 for c in counts)
    assert counts == sorted(counts) and len(set(counts)) == 3  # grows with the conversation
    for sent, count in zip(server.requests, counts, strict=True):
        assert count == prompt_tokens(decode_request(provider, sent.json()))
    assert result.usage.input_tokens == sum(counts)


async def test_a_fixed_answer_counts_its_request_too() -> None:
    async with ScriptedModelServer("gemini", [ScriptedResponse.text("Hi.")]) as server:
        client = server.client()
        with anyio.fail_after(10):
            result = await Worker(client).run("x" * 400)
        await client.aclose()
    assert (result.usage.input_tokens or 0) > 100  # 400 characters: about 100 tokens


def test_prompt_tokens_counts_the_system_prompt_messages_and_tools() -> None:
    bare = Request([Message.user("hello")])
    more = Request([Message.user("hello")], system="s" * 400)
    assert prompt_tokens(bare) >= 1
    assert prompt_tokens(more) == prompt_tokens(bare) + 100


async def test_one_callable_answers_every_request_of_a_scripted_client() -> None:
    client = ScriptedClient(until_two_results)
    assert client.remaining == 1
    with pytest.raises(ScriptExhaustedError):
        client.assert_all_used()  # never asked yet
    worker = Worker(client, tools=[lookup])
    with anyio.fail_after(5):
        first = await worker.run("Go.")
        second = await worker.run("Again.")
    assert first.text == "Done after 3 requests."
    assert second.text == "Done after 4 requests."  # the history already holds two results
    client.assert_all_used()
    assert client.remaining == 0
    with pytest.raises(ConfigurationError, match="every request"):
        client.add(ScriptedResponse.text("after"))


async def test_one_fixed_answer_answers_every_request_of_a_server() -> None:
    async with ScriptedModelServer("openai_chat", ScriptedResponse.text("Same.")) as server:
        client = server.client()
        worker = Worker(client)
        with anyio.fail_after(10):
            texts = [(await worker.run(f"Question {n}.")).text for n in range(3)]
        await client.aclose()
        with pytest.raises(ConfigurationError, match="every request"):
            server.add(ScriptedResponse.text("after"))
    assert texts == ["Same."] * 3 and len(server.requests) == 3
    server.assert_all_used()


async def test_a_repeated_step_that_raises_fails_the_script_once_and_for_all() -> None:
    def broken(call: ScriptedRequest) -> ScriptedResponse:
        raise RuntimeError("bad step")

    server = ScriptedModelServer("anthropic", broken)
    worker_error: Exception | None = None

    async def play() -> None:
        nonlocal worker_error
        async with server:
            client = server.client()
            try:
                with anyio.fail_after(10):
                    await Worker(client).run("Go.")
            except Exception as exc:
                worker_error = exc
            await client.aclose()

    with pytest.raises(ScriptStepError, match="bad step"):
        await play()
    assert worker_error is not None and len(server.requests) == 1
