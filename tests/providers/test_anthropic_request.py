"""Request building of `AnthropicClient`: recorded multi-turn bodies rebuilt from the neutral
history, and every rule the Messages API enforces on a history."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from test_anthropic_support import (
    API,
    assemble,
    client_for,
    collect,
    recorded_response,
    text_stream,
)

from llm_worker.errors import ConfigurationError
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
    messages_from_json,
    messages_to_json,
)
from llm_worker.providers import AnthropicClient, from_string
from llm_worker.testing import WireResponse, WireServer
from support.recorded import load

MODEL = "claude-test"
MINE = Origin("anthropic", MODEL)


def body(request: Request, **options: Any) -> dict[str, Any]:
    return AnthropicClient(model=MODEL, api_key="k", **options).build_body(request)


# --- recorded multi-turn requests, rebuilt ------------------------------------------------

# step2 recording -> (client options, fields compared). Fields not compared are named so.
MULTI_TURN: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "parallel_tools_run_step2": ({}, ()),
    "text_then_parallel_tools_run_step2": ({"prompt_cache": ("system", "tools", "messages")}, ()),
    "thinking_tool_run_step2": ({}, ()),
    "prompt_cache_run_step2_read": ({"prompt_cache": ("messages",)}, ()),
    # Its tools are a beta server tool with deferred loading, outside the neutral ToolSpec.
    "tool_search_run_step2": ({}, ("tools",)),
}


def _neutral_tool_result(block: dict[str, Any]) -> ToolResultPart:
    content = block.get("content", "")
    if isinstance(content, list):
        content = "".join(c["text"] for c in content)
    return ToolResultPart(block["tool_use_id"], content, is_error=bool(block.get("is_error")))


def _neutral_user(message: dict[str, Any]) -> Message:
    content = message["content"]
    if isinstance(content, str):
        return Message("user", [TextPart(content)])
    parts: list[Part] = []
    for block in content:
        if block["type"] == "text":
            parts.append(TextPart(block["text"]))
        else:
            parts.append(_neutral_tool_result(block))
    return Message("user", parts)


async def _parsed_answer(step: str, model: str) -> Message:
    """The assistant message as `AnthropicClient` parsed the recorded answer of `step`."""
    async with WireServer([recorded_response(step)]) as server:
        client = client_for(server, model=model)
        events, error = await collect(client, Request([Message.user("x")]))
        await client.aclose()
    assert error is None
    return assemble(events, Origin("anthropic", model))


async def _history(name: str, recorded: dict[str, Any]) -> list[Message]:
    history: list[Message] = []
    for message in recorded["messages"]:
        if message["role"] == "user":
            history.append(_neutral_user(message))
        else:
            previous = name.replace("_step2", "_step1").replace("_read", "_creation")
            history.append(await _parsed_answer(previous, recorded["model"]))
    return history


def _neutral_request(recorded: dict[str, Any], history: list[Message]) -> Request:
    system = recorded.get("system")
    if isinstance(system, list):
        system = "".join(b["text"] for b in system)
    thinking = recorded.get("thinking")
    return Request(
        history,
        system=system,
        tools=[
            ToolSpec(t["name"], t.get("description", ""), t["input_schema"])
            for t in recorded.get("tools", [])
            if "input_schema" in t
        ],
        tool_choice=recorded.get("tool_choice", {}).get("type"),
        max_tokens=recorded["max_tokens"],
        temperature=recorded.get("temperature"),
        thinking=ThinkingConfig(budget_tokens=thinking["budget_tokens"]) if thinking else None,
    )


def _normal(value: Any) -> Any:
    """Equal meaning, equal form: `null` fields dropped, a string content as one text block,
    a tool result's text blocks as a string, `is_error: false` dropped."""
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _normal(v) for k, v in value.items() if v is not None}
    if out.get("type") == "tool_result":
        if isinstance(out.get("content"), list):
            out["content"] = "".join(c["text"] for c in out["content"])
        if out.get("is_error") is False:
            del out["is_error"]
    if "role" in out and isinstance(out.get("content"), str):
        out["content"] = [{"type": "text", "text": out["content"]}]
    if isinstance(out.get("system"), str):
        out["system"] = [{"type": "text", "text": out["system"]}]
    return out


