"""Responses shapes no public recording holds (tests/fixtures/third_party/openai_responses).

- a function call's `namespace` and `caller` are kept and sent back, and programmatic tool
  calling's `program` / `program_output` items are kept whole and sent back in place;
- assistant text without an item id goes back as an input message with text content, the
  shape the SDK's request types allow (an output message needs `id` and `status`).

Through the real `OpenAIResponsesClient` over HTTP on 127.0.0.1 and a Worker; every next
body is checked against the openai SDK's `ResponseCreateParamsStreaming`.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_openai_responses_support import KEY

from llm_worker import Message, Worker, tool
from llm_worker.events import BlockStart, ToolUseMetadata
from llm_worker.messages import Origin, ProviderPart, Request, TextPart, ToolUsePart
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers._openai_responses_request import build_body
from llm_worker.providers.openai_responses import OpenAIResponsesClient
from llm_worker.testing import WireServer
from support import streams
from support.sdk_types import mismatches
from support.third_party import load, response
from support.wire_bodies import assert_valid

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

API = "openai_responses"
MODEL = "gpt-5.5"
ORIGIN = Origin(API, MODEL)


def _sdk_mismatches(body: dict[str, Any]) -> list[str]:
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    return mismatches(body, ResponseCreateParamsStreaming)


def _client(server: WireServer) -> OpenAIResponsesClient:
    base = server.base_url + "/v1"
    return OpenAIResponsesClient(
        model=MODEL, api_key=KEY, base_url=base, retry=RetryPolicy.disabled()
    )


class Weather:
    def __init__(self) -> None:
        self.cities: list[str] = []

    @tool
    async def lookup(self, city: str) -> str:
        """Look up the weather of a city."""
        self.cities.append(city)
        return f"{city}: clear"


# -- 5. namespace, caller, program items -----------------------------------------------------


async def test_the_call_keeps_its_namespace_and_caller() -> None:
    async with WireServer([response(API, "programmatic_tool_calling_step1")]) as server:
        client = _client(server)
        try:
            events, error = await streams.collect(client, Request([Message.user("Weather?")]))
        finally:
            await client.aclose()
    assert error is None
    metas = [e.metadata for e in events if isinstance(e, BlockStart)]
    (call,) = [m for m in metas if isinstance(m, ToolUseMetadata)]
    assert (call.id, call.name, call.item_id) == ("call_01", "lookup", "fc_01")
    assert call.caller == {"type": "program", "caller_id": "call_prog_01", "namespace": "weather"}
    message = streams.assemble(events, ORIGIN)
    (program,) = [p.data for p in message.content if isinstance(p, ProviderPart)]
    assert program["fingerprint"] == "pfp_9c2e7a1b"


async def test_the_worker_sends_the_program_and_the_namespaced_call_back() -> None:
    weather = Weather()
    tools_option = load(API, "programmatic_tool_calling_step1")["request"]["body"]["tools"]
    answers = [
        response(API, "programmatic_tool_calling_step1"),
        response(API, "programmatic_tool_calling_step2"),
    ]
    async with WireServer(answers) as server:
        client = _client(server)
        try:
            worker = Worker(client, tools=[weather.lookup], options={"tools": tools_option})
            with anyio.fail_after(streams.TIMEOUT):
                result = await worker.run("Weather in Kyoto?")
            bodies = [r.json() for r in server.requests]
        finally:
            await client.aclose()
    assert result.text == "It is clear in Kyoto."
    assert weather.cities == ["Kyoto"]
    second = bodies[1]["input"]
    program = load(API, "programmatic_tool_calling_step1")["response"]["body"]
    assert second[1]["type"] == "program" and second[1]["fingerprint"] in program
    assert second[2] == {
        "type": "function_call",
        "call_id": "call_01",
        "name": "lookup",
        "arguments": '{"city":"Kyoto"}',
        "id": "fc_01",
        "namespace": "weather",
        "caller": {"type": "program", "caller_id": "call_prog_01"},
    }
    assert second[3] == {
        "type": "function_call_output",
        "call_id": "call_01",
        "output": "Kyoto: clear",
    }
    assert _sdk_mismatches(bodies[1]) == []
    assert_valid(API, bodies[1])
    # The whole history, as the next turn would send it: program_output kept in place.
    after = build_body(Request([*worker.history, Message.user("Thanks.")]), model=MODEL)
    kinds = [item["type"] for item in after["input"]]
    assert kinds == [
        "message",
        "program",
        "function_call",
        "function_call_output",
        "program_output",
        "message",
        "message",
    ]
    assert _sdk_mismatches(after) == []


def test_a_namespace_goes_to_any_responses_model_and_a_caller_only_to_its_own() -> None:
    call = ToolUsePart(
        "call_01",
        "lookup",
        {"city": "Kyoto"},
        item_id="fc_01",
        origin=ORIGIN,
        caller={"type": "program", "caller_id": "call_prog_01", "namespace": "weather"},
    )
    history = [Message.user("q"), Message("assistant", [call])]
    other = build_body(Request(history), model="gpt-5-mini")["input"][1]
    assert other["namespace"] == "weather"
    assert "caller" not in other and "id" not in other
    anthropic_call = ToolUsePart("toolu_1", "lookup", {}, caller={"type": "direct"})
    foreign = build_body(
        Request([Message.user("q"), Message("assistant", [anthropic_call])]), model=MODEL
    )
    assert "caller" not in foreign["input"][1] and "namespace" not in foreign["input"][1]


# -- 7. assistant text without an item id ------------------------------------------------------


def test_text_without_an_item_id_goes_as_an_input_message() -> None:
    history = [
        Message.user("q"),
        Message("assistant", [TextPart("From another provider."), TextPart(" Twice.")]),
        Message.user("and?"),
    ]
    body = build_body(Request(history), model=MODEL)
    assert body["input"][1] == {
        "type": "message",
        "role": "assistant",
        "content": "From another provider. Twice.",
    }
    assert _sdk_mismatches(body) == []


def test_the_type_check_refuses_the_old_shape() -> None:
    # What the builder sent before: an output message without id and status.
    body = build_body(Request([Message.user("q")]), model=MODEL)
    old = {"type": "output_text", "text": "x", "annotations": []}
    body["input"].append({"type": "message", "role": "assistant", "content": [old]})
    assert _sdk_mismatches(body) != []


def test_a_phase_stays_on_text_without_an_id() -> None:
    own = Origin(API, "gpt-5-mini")  # another Responses model: no ids, phase kept
    text = TextPart("Working on it.", item_id="msg_9", origin=own, phase="commentary")
    body = build_body(Request([Message.user("q"), Message("assistant", [text])]), model=MODEL)
    assert body["input"][1] == {
        "type": "message",
        "role": "assistant",
        "content": "Working on it.",
        "phase": "commentary",
    }
    assert _sdk_mismatches(body) == []


async def test_a_caller_and_namespace_of_the_wrong_type_are_passed_over() -> None:
    from llm_worker.testing import WireResponse

    body = load(API, "programmatic_tool_calling_step1")["response"]["body"]
    hostile = body.replace('"namespace":"weather"', '"namespace":5').replace(
        '"caller":{"type":"program","caller_id":"call_prog_01"}', '"caller":"program"'
    )
    assert hostile.count('"caller":"program"') == 3  # added, done, completed
    async with WireServer([WireResponse(hostile)]) as server:
        client = _client(server)
        try:
            events, error = await streams.collect(client, Request([Message.user("Weather?")]))
        finally:
            await client.aclose()
    assert error is None
    (call,) = [
        e.metadata
        for e in events
        if isinstance(e, BlockStart) and isinstance(e.metadata, ToolUseMetadata)
    ]
    assert (call.id, call.caller) == ("call_01", None)
