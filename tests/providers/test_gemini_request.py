"""Gemini request bodies: from the neutral request, and against the recorded real requests."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from test_gemini_support import (
    API,
    KEY,
    assemble,
    client_for,
    collect,
    recorded_model,
    recording_response,
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
from llm_worker.providers import GeminiClient, from_string
from llm_worker.providers._gemini_request import SKIP_SIGNATURE, build_body
from llm_worker.testing import WireServer
from support.recorded import load

pytestmark = pytest.mark.anyio

GEMINI = Origin("gemini", "gemini-2.5-flash")


def _body(messages: list[Message], model: str = "gemini-2.5-flash", **options: Any) -> Any:
    return build_body(Request(messages, **options), model)


# --- the recorded requests ----------------------------------------------------------------


def _signature(value: str | None) -> bytes | None:
    # The recorded follow-up requests carry the signature in URL-safe base64 (the recording
    # client decoded the bytes and encoded them again); the API reads both alphabets, and we
    # send back the text Gemini sent. What must match is the bytes.
    if value is None:
        return None
    return base64.urlsafe_b64decode(value.replace("+", "-").replace("/", "_"))


def _part_essentials(part: dict[str, Any]) -> tuple[Any, ...]:
    signature = _signature(part.get("thoughtSignature"))
    if "functionCall" in part:
        call = part["functionCall"]
        return ("call", call["name"], call.get("args", {}), signature)
    if "functionResponse" in part:
        response = part["functionResponse"]
        # The key under `response` is free (`output` here, `return_value` for other clients).
        return ("result", response["name"], list(response["response"].values()), signature)
    return ("text", part["text"], bool(part.get("thought")), signature)


def _camel(key: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)


def _config(value: Any) -> Any:
    # The API reads snake_case and camelCase field names alike.
    if isinstance(value, dict):
        return {_camel(k): _config(v) for k, v in value.items()}  # type: ignore[misc]
    return value


def essentials(body: dict[str, Any]) -> dict[str, Any]:
    """Every field that matters to the model, in a form two clients' bodies share."""
    return {
        "contents": [
            (c["role"], [_part_essentials(p) for p in c["parts"]]) for c in body["contents"]
        ],
        "system": [p["text"] for p in body.get("systemInstruction", {}).get("parts", [])],
        "tools": [
            d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])
        ],
        "toolConfig": body.get("toolConfig"),
        "generationConfig": _config(body.get("generationConfig", {})),
    }