def _recorded_for_comparison(recorded: dict[str, Any]) -> dict[str, Any]:
    recorded = copy.deepcopy(recorded)
    for message in recorded["messages"]:
        if message["role"] != "assistant":
            continue
        # Not in the answer it stands for: llm-anthropic puts a " " text block before the
        # tool calls of an answer that had no text; everything else must match, server-tool
        # blocks (kept as ProviderParts) included.
        message["content"] = [
            b for b in message["content"] if not (b["type"] == "text" and not b["text"].strip())
        ]
    return recorded


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(MULTI_TURN))
async def test_recorded_multi_turn_request_is_rebuilt_from_the_neutral_history(name: str) -> None:
    options, skipped = MULTI_TURN[name]
    recorded = load(API, name)["request"]["body"]
    history = await _history(name, recorded)
    request = _neutral_request(recorded, history)
    client = AnthropicClient(model=recorded["model"], api_key="k", **options)
    built = _normal(client.build_body(request))
    want = _normal(_recorded_for_comparison(recorded))
    for key in skipped:
        built.pop(key, None)
        want.pop(key, None)
    assert built == want


@pytest.mark.anyio
async def test_thinking_signature_of_step1_goes_back_verbatim() -> None:
    recorded = load(API, "thinking_tool_run_step2")["request"]["body"]
    history = await _history("thinking_tool_run_step2", recorded)
    sent = AnthropicClient(model=recorded["model"], api_key="k").build_body(
        _neutral_request(recorded, history)
    )
    thinking = sent["messages"][1]["content"][0]
    assert thinking == recorded["messages"][1]["content"][0]
    assert thinking["type"] == "thinking"
    assert len(thinking["signature"]) > 100
    # The same after a trip through JSON (a paused run, a saved session).
    again = AnthropicClient(model=recorded["model"], api_key="k").build_body(
        _neutral_request(recorded, messages_from_json(messages_to_json(history)))
    )
    assert again == sent


@pytest.mark.anyio
async def test_redacted_thinking_goes_back_untouched() -> None:
    answer = await _parsed_answer("redacted_thinking", MODEL)
    sent = body(Request([Message.user("q"), answer, Message.user("and?")]))
    blocks = sent["messages"][1]["content"]
    recorded = load(API, "redacted_thinking")["response"]["body"]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "redacted_thinking", "text"]
    assert all(b["data"] in recorded for b in blocks[:2])


@pytest.mark.parametrize(
    ("name", "request_kw", "options"),
    [
        ("stop_sequence_with_prefill", {"stop_sequences": ["```"], "temperature": 1.0}, {}),
        (
            "adaptive_thinking",
            {"temperature": 1.0, "options": {"thinking": {"type": "adaptive"}}},
            {},
        ),
        ("max_tokens_truncated", {"max_tokens": 50}, {}),
    ],
)
def test_recorded_single_turn_requests_are_rebuilt(
    name: str, request_kw: dict[str, Any], options: dict[str, Any]
) -> None:
    recorded = load(API, name)["request"]["body"]
    history = [
        _neutral_user(m) if m["role"] == "user" else Message.assistant(m["content"][0]["text"])
        for m in recorded["messages"]
    ]
    request_kw.setdefault("max_tokens", recorded["max_tokens"])
    client = AnthropicClient(model=recorded["model"], api_key="k", **options)
    assert _normal(client.build_body(Request(history, **request_kw))) == _normal(recorded)


# --- the rules of a history ---------------------------------------------------------------


def test_consecutive_tool_results_travel_in_one_user_message_results_first() -> None:
    request = Request(
        [
            Message.user("go"),
            Message("assistant", [ToolUsePart("a", "f", {}), ToolUsePart("b", "f", {"x": 1})]),
            Message("user", [ToolResultPart("a", "1")]),
            Message("user", [TextPart("also this"), ToolResultPart("b", "boom", is_error=True)]),
        ]
    )
    messages = body(request)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "1"},
        {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
        {"type": "text", "text": "also this"},
    ]
    assert messages[1]["content"][1] == {
        "type": "tool_use",
        "id": "b",
        "name": "f",
        "input": {"x": 1},
    }


