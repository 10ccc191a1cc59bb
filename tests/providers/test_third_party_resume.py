"""Third-party shapes through pause → JSON → resume in a fresh Worker and client.

The continuation data each shape left in the history (Mistral's thinking part, a Responses
call's namespace and program caller) must survive the pause state's JSON and reach the wire
of the resumed run as it would have without the pause.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import Message, PauseState, RunStatus, Worker, tool
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.providers import OpenAIChatClient, OpenAIResponsesClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer
from support import streams
from support.sdk_types import mismatches
from support.third_party import load, response

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]


class Weather:
    def __init__(self) -> None:
        self.cities: list[str] = []

    @tool
    async def lookup(self, city: str) -> str:
        """Look up the weather of a city."""
        self.cities.append(city)
        return f"{city}: clear"


async def _ask_first(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("a person approves every lookup")


async def _paused_then_resumed(
    answers: list[WireResponse], make: Any, **worker_options: Any
) -> tuple[Weather, list[dict[str, Any]], str]:
    weather = Weather()
    async with WireServer(answers) as server:
        first, second = make(server), make(server)
        try:
            pausing = Worker(first, tools=[Weather().lookup], **worker_options)
            pausing.add_before_tool_call_hook(_ask_first)
            with anyio.fail_after(streams.TIMEOUT):
                paused = await pausing.run("Weather in Kyoto?")
            assert paused.status is RunStatus.PAUSED and paused.state is not None
            saved = paused.state.to_json()
            resuming = Worker(second, tools=[weather.lookup], **worker_options)
            resuming.add_before_tool_call_hook(_ask_first)
            with anyio.fail_after(streams.TIMEOUT):
                result = await resuming.resume(PauseState.from_json(saved))
        finally:
            await first.aclose()
            await second.aclose()
        bodies = [r.json() for r in server.requests]
    assert result.status is RunStatus.FINISHED, result
    return weather, bodies, saved


async def test_mistral_thinking_survives_the_pause_state() -> None:
    model = "magistral-medium-latest"

    def make(server: WireServer) -> OpenAIChatClient:
        base = server.base_url + "/v1"
        return OpenAIChatClient(
            model=model, base_url=base, api_key="k", retry=RetryPolicy.disabled()
        )

    final = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Clear."},"finish_reason":"stop"}]}\n\n'
    )
    answers = [response("openai_chat", "mistral_magistral_thinking_tool_call"), WireResponse(final)]
    weather, bodies, saved = await _paused_then_resumed(answers, make)
    assert weather.cities == ["Kyoto"]
    assert '"item_id":"thinking"' in saved.replace(" ", "")
    sent = bodies[1]["messages"][1]
    assert sent["content"][0]["type"] == "thinking"
    assert sent["tool_calls"][0]["id"] == "D681PevKs"


async def test_a_program_call_keeps_its_namespace_and_caller_through_the_pause_state() -> None:
    model = "gpt-5.5"
    tools = load("openai_responses", "programmatic_tool_calling_step1")["request"]["body"]["tools"]

    def make(server: WireServer) -> OpenAIResponsesClient:
        base = server.base_url + "/v1"
        return OpenAIResponsesClient(
            model=model, base_url=base, api_key="k", retry=RetryPolicy.disabled()
        )

    answers = [
        response("openai_responses", "programmatic_tool_calling_step1"),
        response("openai_responses", "programmatic_tool_calling_step2"),
    ]
    weather, bodies, _ = await _paused_then_resumed(answers, make, options={"tools": tools})
    assert weather.cities == ["Kyoto"]
    call = bodies[1]["input"][2]
    assert (call["namespace"], call["caller"]) == (
        "weather",
        {"type": "program", "caller_id": "call_prog_01"},
    )
    assert bodies[1]["input"][1]["type"] == "program"
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    assert mismatches(bodies[1], ResponseCreateParamsStreaming) == []


def test_mistral_thinking_goes_to_no_other_provider() -> None:
    from llm_worker.messages import Origin, Request, ThinkingPart, ToolUsePart
    from llm_worker.providers._anthropic_request import build_body as anthropic_body
    from llm_worker.providers._gemini_request import build_body as gemini_body

    origin = Origin("openai_chat", "magistral-medium-latest")
    answer = Message(
        "assistant",
        [ThinkingPart("secret", item_id="thinking", origin=origin), ToolUsePart("c1", "f", {})],
    )
    request = Request([Message.user("q"), answer])
    assert "secret" not in str(anthropic_body(request, model="claude-sonnet-4-5"))
    assert "secret" not in str(gemini_body(request, "gemini-2.5-flash"))
