"""The Responses request body: recorded multi-turn requests rebuilt from the neutral history,
and the rules for what goes back (reasoning items, item ids) and what is refused.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_openai_responses_support import (
    API,
    KEY,
    assemble,
    blocks_of,
    recorded,
    replay,
)

from llm_worker.errors import ConfigurationError, InvalidMessagesError
from llm_worker.messages import (
    Message,
    Origin,
    Part,
    Request,
    SpecificTool,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers import OpenAIResponsesClient
from support.recorded import load

MODEL = "gpt-5"
OURS = Origin(API, MODEL)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def body_for(request: Request, model: str = MODEL) -> dict[str, Any]:
    return OpenAIResponsesClient(model=model, api_key=KEY).build_body(request)


def items_for(*messages: Message, **options: Any) -> list[dict[str, Any]]:
    return body_for(Request(list(messages), **options))["input"]


# -- recorded multi-turn requests ------------------------------------------------------------


def normalize(item: dict[str, Any]) -> dict[str, Any]:
    """An input item reduced to what the API reads (plain-string content = one text part)."""
    kind = item.get("type", "message")
    if kind == "message":
        content = item["content"]
        texts = [content] if isinstance(content, str) else [c["text"] for c in content]
        role = "system" if item["role"] == "developer" else item["role"]
        return {"type": kind, "role": role, "texts": texts, "id": item.get("id")}
    if kind == "function_call":
        arguments = orjson.loads(item["arguments"])
        return {"type": kind, "call_id": item["call_id"], "name": item["name"], "args": arguments}
    if kind == "reasoning":
        summary = [s["text"] for s in item["summary"]]
        return {"type": kind, "id": item["id"], "summary": summary}
    return item


def recorded_input(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recorded body, and its input items normalized (a leading system/developer message
    moved to `instructions`, which is where this client puts the system prompt)."""
    body = load(API, name)["request"]["body"]
    items = [normalize(i) for i in body["input"]]
    if items and items[0].get("role") == "system":
        body = {**body, "instructions": items[0]["texts"][0]}
        items = items[1:]
    return body, items


async def answer_of(name: str, model: str) -> Message:
    """The assistant message the client makes of a recorded answer."""
    events, error, _ = await replay(recorded(name))
    assert error is None
    return assemble(events, Origin(API, model))


@pytest.mark.anyio
async def test_reasoning_summary_run_step2_is_rebuilt_and_sent() -> None:
    first = load(API, "reasoning_summary_run_step1")["request"]["body"]
    want, items = recorded_input("reasoning_summary_run_step2")
    assistant = await answer_of("reasoning_summary_run_step1", "gpt-5")
    history = [
        Message.user(first["input"][0]["content"]),
        assistant,
        Message.user(items[-1]["texts"][0]),
    ]
    request = Request(history, thinking=ThinkingConfig(effort="minimal", include_thoughts=False))
    # Sent for real: the server gets the body and answers with the recorded step 2.
    events, error, server = await replay(
        recorded("reasoning_summary_run_step2"), request=request, model="gpt-5"
    )
    assert error is None
    assert blocks_of(events)[-1].content == "I don't remember."
    body = server.requests[0].json()
    assert [normalize(i) for i in body["input"]] == items
    # The three summary parts went back as one reasoning item; its message with id and status.
    assert body["input"][2]["status"] == "completed"
    assert body["input"][2]["content"][0]["type"] == "output_text"
    assert body["reasoning"] == want["reasoning"]
    assert (body["model"], body["stream"]) == (want["model"], want["stream"])
    assert "include" not in body


@pytest.mark.anyio
async def test_parallel_function_calls_step2_is_rebuilt() -> None:
    want, items = recorded_input("parallel_function_calls_run_step2")
    _, first = recorded_input("parallel_function_calls_run_step1")
    assistant = await answer_of("parallel_function_calls_run_step1", "gpt-4o")
    raw = load(API, "parallel_function_calls_run_step2")["request"]["body"]["input"]
    outputs = [i for i in raw if i.get("type") == "function_call_output"]
    results: list[Part] = [ToolResultPart(i["call_id"], i["output"]) for i in outputs]
    history = [Message.user(first[-1]["texts"][0]), assistant, Message("user", results)]
    tools = [
        ToolSpec(t["name"], t["description"], t["parameters"], strict=t["strict"])
        for t in want["tools"]
    ]
    body = body_for(Request(history, system=want["instructions"], tools=tools), "gpt-4o")
    assert [normalize(i) for i in body["input"]] == items
    calls = [i for i in body["input"] if i["type"] == "function_call"]
    assert [c["id"] for c in calls] == [i["id"] for i in raw if i.get("type") == "function_call"]
    assert body["input"][-2:] == outputs
    assert body["instructions"] == want["instructions"]
    assert body["tools"] == want["tools"]


