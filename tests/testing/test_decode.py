"""decode_request: each client's request body read back into the neutral Request it came from.

Each round trip builds a body with the real client's `build_body` and decodes it: what the
wire format can carry comes back equal — messages (text, thinking with its opaque data, tool
calls, tool results), system prompt, tools, tool choice, limits and thinking settings.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker import (
    Citation,
    Message,
    Origin,
    ProviderPart,
    Request,
    SpecificTool,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.errors import ConfigurationError, InvalidMessagesError
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._gemini_schema import gemini_schema
from llm_worker.testing import decode_request

CLIENTS: dict[str, type[HttpClient]] = {
    "anthropic": AnthropicClient,
    "openai_chat": OpenAIChatClient,
    "openai_responses": OpenAIResponsesClient,
    "gemini": GeminiClient,
}
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai_chat": "gpt-4.1",
    "openai_responses": "gpt-5",
    "gemini": "gemini-2.5-flash",
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city."}},
    "required": ["city"],
}


def round_trip(provider: str, request: Request) -> Request:
    client = CLIENTS[provider](model=MODELS[provider], api_key="test-key")
    return decode_request(provider, client.build_body(request), model=MODELS[provider])


def conversation(provider: str) -> list[Message]:
    """A tool loop with every part the wire format carries, opaque data as it produces it."""
    own = Origin(provider, MODELS[provider])
    ids = ["gemini_call_0", "gemini_call_1"] if provider == "gemini" else ["call_a", "call_b"]
    errors = provider in ("anthropic", "gemini")  # the OpenAI APIs have no error flag
    thinking: list[Any] = []
    text = TextPart("Checking both.")
    cities = ("Kyoto", "Oslo")
    calls = [ToolUsePart(i, "get_weather", {"city": c}) for i, c in zip(ids, cities, strict=True)]
    if provider == "anthropic":
        thinking = [
            ThinkingPart("Two cities.", signature="sig-1", origin=own),
            ThinkingPart("", redacted="opaque", origin=own),
        ]
    elif provider == "openai_responses":
        thinking = [ThinkingPart("Two cities.", signature="enc", item_id="rs_1", origin=own)]
        cited = {"type": "url_citation", "start_index": 0, "end_index": 8, "url": "u", "title": "t"}
        citation = Citation(cited, url="u", title="t", start_index=0, end_index=8, origin=own)
        text = TextPart("Checking both.", item_id="msg_1", origin=own, phase="commentary")
        text.citations.append(citation)
        for n, call in enumerate(calls):
            call.item_id, call.origin = f"fc_{n}", own
    elif provider == "openai_chat":
        thinking = [ThinkingPart("Two cities.", origin=own)]  # read as reasoning_content
    elif provider == "gemini":
        thinking = [ThinkingPart("Two cities.", signature="g-1", origin=own)]
        calls[0].signature, calls[0].origin = "g-2", own
    extra = [ProviderPart({"type": "server_tool_use", "id": "s1"}, origin=own)]
    return [
        Message.user("Weather in Kyoto and Oslo?"),
        Message("assistant", [*thinking, text, *calls]),
        Message(
            "user",
            [
                ToolResultPart(ids[0], "Sunny", name="get_weather"),
                ToolResultPart(ids[1], "no data", is_error=errors, name="get_weather"),
            ],
        ),
        Message("assistant", [TextPart("Kyoto is sunny."), *extra[: provider == "anthropic"]]),
        Message.user("Thanks!"),
    ]


def request_settings(provider: str) -> dict[str, Any]:
    if provider == "anthropic":
        return {"thinking": ThinkingConfig(budget_tokens=1024), "stop_sequences": ["END"]}
    if provider == "openai_responses":  # no stop sequences on Responses
        thinking = ThinkingConfig(effort="low", include_thoughts=True)
        return {"thinking": thinking, "parallel_tool_calls": False}
    if provider == "openai_chat":
        thinking = ThinkingConfig(effort="low")
        return {"thinking": thinking, "stop_sequences": ["END"], "parallel_tool_calls": False}
    return {"thinking": ThinkingConfig(budget_tokens=1024), "stop_sequences": ["END"]}


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_a_tool_loop_round_trips(provider: str) -> None:
    strict = provider.startswith("openai")  # only OpenAI sends `strict`
    tool = ToolSpec("get_weather", "The weather of a city.", SCHEMA, strict=strict)
    original = Request(
        conversation(provider),
        system="Be brief.",
        tools=[tool],
        tool_choice="auto",
        max_tokens=2000,
        temperature=1.0,
        **request_settings(provider),
    )
    decoded = round_trip(provider, original)
    assert decoded.messages == original.messages
    assert decoded.system == "Be brief."
    if provider == "gemini":  # declarations carry Gemini's schema dialect
        tool = ToolSpec(tool.name, tool.description, gemini_schema(SCHEMA))
    assert decoded.tools == [tool]
    assert (decoded.tool_choice, decoded.max_tokens, decoded.temperature) == ("auto", 2000, 1.0)
    assert decoded.stop_sequences == original.stop_sequences
    assert decoded.thinking == original.thinking
    assert decoded.parallel_tool_calls == original.parallel_tool_calls
    assert decoded.options == {}


@pytest.mark.parametrize("provider", sorted(CLIENTS))
@pytest.mark.parametrize("choice", ["none", "required", SpecificTool("get_weather")])
def test_tool_choices_round_trip(provider: str, choice: Any) -> None:
    tool = ToolSpec("get_weather", "The weather.", SCHEMA)
    original = Request([Message.user("hi")], tools=[tool], tool_choice=choice)
    assert round_trip(provider, original).tool_choice == choice


@pytest.mark.parametrize("provider", sorted(CLIENTS))
def test_fields_without_a_neutral_one_go_to_options(provider: str) -> None:
    options = {
        "anthropic": {"top_k": 5, "metadata": {"user_id": "u"}},
        "openai_chat": {"seed": 7, "user": "u"},
        "openai_responses": {"store": False, "previous_response_id": "resp_1"},
        "gemini": {"safetySettings": [{"category": "x"}], "generationConfig": {"topK": 5}},
    }[provider]
    decoded = round_trip(provider, Request([Message.user("hi")], options=options))
    assert decoded.options == options
    assert decoded.messages == [Message.user("hi")]


def test_a_result_without_a_name_takes_its_calls() -> None:
    messages = [
        Message.user("hi"),
        Message("assistant", [ToolUsePart("call_1", "lookup", {})]),
        Message("user", [ToolResultPart("call_1", "done")]),
    ]
    decoded = round_trip("openai_chat", Request(messages))
    assert decoded.messages[-1].tool_results == [ToolResultPart("call_1", "done", name="lookup")]


def test_gemini_pairs_results_with_calls_by_name_and_order() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "a", "args": {}}},
                    {"functionCall": {"name": "b", "args": {}}},
                    {"functionCall": {"name": "a", "args": {"n": 2}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "b", "response": {"output": "B"}}},
                    {"functionResponse": {"name": "a", "response": {"output": "A1"}}},
                    {"functionResponse": {"name": "a", "response": {"error": "A2 failed"}}},
                ],
            },
        ]
    }
    decoded = decode_request("gemini", body, model="gemini-2.5-flash")
    results = [(r.tool_use_id, r.content, r.is_error) for r in decoded.messages[-1].tool_results]
    assert results == [
        ("gemini_call_1", "B", False),
        ("gemini_call_0", "A1", False),
        ("gemini_call_2", "A2 failed", True),
    ]


def test_gemini_placeholder_signatures_are_no_signatures() -> None:
    history = [
        Message.user("hi"),
        Message("assistant", [ToolUsePart("gemini_call_0", "lookup", {})]),  # from elsewhere
        Message("user", [ToolResultPart("gemini_call_0", "ok", name="lookup")]),
    ]
    decoded = round_trip_model("gemini", "gemini-3-pro-preview", Request(history))
    assert decoded.messages == history


def round_trip_model(provider: str, model: str, request: Request) -> Request:
    body = CLIENTS[provider](model=model, api_key="k").build_body(request)
    assert "skip_thought_signature_validator" in str(body)
    return decode_request(provider, body, model=model)


def test_provider_spellings_a_builder_never_emits_are_read_too() -> None:
    chat = {
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
        ],
        "stop": "END",
        "max_tokens": 10,
    }
    decoded = decode_request("openai_chat", chat)
    assert (decoded.system, decoded.stop_sequences, decoded.max_tokens) == (
        "Be brief.",
        ["END"],
        10,
    )
    assert decoded.messages == [Message("user", [TextPart("a"), TextPart("b")])]
    responses = decode_request("openai_responses", {"input": "hi", "instructions": "Be brief."})
    assert (responses.messages, responses.system) == ([Message.user("hi")], "Be brief.")
    anthropic = decode_request(
        "anthropic",
        {
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert (anthropic.messages, anthropic.system) == ([Message.user("hi")], "Be brief.")


@pytest.mark.parametrize(
    ("provider", "body", "error", "problem"),
    [
        ("anthropic", [1], InvalidMessagesError, "must be a JSON object, not list"),
        ("bedrock", {}, ConfigurationError, "unknown wire format 'bedrock'"),
        ("anthropic", {"messages": [{"role": "system"}]}, InvalidMessagesError, "no known role"),
        (
            "openai_chat",
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "c", "function": {"name": "f", "arguments": "{oops"}}
                        ],
                    }
                ]
            },
            InvalidMessagesError,
            "the arguments of the call of 'f' are not JSON",
        ),
        (
            "openai_responses",
            {"input": [{"type": "function_call", "name": "f", "arguments": "[1]"}]},
            InvalidMessagesError,
            "not a JSON object",
        ),
        (  # a body built in Python, not parsed: an integer JSON cannot carry
            "gemini",
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [
                            {"functionResponse": {"name": "f", "response": {"output": 2**70}}}
                        ],
                    }
                ]
            },
            InvalidMessagesError,
            "the result of 'f' cannot be written as JSON",
        ),
    ],
)
def test_a_body_that_cannot_be_read_gets_a_typed_error(
    provider: str, body: object, error: type[Exception], problem: str
) -> None:
    with pytest.raises(error, match=problem):
        decode_request(provider, body)


# Conversations of text, calls and results in any order the Worker makes them.
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=20)
INT64 = st.integers(-(2**63), 2**63 - 1)  # JSON encoders refuse wider integers
ARGS = st.dictionaries(st.sampled_from(["a", "b", "é"]), INT64 | TEXT, max_size=2)


@st.composite
def tool_loops(draw: st.DrawFn, provider: str) -> list[Message]:
    messages = [Message.user(draw(TEXT))]
    calls = 0
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(1, 3))
        ids = [
            f"gemini_call_{calls + i}" if provider == "gemini" else f"c{calls + i}"
            for i in range(n)
        ]
        calls += n
        uses = [ToolUsePart(i, draw(st.sampled_from(["f", "g"])), draw(ARGS)) for i in ids]
        texts = [TextPart(draw(TEXT))] if draw(st.booleans()) else []
        messages.append(Message("assistant", [*texts, *uses]))
        messages.append(
            Message("user", [ToolResultPart(u.id, draw(TEXT), name=u.name) for u in uses])
        )
    messages.append(Message("assistant", [TextPart(draw(TEXT))]))
    return messages


@pytest.mark.parametrize("provider", sorted(CLIENTS))
@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data())
def test_any_tool_loop_round_trips(provider: str, data: st.DataObject) -> None:
    messages = data.draw(tool_loops(provider))
    assert round_trip(provider, Request(messages)).messages == messages