def test_parts_are_routed_to_the_role_the_api_wants() -> None:
    # A tool result filed in an assistant message still travels in a user message.
    request = Request(
        [
            Message.user("go"),
            Message("assistant", [ToolUsePart("a", "f", {}), ToolResultPart("a", "done")]),
        ]
    )
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in body(request)["messages"]] == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
    ]


def test_empty_text_and_emptied_messages_are_dropped_and_neighbours_merged() -> None:
    request = Request(
        [
            Message.user("one"),
            Message("assistant", [TextPart("")]),
            Message.user("two"),
            Message("user", [TextPart(""), ToolResultPart("x", "")]),
        ]
    )
    assert body(request)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "x"},
                {"type": "text", "text": "one"},
                {"type": "text", "text": "two"},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("part", "sent"),
    [
        (
            ThinkingPart("t", signature="sig", origin=MINE),
            {"type": "thinking", "thinking": "t", "signature": "sig"},
        ),
        (
            ThinkingPart("", redacted="opaque", origin=MINE),
            {"type": "redacted_thinking", "data": "opaque"},
        ),
        (ThinkingPart("t", signature="sig", origin=Origin("anthropic", "other-model")), None),
        (ThinkingPart("t", signature="sig", origin=Origin("gemini", MODEL)), None),
        (ThinkingPart("t", signature="sig"), None),
        (ThinkingPart("t", origin=MINE), None),
    ],
    ids=["same-model", "redacted", "other-model", "other-provider", "no-origin", "unsigned"],
)
def test_thinking_goes_back_only_to_the_model_that_signed_it(
    part: ThinkingPart, sent: dict[str, Any] | None
) -> None:
    request = Request([Message.user("q"), Message("assistant", [part, TextPart("answer")])])
    content = body(request)["messages"][1]["content"]
    assert content[:-1] == ([sent] if sent else [])
    assert content[-1] == {"type": "text", "text": "answer"}


def test_text_signatures_of_other_providers_are_not_sent() -> None:
    part = TextPart("hi", signature="gemini-sig", origin=Origin("gemini", "g"))
    assert body(Request([Message("user", [part])]))["messages"][0]["content"] == [
        {"type": "text", "text": "hi"}
    ]


def test_scalar_fields_tools_and_tool_choice() -> None:
    spec = ToolSpec("get", "Get it.", {"type": "object", "properties": {}}, strict=True)
    sent = body(
        Request(
            [Message.user("q")],
            system="Be brief.",
            tools=[spec],
            tool_choice=SpecificTool("get"),
            temperature=0.2,
            stop_sequences=["END"],
        )
    )
    assert sent == {
        "model": MODEL,
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}],
        "stream": True,
        "system": "Be brief.",
        "tools": [
            {
                "name": "get",
                "description": "Get it.",
                "input_schema": {"type": "object", "properties": {}},
                "strict": True,  # Anthropic's strict tool use (inputs sampled to the schema)
            }
        ],
        "tool_choice": {"type": "tool", "name": "get"},
        "temperature": 0.2,
        "stop_sequences": ["END"],
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
def test_tool_choice_names(choice: Any, sent: dict[str, str]) -> None:
    spec = ToolSpec("get", "Get it.", {"type": "object", "properties": {}})
    sent_body = body(Request([Message.user("q")], tools=[spec], tool_choice=choice))
    assert sent_body["tool_choice"] == sent