@pytest.mark.anyio
async def test_function_call_step2_is_rebuilt() -> None:
    want, items = recorded_input("function_call_run_step2")
    assistant = await answer_of("function_call_run_step1", "gpt-4o")
    (call,) = assistant.tool_uses
    # Quirk of this recording: pydantic-ai (March 2025) sent the `fc_…` item id as `call_id`.
    # The `call_id` a result must name is the call's own `call_…` id, which is what goes out.
    assert items[1]["call_id"] == call.item_id
    assert call.id.startswith("call_")
    for item in items:
        if "call_id" in item:
            item["call_id"] = call.id
    history = [
        Message.user(items[0]["texts"][0]),
        assistant,
        Message("user", [ToolResultPart(call.id, "Paris")]),
    ]
    spec = want["tools"][0]
    tools = [ToolSpec(spec["name"], "", spec["parameters"], strict=True)]
    body = body_for(Request(history, tools=tools, tool_choice="auto"), "gpt-4o")
    assert [normalize(i) for i in body["input"]] == items
    assert body["tools"] == want["tools"]
    assert body["tool_choice"] == want["tool_choice"]
    assert "instructions" not in body  # the recording's `""` says nothing


def test_previous_response_id_request_is_rebuilt() -> None:
    want = load(API, "nonstream_previous_response_id_tool_output")["request"]["body"]
    output = want["input"][0]
    spec = want["tools"][0]
    request = Request(
        [Message("user", [ToolResultPart(output["call_id"], output["output"])])],
        tools=[ToolSpec(spec["name"], "", spec["parameters"], strict=True)],
        tool_choice="auto",
        options={"previous_response_id": want["previous_response_id"], "store": True},
    )
    body = body_for(request, "gpt-4.1")
    assert body["input"] == want["input"]
    for key in ("previous_response_id", "store", "tool_choice", "model"):
        assert body[key] == want[key]
    assert "include" not in body


# -- settings --------------------------------------------------------------------------------


def test_request_fields_map_to_the_responses_body() -> None:
    request = Request(
        [Message.user("Weather in Kyoto?")],
        system="Be brief.",
        tools=[ToolSpec("get_weather", "Weather now.", SCHEMA)],
        tool_choice=SpecificTool("get_weather"),
        max_tokens=300,
        temperature=0.2,
    )
    assert body_for(request) == {
        "model": MODEL,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Weather in Kyoto?"}],
            }
        ],
        "stream": True,
        "instructions": "Be brief.",
        # `strict` always goes out: Responses makes an unmarked function tool strict.
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather now.",
                "parameters": SCHEMA,
                "strict": False,
            }
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 300,
        "temperature": 0.2,
    }


@pytest.mark.parametrize(
    ("choice", "sent"), [("auto", "auto"), ("none", "none"), ("required", "required")]
)
def test_tool_choice_strings(choice: Any, sent: str) -> None:
    tools = [ToolSpec("get_weather", "Weather now.", SCHEMA)]
    request = Request([Message.user("x")], tools=tools, tool_choice=choice)
    assert body_for(request)["tool_choice"] == sent
    assert "tool_choice" not in body_for(Request([Message.user("x")], tool_choice=choice))
    hosted = Request([Message.user("x")], tool_choice=choice, options={"tools": [{"type": "x"}]})
    assert body_for(hosted)["tool_choice"] == sent


@pytest.mark.parametrize(
    ("thinking", "reasoning"),
    [
        (None, None),
        # A summary only when asked for: OpenAI refuses the whole request (HTTP 400) when an
        # unverified organization asks for one.
        (ThinkingConfig(effort="high"), {"effort": "high"}),
        (
            ThinkingConfig(effort="high", include_thoughts=True),
            {"effort": "high", "summary": "auto"},
        ),
        (ThinkingConfig(effort="low", include_thoughts=False), {"effort": "low"}),
        # budget_tokens has no Responses equivalent: only the summary request remains.
        (ThinkingConfig(budget_tokens=2048, include_thoughts=True), {"summary": "auto"}),
        (ThinkingConfig(budget_tokens=2048), None),
    ],
)
def test_thinking_maps_to_reasoning(
    thinking: ThinkingConfig | None, reasoning: dict[str, Any] | None
) -> None:
    body = body_for(Request([Message.user("x")], thinking=thinking))
    assert body.get("reasoning") == reasoning