def _json_schema(declaration: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a recorded declaration was made from (types back to lower case)."""
    if "parameters_json_schema" in declaration:
        return declaration["parameters_json_schema"]

    def lower(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: v.lower() if k == "type" else lower(v)
                for k, v in node.items()  # type: ignore[misc]
            }
        return node

    return lower(declaration.get("parameters", {"type": "object", "properties": {}}))


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    return [
        ToolSpec(d["name"], d.get("description") or "", _json_schema(d))
        for t in body.get("tools", [])
        for d in t.get("functionDeclarations", [])
    ]


async def _answer_of(name: str, request: Request) -> Message:
    """A recorded answer streamed through the client, as the history's assistant message."""
    model = recorded_model(name)
    events, error, _ = await replay(recording_response(name), request=request, model=model)
    assert error is None
    return assemble(events, Origin("gemini", model))


def _user_turn(content: dict[str, Any], previous: Message | None) -> Message:
    calls = previous.tool_uses if previous is not None else []
    parts: list[Part] = []
    for i, part in enumerate(content["parts"]):
        if "text" in part:
            parts.append(TextPart(part["text"]))
        else:
            # Results name their call by id only: the builder finds the function's name.
            value = next(iter(part["functionResponse"]["response"].values()))
            parts.append(ToolResultPart(calls[i].id, value))
    return Message("user", parts)


async def _rebuild(run: str, step: int) -> tuple[Request, dict[str, Any]]:
    """The request of `run_step<step>` rebuilt: users' turns from the recorded request, the
    model's turns from the recorded answers of the earlier steps, streamed by the client."""
    recorded = load(API, f"{run}_step{step}")["request"]["body"]
    messages: list[Message] = []
    answered = 0
    for content in recorded["contents"]:
        if content["role"] == "model":
            answered += 1
            messages.append(await _answer_of(f"{run}_step{answered}", Request(list(messages))))
        else:
            messages.append(_user_turn(content, messages[-1] if messages else None))
    system = recorded.get("systemInstruction", {}).get("parts", [{}])[0].get("text")
    config = recorded.get("generationConfig")
    request = Request(
        messages,
        system=system,
        tools=_tools(recorded),
        options={"generationConfig": config} if config else {},
    )
    return request, recorded


@pytest.mark.parametrize(
    ("run", "step"),
    [
        ("function_call_thought_signature_run", 2),
        ("parallel_function_calls_run", 2),
        ("sequential_function_calls_run", 2),
        ("sequential_function_calls_run", 3),
    ],
)
async def test_multi_turn_requests_rebuild_the_recorded_bodies(run: str, step: int) -> None:
    request, recorded = await _rebuild(run, step)
    model = recorded_model(f"{run}_step{step}")
    body = build_body(request, model)
    assert essentials(body) == essentials(recorded)
    # Signatures went back verbatim, on the parts that carried them.
    signed = [p for c in body["contents"] for p in c["parts"] if "thoughtSignature" in p]
    recorded_signed = [
        p for c in recorded["contents"] for p in c["parts"] if "thoughtSignature" in p
    ]
    assert len(signed) == len(recorded_signed)
    # The same history sent to another model drops them (and Gemini 3 gets the placeholder).
    other = build_body(request, "gemini-3-pro-preview" if "3" not in model else "gemini-2.5-pro")
    sent = [p.get("thoughtSignature") for c in other["contents"] for p in c["parts"]]
    assert not any(s and s != SKIP_SIGNATURE for s in sent)


async def test_recorded_declarations_match_our_schema_conversion() -> None:
    # google-genai converted this pydantic schema for the recorded request; ours agrees, but
    # for `title`, which we drop (the python-genai SDK mishandles it; it tells the model
    # nothing the property name does not).
    recorded = load(API, "parallel_function_calls_run_step1")["request"]["body"]
    declaration = recorded["tools"][0]["functionDeclarations"][0]
    ours = _body([Message.user("x")], tools=_tools(recorded))["tools"][0]["functionDeclarations"][0]
    want = {
        **declaration,
        "parameters": {
            **declaration["parameters"],
            "properties": {"password": {"type": "STRING"}},
        },
    }
    assert ours == want


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("plain_text", {"system": "You are a helpful chatbot.", "temperature": 0.0}),
        ("finish_max_tokens", {"max_tokens": 50}),
        ("thought_summaries_include_thoughts", {"thinking": ThinkingConfig(budget_tokens=6400)}),
        (
            "thought_parts_with_signature",
            {"system": "You are a helpful assistant.", "thinking": ThinkingConfig()},
        ),
    ],
)
async def test_single_requests_match_the_recorded_bodies(
    name: str, options: dict[str, Any]
) -> None:
    recorded = load(API, name)["request"]["body"]
    text = recorded["contents"][0]["parts"][0]["text"]
    tools = [ToolSpec(t.name, t.description, t.input_schema) for t in _tools(recorded)]
    body = _body([Message.user(text)], tools=tools, **options)
    assert essentials(body) == essentials(recorded)


# --- the client ---------------------------------------------------------------------------


async def test_the_request_on_the_wire() -> None:
    async with WireServer([recording_response("plain_text")]) as server:
        client = client_for(server, model="gemini-2.5-flash")
        request = Request([Message.user("Hi")], system="Be brief.", max_tokens=10)
        events, error = await collect(client, request)
        await client.aclose()
    assert error is None and events
    sent = server.requests[0]
    assert sent.method == "POST"
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert sent.query == {"alt": "sse"}
    assert sent.headers["x-goog-api-key"] == KEY
    assert "authorization" not in sent.headers
    assert sent.json() == build_body(request, "gemini-2.5-flash")


def test_path_keeps_qualified_model_names() -> None:
    client = GeminiClient(model="tunedModels/my-model-1", api_key=KEY)
    assert client.path(Request([])) == "/tunedModels/my-model-1:streamGenerateContent"


def test_key_comes_from_gemini_then_google_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-1")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key-2")
    assert GeminiClient(model="m").auth_headers("x") == {"x-goog-api-key": "x"}
    client = GeminiClient(model="m")
    assert "gemini-key-2" not in repr(client)
    assert client.transport.scrub("k=gemini-key-2") == "k=***"
    monkeypatch.delenv("GEMINI_API_KEY")
    assert GeminiClient(model="m").transport.scrub("google-key-1") == "***"
    monkeypatch.delenv("GOOGLE_API_KEY")
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiClient(model="m")


