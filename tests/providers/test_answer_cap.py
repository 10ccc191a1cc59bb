"""One answer's size is bounded: `max_answer_chars`, on all four wires and both transports.

Text, thinking, tool arguments and signatures count together; the delta that passes the bound
fails the stream with `AnswerTooLargeError` (typed, not retried), after the events of what
fit, and nothing more is read. The real clients talk to a scripted model server on
127.0.0.1 with a small configured cap.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import TextPart, ThinkingPart, ToolUsePart, Worker
from llm_worker.errors import AnswerTooLargeError, ConfigurationError
from llm_worker.events import BlockDelta, ErrorEvent, Event, TextDelta
from llm_worker.messages import Message, Request
from llm_worker.providers import HttpClient, OpenAIChatClient
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
CAP = 4096


async def _stream(provider: str, answer: ScriptedResponse, **options: Any) -> list[Event]:
    events: list[Event] = []
    async with ScriptedModelServer(provider, [answer]) as server:
        client = server.client(**options)
        try:
            with anyio.fail_after(20):
                async for event in client.stream(Request([Message.user("hi")])):
                    events.append(event)
        finally:
            await client.aclose()
        assert len(server.requests) == 1, "a too-large answer is not asked for again"
    return events


async def _collect(client: HttpClient, into: list[Event]) -> None:
    async for event in client.stream(Request([Message.user("hi")])):
        into.append(event)


def _text(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_answer_past_the_cap_fails_typed_after_what_fit(provider: str) -> None:
    answer = ScriptedResponse.text("a" * (3 * CAP), chunk_size=500)
    with pytest.raises(AnswerTooLargeError) as caught:
        await _stream(provider, answer, max_answer_chars=CAP)
    error = caught.value
    assert error.limit == CAP and error.streamed and error.provider == provider
    assert f"max_answer_chars={CAP:,}" in str(error)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_events_before_the_failure_hold_at_most_the_cap(provider: str) -> None:
    seen: list[Event] = []
    answer = ScriptedResponse.text("b" * (3 * CAP), chunk_size=500)
    async with ScriptedModelServer(provider, [answer]) as server:
        client = server.client(max_answer_chars=CAP)
        with anyio.fail_after(20), pytest.raises(AnswerTooLargeError):
            await _collect(client, seen)
        await client.aclose()
    assert 0 < len(_text(seen)) <= CAP
    assert [e.code for e in seen if isinstance(e, ErrorEvent)] == ["answer_too_large"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_answer_of_exactly_the_cap_is_whole(provider: str) -> None:
    events = await _stream(
        provider, ScriptedResponse.text("c" * CAP, chunk_size=512), max_answer_chars=CAP
    )
    assert _text(events) == "c" * CAP


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai_responses"])
async def test_thinking_and_tool_arguments_count_with_the_text(provider: str) -> None:
    parts: list[Any] = [
        ThinkingPart("t" * 1500, signature="sig-" + "s" * 200),
        TextPart("x" * 1500),
        ToolUsePart("call_1", "lookup", {"q": "q" * 1500}),
    ]
    with pytest.raises(AnswerTooLargeError):
        await _stream(provider, ScriptedResponse(parts, chunk_size=500), max_answer_chars=CAP)
    # Each part alone fits.
    for part in parts:
        await _stream(provider, ScriptedResponse([part], chunk_size=500), max_answer_chars=CAP)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_worker_run_fails_with_the_typed_error_and_is_not_retried(provider: str) -> None:
    answer = ScriptedResponse.text("d" * (2 * CAP), chunk_size=500)
    async with ScriptedModelServer(provider, [answer]) as server:
        worker = Worker(server.client(max_answer_chars=CAP))
        with anyio.fail_after(20), pytest.raises(AnswerTooLargeError):
            await worker.run("hi")
        assert len(server.requests) == 1


class Report(BaseModel):
    body: str


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_output_mode_follows_the_answer_cap_not_the_argument_cap(
    provider: str,
) -> None:
    # The output tool's arguments are the answer: over max_tool_arguments, within the cap.
    value = {"body": "é" * 3000}
    script = [ScriptedResponse.output(value, tool="final_result", chunk_size=500)]
    async with ScriptedModelServer(provider, script) as server:
        worker = Worker(
            server.client(max_answer_chars=CAP),
            output_type=Report,
            output_mode="tool",
            max_tool_arguments=1000,
        )
        with anyio.fail_after(20):
            result = await worker.run("write")
    assert result.output is not None and result.output.body == value["body"]
    too_big = [ScriptedResponse.output({"body": "é" * 5000}, tool="final_result")]
    async with ScriptedModelServer(provider, too_big) as server:
        worker = Worker(server.client(max_answer_chars=CAP), output_type=Report, output_mode="tool")
        with anyio.fail_after(20), pytest.raises(AnswerTooLargeError):
            await worker.run("write")


@pytest.mark.parametrize("value", [0, -1, True, 10.0, "4096", None])
def test_a_bad_cap_is_refused_at_construction(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_answer_chars"):
        OpenAIChatClient(model="m", api_key="k", max_answer_chars=value)


def test_the_default_cap_is_64_mebi_characters() -> None:
    client = OpenAIChatClient(model="m", api_key="k")
    assert client.max_answer_chars == 64 * 1024 * 1024