def test_stop_sequences_are_refused_not_ignored() -> None:
    with pytest.raises(ConfigurationError, match="no stop sequences"):
        body_for(Request([Message.user("x")], stop_sequences=["END"]))


def test_options_are_deep_merged_last() -> None:
    request = Request(
        [Message.user("x")],
        thinking=ThinkingConfig(effort="medium"),
        max_tokens=10,
        options={
            "reasoning": {"summary": "detailed"},
            "max_output_tokens": 99,
            "text": {"verbosity": "low"},
            "parallel_tool_calls": False,
        },
    )
    body = body_for(request)
    assert body["reasoning"] == {"effort": "medium", "summary": "detailed"}
    assert body["max_output_tokens"] == 99
    assert body["text"] == {"verbosity": "low"}
    assert body["parallel_tool_calls"] is False


ENCRYPTED = "reasoning.encrypted_content"


@pytest.mark.parametrize(
    ("options", "thinking", "include"),
    [
        ({"store": False}, ThinkingConfig(effort="low"), ["reasoning.encrypted_content"]),
        # Models without reasoning answer `include` with HTTP 400: not added blindly.
        ({"store": False}, None, None),
        ({"store": True}, ThinkingConfig(effort="low"), None),
        ({}, ThinkingConfig(effort="low"), None),
        # An `include` option adds to the builder's: replacing it would drop every reasoning
        # item from the next request.
        ({"store": False, "include": ["x"]}, ThinkingConfig(), [ENCRYPTED, "x"]),
        ({"store": False, "include": ["x", ENCRYPTED]}, ThinkingConfig(), [ENCRYPTED, "x"]),
        ({"include": ["x"]}, ThinkingConfig(), ["x"]),
    ],
)
def test_encrypted_content_is_asked_for_when_nothing_is_stored(
    options: dict[str, Any], thinking: ThinkingConfig | None, include: list[str] | None
) -> None:
    body = body_for(Request([Message.user("x")], thinking=thinking, options=options))
    assert body.get("include") == include


# -- messages --------------------------------------------------------------------------------


def test_tool_results_become_outputs_in_place() -> None:
    user = Message(
        "user",
        [
            ToolResultPart("call_1", "sunny"),
            ToolResultPart("call_2", "boom", is_error=True),
            TextPart("Now summarize."),
        ],
    )
    assert items_for(user) == [
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": "boom"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Now summarize."}],
        },
    ]


def test_assistant_text_and_calls_without_ids() -> None:
    assistant = Message(
        "assistant",
        [
            TextPart("Let me look."),
            TextPart(" Right away."),
            ToolUsePart("call_9", "get_weather", {"city": "Kyōto"}),
        ],
    )
    # Without an item id the text goes as an input message (EasyInputMessageParam): an output
    # message's request type requires `id` and `status`.
    assert items_for(assistant) == [
        {"type": "message", "role": "assistant", "content": "Let me look. Right away."},
        {
            "type": "function_call",
            "call_id": "call_9",
            "name": "get_weather",
            "arguments": '{"city":"Kyōto"}',
        },
    ]


@pytest.mark.parametrize(
    "message",
    [
        Message("user", [ToolUsePart("c", "t", {})]),
        Message("user", [ThinkingPart("hm")]),
        Message("assistant", [ToolResultPart("c", "r")]),
    ],
    ids=["call-in-user", "thinking-in-user", "result-in-assistant"],
)
def test_parts_in_the_wrong_role_are_refused(message: Message) -> None:
    with pytest.raises(InvalidMessagesError):
        items_for(message)


# -- reasoning replay --------------------------------------------------------------------------


def reasoning_turn(origin: Origin = OURS, *, signature: str | None = "enc") -> Message:
    """A reasoning model's tool call: two summary parts of one item, then the call."""
    return Message(
        "assistant",
        [
            ThinkingPart("first", item_id="rs_1", origin=origin),
            ThinkingPart("second", signature=signature, item_id="rs_1", origin=origin),
            ToolUsePart("call_1", "get_weather", {"city": "Oslo"}, item_id="fc_1", origin=origin),
        ],
    )