def test_model_string_picks_the_gemini_client() -> None:
    client = from_string("gemini:gemini-2.5-pro", api_key=KEY)
    assert isinstance(client, GeminiClient)
    assert client.model == "gemini-2.5-pro"
    assert client.provider == "gemini"


# --- building bodies ----------------------------------------------------------------------


def test_roles_are_user_and_model_and_adjacent_turns_merge() -> None:
    body = _body(
        [
            Message.user("a"),
            Message.user("b"),
            Message.assistant("c"),
            Message("assistant", [TextPart("")]),  # nothing to send: skipped
            Message.assistant("d"),
        ]
    )
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
        {"role": "model", "parts": [{"text": "c"}, {"text": "d"}]},
    ]


def test_system_tools_choice_and_generation_config() -> None:
    tool = ToolSpec("get", "Get it.", {"type": "object", "properties": {"k": {"type": "string"}}})
    body = _body(
        [Message.user("x")],
        system="Sys",
        tools=[tool, ToolSpec("ping", "No arguments.", {"type": "object", "properties": {}})],
        tool_choice=SpecificTool("get"),
        max_tokens=100,
        temperature=0.5,
        stop_sequences=["END"],
        thinking=ThinkingConfig(effort="low", include_thoughts=False),
    )
    assert body["systemInstruction"] == {"parts": [{"text": "Sys"}]}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get",
                    "description": "Get it.",
                    "parameters": {"type": "OBJECT", "properties": {"k": {"type": "STRING"}}},
                },
                {"name": "ping", "description": "No arguments."},  # no empty OBJECT
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get"]}
    }
    assert body["generationConfig"] == {
        "maxOutputTokens": 100,
        "temperature": 0.5,
        "stopSequences": ["END"],
        "thinkingConfig": {"includeThoughts": False, "thinkingBudget": 1024},
    }