@pytest.mark.parametrize(
    ("config", "max_tokens", "thinking", "output_config"),
    [
        (
            ThinkingConfig(budget_tokens=2048),
            None,
            {"type": "enabled", "budget_tokens": 2048, "display": "summarized"},
            None,
        ),
        (
            ThinkingConfig(budget_tokens=20000, include_thoughts=False),
            None,
            {"type": "enabled", "budget_tokens": 20000, "display": "omitted"},
            None,
        ),
        (
            ThinkingConfig(effort="minimal"),
            None,
            {"type": "adaptive", "display": "summarized"},
            {"effort": "low"},
        ),
        (
            ThinkingConfig(effort="high", budget_tokens=1024),
            3000,
            {"type": "enabled", "budget_tokens": 1024, "display": "summarized"},
            {"effort": "high"},
        ),
        (
            ThinkingConfig(),
            None,
            {"type": "enabled", "budget_tokens": 4096, "display": "summarized"},
            None,
        ),
    ],
)
def test_thinking_settings(
    config: ThinkingConfig,
    max_tokens: int | None,
    thinking: dict[str, Any],
    output_config: dict[str, str] | None,
) -> None:
    sent = body(Request([Message.user("q")], thinking=config, max_tokens=max_tokens))
    assert sent["thinking"] == thinking
    assert sent.get("output_config") == output_config
    assert sent["max_tokens"] > thinking["budget_tokens"] if "budget_tokens" in thinking else True
    if max_tokens is not None:
        assert sent["max_tokens"] == max_tokens
    elif config.budget_tokens == 20000:
        assert sent["max_tokens"] == 20000 + 8192


def _tool_loop(first: list[Part]) -> list[Message]:
    return [
        Message.user("go"),
        Message("assistant", [*first, ToolUsePart("a", "f", {})]),
        Message("user", [ToolResultPart("a", "1")]),
        Message("assistant", [ToolUsePart("b", "f", {})]),
        Message("user", [ToolResultPart("b", "2")]),
    ]


def test_thinking_is_left_off_when_the_pending_tool_loop_has_none_to_send_back() -> None:
    config = ThinkingConfig(budget_tokens=1024)
    signed = ThinkingPart("t", signature="s", origin=MINE)
    foreign = ThinkingPart("t", signature="s", origin=Origin("gemini", "g"))
    assert "thinking" in body(Request(_tool_loop([signed]), thinking=config))
    assert "thinking" not in body(Request(_tool_loop([foreign]), thinking=config))
    assert "thinking" not in body(Request(_tool_loop([TextPart("hm")]), thinking=config))
    # Text sent with the results still continues the loop (they share the user message) ...
    merged = [*_tool_loop([foreign]), Message.user("and hurry")]
    assert "thinking" not in body(Request(merged, thinking=config))
    # ... a finished answer and a new prompt end it: thinking may start afresh.
    fresh = [*_tool_loop([foreign]), Message.assistant("Done."), Message.user("next question")]
    assert "thinking" in body(Request(fresh, thinking=config))


def test_options_are_deep_merged_last() -> None:
    sent = body(
        Request(
            [Message.user("q")],
            thinking=ThinkingConfig(budget_tokens=2048),
            options={"thinking": {"display": "omitted"}, "metadata": {"user_id": "u"}},
        )
    )
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
    assert sent["metadata"] == {"user_id": "u"}
    sent = body(Request([Message.user("q")], options={"top_k": 5, "max_tokens": 99}))
    assert (sent["top_k"], sent["max_tokens"]) == (5, 99)


def test_prompt_cache_breakpoints() -> None:
    request = Request(
        [
            Message.user("q"),
            Message(
                "assistant",
                [TextPart("a"), ThinkingPart("t", signature="s", origin=MINE)],
            ),
        ],
        system="sys",
        tools=[ToolSpec("a", "", {"type": "object"}), ToolSpec("b", "", {"type": "object"})],
    )
    sent = body(request, prompt_cache=("system", "tools", "messages"), prompt_cache_ttl="1h")
    marker = {"type": "ephemeral", "ttl": "1h"}
    assert sent["system"] == [{"type": "text", "text": "sys", "cache_control": marker}]
    assert "cache_control" not in sent["tools"][0]
    assert sent["tools"][1]["cache_control"] == marker
    last = sent["messages"][-1]["content"]
    assert last[0] == {"type": "text", "text": "a", "cache_control": marker}
    assert "cache_control" not in last[1]  # a thinking block cannot carry one


def test_unknown_cache_breakpoint_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="prompt-cache"):
        AnthropicClient(model=MODEL, api_key="k", prompt_cache=("everything",))  # type: ignore[arg-type]


# --- the HTTP request itself --------------------------------------------------------------


