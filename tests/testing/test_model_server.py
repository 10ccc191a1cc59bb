"""ScriptedModelServer: a scripted model behind each real wire format."""

from __future__ import annotations

import anyio
import httpx
import pytest

from llm_worker import Message, Request, ToolResultPart, ToolUsePart, Worker, tool
from llm_worker.errors import APIStatusError, ConfigurationError, InvalidMessagesError
from llm_worker.events import BlockDelta, BlockStart, TextDelta, ToolUseMetadata
from llm_worker.providers import LLMClient
from llm_worker.testing import (
    WIRE_PROVIDERS,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
    ScriptExhaustedError,
    ScriptStep,
    ScriptStepError,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=sorted(WIRE_PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    """Each wire format in turn."""
    name: str = request.param
    return name


async def test_a_slow_response_arrives_event_by_event(provider: str) -> None:
    response = ScriptedResponse.text("one two three four five six", chunk_size=4, delay=0.02)
    async with ScriptedModelServer(provider, [response]) as server:
        client = server.client()
        arrivals: list[float] = []
        with anyio.fail_after(10):
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                    arrivals.append(anyio.current_time())
        await client.aclose()
    assert len(arrivals) >= 6
    # Deltas were written 20 ms apart, so they cannot all arrive in one read: the last is
    # written at least 100 ms after the first (a lower bound only, whatever the load).
    assert arrivals[-1] - arrivals[0] >= 0.04


async def test_call_ids_stay_unique_across_answers(provider: str) -> None:
    answers = [ScriptedResponse([ToolUsePart("", "f", {})]) for _ in range(2)]
    ids: list[str] = []
    async with ScriptedModelServer(provider, answers) as server:
        client = server.client()
        for _ in answers:
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockStart) and isinstance(event.metadata, ToolUseMetadata):
                    ids.append(event.metadata.id)
        await client.aclose()
    assert len(ids) == 2
    if provider != "gemini":  # Gemini sends no ids: the client synthesizes its own
        assert ids == ["call_0", "call_1"]


# --- a step that fails ------------------------------------------------------------------------


def boom(call: ScriptedRequest) -> ScriptedResponse:
    raise ValueError(f"no answer for request {call.index}")


async def test_a_raising_step_surfaces_and_the_next_step_is_never_played(provider: str) -> None:
    server = ScriptedModelServer(provider, [boom, ScriptedResponse.text("the wrong answer")])
    answers: list[APIStatusError] = []

    async def play() -> None:
        async with server, server.client() as client:
            for _ in range(2):  # a later request gets the same failure
                answers.append(await _failure_of(client))

    # Without the fix the 500 was retried, and the retry played the next step; now the error
    # comes at once, with a status no client retries.
    with anyio.fail_after(5), pytest.raises(ScriptStepError) as raised:
        await play()
    assert [(a.status_code, a.error_type) for a in answers] == [(424, "script_step_failed")] * 2
    assert all("script step 1 (of 2) raised ValueError" in str(a) for a in answers)
    assert len(server.requests) == 2
    assert server.remaining == 2  # the failed step stays current; the second never played
    message = "script step 1 (of 2) raised ValueError('no answer for request 0')"
    assert str(raised.value) == message
    assert isinstance(raised.value.__cause__, ValueError)


async def test_a_worker_run_over_a_raising_step_fails_naming_it(provider: str) -> None:
    script = [ScriptedResponse([ToolUsePart("", "lookup", {"city": "Kyoto"})]), boom]
    server = ScriptedModelServer(provider, script)

    async def run() -> None:
        async with server, server.client() as client:
            worker = Worker(client, tools=[lookup])
            with pytest.raises(APIStatusError, match="script step 2"):
                await worker.run("Weather in Kyoto?")

    with anyio.fail_after(5), pytest.raises(ScriptStepError) as raised:
        await run()
    assert isinstance(raised.value.__cause__, ValueError)
    assert len(server.requests) == 2


async def test_what_the_block_raised_stays_on_the_failure_as_a_note() -> None:
    server = ScriptedModelServer("anthropic", [boom])

    async def run() -> None:
        async with server, server.client() as client:
            await _text_of(client)  # raises the 424 answer's APIStatusError

    with anyio.fail_after(5), pytest.raises(ScriptStepError) as raised:
        await run()
    [note] = raised.value.__notes__
    assert note.startswith("the `async with` block raised APIStatusError(")


async def test_a_cancellation_is_not_replaced_by_the_failure() -> None:
    server = ScriptedModelServer("gemini", [boom])
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async with server:
            async with server.client() as client:
                await _failure_of(client)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    with pytest.raises(ScriptStepError):
        server.check()


@pytest.mark.parametrize(
    ("wire", "step", "problem"),
    [
        ("anthropic", ScriptedResponse([ToolResultPart("x", "?")]), "cannot be streamed"),
        ("openai_chat", lambda call: "not an answer", "returned str, not a ScriptedResponse"),
    ],
)
async def test_a_step_whose_answer_cannot_be_played_fails_the_same_way(
    wire: str, step: ScriptStep, problem: str
) -> None:
    server = ScriptedModelServer(wire, [step])
    answers: list[APIStatusError] = []

    async def play() -> None:
        async with server, server.client() as client:
            answers.append(await _failure_of(client))

    with anyio.fail_after(5), pytest.raises(ScriptStepError, match=problem):
        await play()
    assert problem in str(answers[0])
    assert len(server.requests) == 1


async def test_a_request_the_server_cannot_decode_fails_a_callable_step() -> None:
    server = ScriptedModelServer("anthropic", [boom])
    await server.start()  # started and closed by hand: check() raises, as leaving would
    try:
        async with httpx.AsyncClient() as http:
            answer = await http.post(server.base_url + "/v1/messages", content=b"[1, 2]")
    finally:
        await server.close()
    assert answer.status_code == 424
    with pytest.raises(ScriptStepError, match="could not be decoded") as raised:
        server.check()
    assert isinstance(raised.value.__cause__, InvalidMessagesError)


async def test_a_request_past_the_script_is_answered_at_once_and_raised_on_exit(
    provider: str,
) -> None:
    server = ScriptedModelServer(provider, [ScriptedResponse.text("one")])
    answers: list[APIStatusError] = []

    async def play() -> None:
        async with server, server.client() as client:
            assert await _text_of(client) == "one"
            answers.append(await _failure_of(client))

    with anyio.fail_after(5), pytest.raises(ScriptExhaustedError, match="request 2 made"):
        await play()
    assert answers[0].error_type == "script_exhausted"
    assert len(server.requests) == 2  # not retried


async def test_assert_all_used_names_the_steps_left() -> None:
    async with ScriptedModelServer("gemini", [ScriptedResponse.text("a")] * 2) as server:
        async with server.client() as client:
            await _text_of(client)
        with pytest.raises(ScriptExhaustedError, match="1 script step"):
            server.assert_all_used()


# --- callable steps read the neutral request --------------------------------------------------


@tool(effect="read_only")
def lookup(city: str) -> str:
    """The weather of a city."""
    return f"Sunny in {city}"


class Model:
    """One scripted model for every wire format: it reads the neutral request only."""

    def __init__(self) -> None:
        self.seen: list[ScriptedRequest] = []

    def call_tool(self, call: ScriptedRequest) -> ScriptedResponse:
        self.seen.append(call)
        assert [t.name for t in call.request.tools] == ["lookup"]
        city = call.request.messages[0].text
        return ScriptedResponse([ToolUsePart("", "lookup", {"city": city})])

    def answer(self, call: ScriptedRequest) -> ScriptedResponse:
        self.seen.append(call)
        [result] = call.tool_results
        return ScriptedResponse.text(f"{result.name} says: {result.content}")


async def test_one_callable_script_plays_behind_every_wire_format(provider: str) -> None:
    model = Model()
    server = ScriptedModelServer(provider, [model.call_tool, model.answer])
    async with server, server.client() as client:
        worker = Worker(client, tools=[lookup], system="Be brief.")
        with anyio.fail_after(10):
            result = await worker.run("Kyoto")
    assert result.text == "lookup says: Sunny in Kyoto"
    first, second = model.seen
    assert (first.index, second.index) == (0, 1)
    assert first.request.system == "Be brief."
    assert second.http is server.requests[1]
    [call] = second.request.messages[1].tool_uses
    [answered] = second.tool_results
    assert (call.name, call.input, answered.tool_use_id) == ("lookup", {"city": "Kyoto"}, call.id)


async def test_the_same_script_plays_on_a_scripted_client() -> None:
    model = Model()
    client = ScriptedClient([model.call_tool, model.answer])
    worker = Worker(client, tools=[lookup], system="Be brief.")
    with anyio.fail_after(10):
        result = await worker.run("Kyoto")
    assert result.text == "lookup says: Sunny in Kyoto"
    assert [c.http for c in model.seen] == [None, None]
    assert model.seen[1].request is client.requests[1]
    client.assert_all_used()


async def test_a_raising_step_of_a_scripted_client_raises_and_stays_current() -> None:
    client = ScriptedClient([boom, ScriptedResponse.text("the wrong answer")])
    for _ in range(2):
        with pytest.raises(ScriptStepError, match=r"script step 1 \(of 2\) raised") as raised:
            client.stream(Request([Message.user("hi")]))
        assert isinstance(raised.value.__cause__, ValueError)
    assert client.remaining == 2
    assert client.requests == []


# --- the client ---------------------------------------------------------------------------


async def test_a_client_before_the_server_started_says_so() -> None:
    server = ScriptedModelServer("anthropic", [])
    with pytest.raises(ConfigurationError, match="not running"):
        server.client()
    async with server, server.client() as client:
        assert client.transport.base_url == server.base_url
    with pytest.raises(ConfigurationError, match="not running"):
        server.client()


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