@pytest.mark.parametrize(
    ("model", "effort", "config"),
    [
        ("gemini-3-pro-preview", "low", {"thinkingLevel": "low"}),
        ("gemini-3-flash", "minimal", {"thinkingLevel": "minimal"}),
        ("gemini-2.5-flash", "minimal", {"thinkingBudget": 0}),
        ("gemini-2.5-pro", "minimal", {"thinkingBudget": 128}),  # pro cannot turn thinking off
        ("gemini-2.5-flash", "high", {"thinkingBudget": 24576}),
        ("models/gemini-2.0-flash", "medium", {"thinkingBudget": 8192}),
    ],
)
def test_an_effort_becomes_a_level_on_gemini_3_and_a_budget_before(
    model: str, effort: Any, config: dict[str, Any]
) -> None:
    body = _body([Message.user("x")], model, thinking=ThinkingConfig(effort=effort))
    assert body["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, **config}


@pytest.mark.parametrize(
    ("choice", "mode"), [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")]
)
def test_tool_choice_modes(choice: Any, mode: str) -> None:
    tool = ToolSpec("t", "", {"type": "object", "properties": {}})
    body = _body([Message.user("x")], tools=[tool], tool_choice=choice)
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_no_tools_no_tool_config_and_no_empty_generation_config() -> None:
    body = _body([Message.user("x")], tool_choice="none")
    assert set(body) == {"contents"}


def test_a_budget_wins_over_an_effort() -> None:
    body = _body([Message.user("x")], thinking=ThinkingConfig(budget_tokens=0, effort="high"))
    assert body["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingBudget": 0,
    }


def test_options_are_deep_merged_last() -> None:
    body = _body(
        [Message.user("x")],
        max_tokens=5,
        options={
            "generationConfig": {"responseMimeType": "application/json", "maxOutputTokens": 9},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    )
    assert body["generationConfig"] == {
        "maxOutputTokens": 9,
        "responseMimeType": "application/json",
    }
    assert body["safetySettings"][0]["threshold"] == "BLOCK_NONE"


def _turn(*parts: Part) -> list[Message]:
    return [Message.user("q"), Message("assistant", list(parts))]


def test_signatures_go_back_only_to_the_same_provider_and_model() -> None:
    parts = (
        TextPart("t", signature="S-text", origin=GEMINI),
        ToolUsePart("c1", "f", {"a": 1}, signature="S-call", origin=GEMINI),
    )
    same = _body(_turn(*parts))["contents"][1]["parts"]
    assert same == [
        {"text": "t", "thoughtSignature": "S-text"},
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "S-call"},
    ]
    for model in ("gemini-2.5-pro", "gemini-2.0-flash"):
        other = _body(_turn(*parts), model=model)["contents"][1]["parts"]
        assert all("thoughtSignature" not in p for p in other)


def test_foreign_signatures_are_dropped_and_thinking_is_not_sent_as_text() -> None:
    anthropic = Origin("anthropic", "claude-sonnet-4-5")
    parts = (
        ThinkingPart("I should call f", signature="anthropic-sig", origin=anthropic),
        ThinkingPart("a Gemini thought summary", origin=None),
        TextPart("Calling f.", signature="x", origin=anthropic),
        ToolUsePart("toolu_1", "f", {}, signature="y", origin=anthropic),
    )
    sent = _body(_turn(*parts))["contents"][1]["parts"]
    assert sent == [{"text": "Calling f."}, {"functionCall": {"name": "f", "args": {}}}]


def test_a_signed_gemini_thought_goes_back_as_a_thought_part() -> None:
    parts = (ThinkingPart("hmm", signature="S", origin=GEMINI), TextPart("answer"))
    sent = _body(_turn(*parts))["contents"][1]["parts"]
    assert sent == [{"text": "hmm", "thought": True, "thoughtSignature": "S"}, {"text": "answer"}]


def test_a_turn_of_thinking_only_from_elsewhere_leaves_no_empty_content() -> None:
    messages = [
        Message.user("q"),
        Message("assistant", [ThinkingPart("x", signature="s", origin=Origin("anthropic", "c"))]),
        Message.user("again"),
    ]
    assert _body(messages)["contents"] == [
        {"role": "user", "parts": [{"text": "q"}, {"text": "again"}]}
    ]


def test_gemini_3_gets_the_placeholder_on_the_first_unsigned_call_of_each_step() -> None:
    foreign = Origin("openai_responses", "gpt-5")
    messages = [
        Message.user("q"),
        Message(
            "assistant",
            [TextPart("Two calls."), ToolUsePart("a", "f", {}), ToolUsePart("b", "f", {})],
        ),
        Message("user", [ToolResultPart("a", "1"), ToolResultPart("b", "2")]),
        Message(
            "assistant",
            [
                ToolUsePart(
                    "c", "g", {}, signature="real", origin=Origin("gemini", "gemini-3-pro-preview")
                )
            ],
        ),
        Message("user", [ToolResultPart("c", "3")]),
        Message("assistant", [ToolUsePart("d", "h", {}, item_id="fc_1", origin=foreign)]),
    ]
    contents = build_body(Request(messages), "gemini-3-pro-preview")["contents"]
    signatures = [
        [p.get("thoughtSignature") for p in c["parts"]] for c in contents if c["role"] == "model"
    ]
    assert signatures == [[None, SKIP_SIGNATURE, None], ["real"], [SKIP_SIGNATURE]]
    older = build_body(Request(messages), "gemini-2.5-flash")["contents"]
    assert all("thoughtSignature" not in p for c in older for p in c["parts"])


def test_tool_results_carry_the_name_output_or_error() -> None:
    messages = [
        Message.user("q"),
        Message("assistant", [ToolUsePart("id-1", "lookup", {"q": "x"})]),
        Message(
            "user",
            [
                ToolResultPart("id-1", "found"),
                ToolResultPart("id-2", "no such tool", is_error=True, name="other"),
            ],
        ),
    ]
    assert _body(messages)["contents"][2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"output": "found"}}},
        {"functionResponse": {"name": "other", "response": {"error": "no such tool"}}},
    ]


def test_a_result_with_no_name_and_no_call_is_rejected_clearly() -> None:
    messages = [Message.user("q"), Message("user", [ToolResultPart("ghost", "x")])]
    with pytest.raises(InvalidMessagesError, match="'ghost'"):
        _body(messages)


@pytest.mark.parametrize(
    "message",
    [
        Message("user", [TextPart("q"), ToolUsePart("c", "get", {})]),
        Message("assistant", [ToolUsePart("c", "get", {}), ToolResultPart("c", "r", name="get")]),
    ],
    ids=["call-in-user", "result-in-assistant"],
)
def test_parts_in_the_wrong_role_are_refused(message: Message) -> None:
    # A functionCall in a user turn or a functionResponse in a model turn is rejected by
    # Gemini; the builder sent it. Chat and Responses refuse it the same way.
    with pytest.raises(InvalidMessagesError, match="belong"):
        _body([Message.user("q"), message])