@pytest.mark.anyio
async def test_headers_path_and_the_body_sent() -> None:
    async with WireServer([WireResponse(text_stream("ok"))]) as server:
        client = AnthropicClient(
            model=MODEL,
            api_key="sk-ant-secret",
            base_url=server.base_url,
            betas=["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"],
            headers={"x-custom": "1"},
        )
        request = Request([Message.user("hello")], system="s")
        events, error = await collect(client, request)
        await client.aclose()
    assert error is None
    assert events
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-ant-secret"
    assert "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14,context-1m-2025-08-07"
    assert sent.headers["x-custom"] == "1"
    assert sent.json() == client.build_body(request)
    assert "sk-ant-secret" not in repr(client)


def test_key_from_the_environment_and_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    client = from_string("anthropic:claude-sonnet-4-5")
    assert isinstance(client, AnthropicClient)
    assert client.model == "claude-sonnet-4-5"
    assert client.transport.base_url == "https://api.anthropic.com"
    assert client.auth_headers("sk-ant-env") == {"x-api-key": "sk-ant-env"}
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicClient(model=MODEL)


@pytest.mark.parametrize("choice", ["auto", "required", "none", SpecificTool("get")])
def test_no_tool_choice_without_tools(choice: Any) -> None:
    # Anthropic answers HTTP 400 to a tool_choice sent without tools; the other clients
    # already leave it out. Tools given through options (server tools) keep it.
    assert "tool_choice" not in body(Request([Message.user("q")], tool_choice=choice))
    server_tools = {"tools": [{"type": "web_search_20250305", "name": "web_search"}]}
    with_options = body(Request([Message.user("q")], tool_choice=choice, options=server_tools))
    assert "tool_choice" in with_options


def test_call_ids_of_other_providers_are_made_valid_for_anthropic() -> None:
    # Anthropic wants tool_use ids matching ^[a-zA-Z0-9_-]+$ (HTTP 400 otherwise); Kimi K2
    # behind an OpenAI-compatible server names calls `functions.get:0`. Both sides of the
    # pair get the same valid id; ids that are already valid go as they are.
    odd, plain = "functions.get:0", "toolu_01AbC-d"
    messages = [
        Message.user("q"),
        Message("assistant", [ToolUsePart(odd, "get", {}), ToolUsePart(plain, "get", {})]),
        Message("user", [ToolResultPart(odd, "a"), ToolResultPart(plain, "b")]),
    ]
    sent = body(Request(messages, tools=[ToolSpec("get", "Get.", {"type": "object"})]))
    uses = [b["id"] for b in sent["messages"][1]["content"]]
    results = [b["tool_use_id"] for b in sent["messages"][2]["content"]]
    assert uses == results
    assert uses[1] == plain
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", uses[0])
    # Two ids that differ only in a replaced character stay distinct.
    other = body(Request([Message("assistant", [ToolUsePart("functions.get/0", "get", {})])]))
    assert other["messages"][0]["content"][0]["id"] != uses[0]


# --- requests Anthropic rejects with thinking on fail before they are sent -------------------

_SPEC = ToolSpec("get", "Get it.", {"type": "object", "properties": {}})
_THINKING = [ThinkingConfig(budget_tokens=2048), ThinkingConfig(effort="high")]


@pytest.mark.parametrize("config", _THINKING)
@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"temperature": 0.2}, "temperature"),
        ({"options": {"temperature": 0.0}}, "temperature"),
        ({"options": {"top_k": 5}}, "top_k"),
        ({"options": {"top_p": 0.5}}, "top_p"),
        ({"tools": [_SPEC], "tool_choice": "required"}, "tool_choice"),
        ({"tools": [_SPEC], "tool_choice": SpecificTool("get")}, "tool_choice"),
        (
            {
                "options": {
                    "tools": [{"type": "web_search_20250305", "name": "web_search"}],
                    "tool_choice": {"type": "any"},
                }
            },
            "tool_choice",
        ),
    ],
)
def test_sampling_and_forced_tools_are_refused_with_thinking(
    config: ThinkingConfig, fields: dict[str, Any], named: str
) -> None:
    # The API answers HTTP 400 to these with thinking on (extended thinking docs, "Feature
    # compatibility"): the error comes before a round trip and names the field and the fix.
    request = Request([Message.user("q")], thinking=config, **fields)
    with pytest.raises(ConfigurationError, match=named) as caught:
        body(request)
    assert "thinking" in str(caught.value)
    # Without thinking the same request is valid and goes as it is.
    assert named in body(Request([Message.user("q")], **fields))