def test_own_reasoning_goes_back_with_its_call() -> None:
    assert items_for(reasoning_turn()) == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "first"},
                {"type": "summary_text", "text": "second"},
            ],
            "encrypted_content": "enc",
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
            "id": "fc_1",
        },
    ]


def test_stateless_reasoning_goes_back_from_its_encrypted_content() -> None:
    items = items_for(reasoning_turn(), options={"store": False})
    assert items[0]["encrypted_content"] == "enc"
    assert items[1]["id"] == "fc_1"


def test_stateless_reasoning_without_encrypted_content_is_dropped_with_the_ids() -> None:
    # Nothing is kept server-side and nothing encrypted came: the item cannot be resolved,
    # and the call's id would require it.
    items = items_for(reasoning_turn(signature=None), options={"store": False})
    assert [i["type"] for i in items] == ["function_call"]
    assert "id" not in items[0]


@pytest.mark.parametrize(
    "origin",
    [Origin(API, "gpt-5-mini"), Origin("anthropic", MODEL), Origin("gemini", "gemini-2.5-pro")],
    ids=["other-model", "other-provider", "gemini"],
)
def test_foreign_reasoning_is_dropped_and_ids_are_not_sent(origin: Origin) -> None:
    items = items_for(reasoning_turn(origin))
    assert items == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        }
    ]


def test_reasoning_of_another_model_is_dropped_even_before_an_own_call() -> None:
    # The reasoning's own origin decides, not its follower's: another model's item id means
    # nothing to this one (a history merged from two runs can pair them like this).
    other = Origin(API, "gpt-5-mini")
    turn = Message(
        "assistant",
        [
            ThinkingPart("theirs", signature="enc", item_id="rs_9", origin=other),
            ToolUsePart("call_1", "get_weather", {"city": "Oslo"}, item_id="fc_1", origin=OURS),
        ],
    )
    items = items_for(turn)
    assert [i["type"] for i in items] == ["function_call"]
    assert "id" not in items[0]  # the call would require the dropped reasoning item


def test_reasoning_before_an_id_less_message_is_dropped() -> None:
    # OpenAI pairs a reasoning item with the item after it by id: a message without its
    # `msg_` id would leave the reasoning item "without its required following item".
    turn = Message(
        "assistant",
        [
            ThinkingPart("plan", item_id="rs_1", origin=OURS),
            TextPart("I'll check.", origin=OURS),
            ToolUsePart("call_1", "t", {}, item_id="fc_1", origin=OURS),
        ],
    )
    items = items_for(turn)
    assert [i["type"] for i in items] == ["message", "function_call"]
    assert "id" not in items[1]


def test_reasoning_message_and_call_go_back_together() -> None:
    turn = Message(
        "assistant",
        [
            ThinkingPart("", signature="enc", item_id="rs_1", origin=OURS),
            TextPart("I'll check.", item_id="msg_1", origin=OURS),
            ToolUsePart("call_1", "t", {}, item_id="fc_1", origin=OURS),
        ],
    )
    items = items_for(turn)
    assert items[0] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "encrypted_content": "enc",
    }
    assert (items[1]["id"], items[1]["status"]) == ("msg_1", "completed")
    assert items[2]["id"] == "fc_1"


def test_reasoning_whose_follower_was_a_hosted_tool_is_dropped_alone() -> None:
    # rs_1 was followed by a web search the history does not hold; rs_2 by its message.
    turn = Message(
        "assistant",
        [
            ThinkingPart("", signature="a", item_id="rs_1", origin=OURS),
            ThinkingPart("", signature="b", item_id="rs_2", origin=OURS),
            TextPart("Sunny.", item_id="msg_1", origin=OURS),
        ],
    )
    items = items_for(turn)
    assert [(i["type"], i.get("id")) for i in items] == [
        ("reasoning", "rs_2"),
        ("message", "msg_1"),
    ]


@pytest.mark.parametrize(
    "parts",
    [
        [ThinkingPart("cut off", signature="e", item_id="rs_1", origin=OURS)],
        [
            ThinkingPart("no id", signature="e", origin=OURS),
            TextPart("x", item_id="m", origin=OURS),
        ],
    ],
    ids=["nothing-after-it", "no-item-id"],
)
def test_reasoning_that_cannot_be_paired_is_dropped(parts: list[Part]) -> None:
    items = items_for(Message("assistant", parts))
    assert all(i["type"] != "reasoning" for i in items)
    assert all("id" not in i for i in items)