@pytest.mark.parametrize(
    "fields",
    [
        {"temperature": 1.0},
        {"options": {"top_p": 0.95}},
        {"tools": [_SPEC], "tool_choice": "auto"},
        {"tools": [_SPEC], "tool_choice": "none"},
        # No tools: no tool_choice is sent, nothing is forced.
        {"tool_choice": "required"},
    ],
)
def test_what_the_api_accepts_with_thinking_still_goes(fields: dict[str, Any]) -> None:
    sent = body(Request([Message.user("q")], thinking=ThinkingConfig(budget_tokens=2048), **fields))
    assert sent["thinking"]["type"] == "enabled"


def test_thinking_off_for_a_pending_loop_lets_sampling_and_forced_tools_through() -> None:
    # Thinking left off (nothing to send back for the pending loop) is off: no check applies.
    foreign = ThinkingPart("t", signature="s", origin=Origin("gemini", "g"))
    request = Request(
        _tool_loop([foreign]),
        tools=[ToolSpec("f", "F.", {"type": "object"})],
        tool_choice="required",
        temperature=0.3,
        thinking=ThinkingConfig(budget_tokens=2048),
    )
    sent = body(request)
    assert "thinking" not in sent
    assert (sent["temperature"], sent["tool_choice"]) == (0.3, {"type": "any"})


@pytest.mark.parametrize(
    ("budget", "max_tokens", "message"),
    [
        (1023, None, "budget_tokens=1023 is below the minimum of 1024"),
        (0, None, "budget_tokens=0 is below the minimum of 1024"),
        (4096, 4096, "budget_tokens=4096 must be below max_tokens=4096"),
        (4096, 2000, "budget_tokens=4096 must be below max_tokens=2000"),
    ],
)
def test_thinking_budget_bounds(budget: int, max_tokens: int | None, message: str) -> None:
    request = Request(
        [Message.user("q")], thinking=ThinkingConfig(budget_tokens=budget), max_tokens=max_tokens
    )
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        body(request)


def test_thinking_budget_bounds_apply_to_options_too() -> None:
    over = {"thinking": {"type": "enabled", "budget_tokens": 500}}
    with pytest.raises(ConfigurationError, match="budget_tokens=500"):
        body(Request([Message.user("q")], options=over))
    small_max = {"max_tokens": 1500}
    with pytest.raises(ConfigurationError, match="max_tokens=1500"):
        body(Request([Message.user("q")], thinking=ThinkingConfig(), options=small_max))


def test_valid_budgets_go_as_they_are() -> None:
    assert body(Request([Message.user("q")], thinking=ThinkingConfig(budget_tokens=1024)))
    sent = body(
        Request([Message.user("q")], thinking=ThinkingConfig(budget_tokens=4095), max_tokens=4096)
    )
    assert (sent["thinking"]["budget_tokens"], sent["max_tokens"]) == (4095, 4096)


@pytest.mark.parametrize(
    "client_options",
    [
        {"betas": ["interleaved-thinking-2025-05-14"]},
        {"headers": {"anthropic-beta": "context-1m-2025-08-07,interleaved-thinking-2025-05-14"}},
    ],
)
def test_interleaved_thinking_lets_the_budget_exceed_max_tokens(
    client_options: dict[str, Any],
) -> None:
    # With interleaved thinking the budget covers the whole turn and may exceed max_tokens;
    # the 1024 minimum still holds.
    request = Request(
        [Message.user("q")], thinking=ThinkingConfig(budget_tokens=16000), max_tokens=4096
    )
    sent = body(request, **client_options)
    assert (sent["thinking"]["budget_tokens"], sent["max_tokens"]) == (16000, 4096)
    low = Request([Message.user("q")], thinking=ThinkingConfig(budget_tokens=512))
    with pytest.raises(ConfigurationError, match="1024"):
        body(low, **client_options)
