"""The Chat stream mapping on shapes the recordings lack, and the request body in detail.

Streams are built chunk by chunk here (in the recorded chunk shape) and served over HTTP by a
`WireServer`; the tool-call cases spell out the event sequence, since serializing interleaved
indexes into one open block at a time is the subtle part of this client.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from test_openai_chat_support import Call, answer, check_invariants, replay

from llm_worker.errors import ConfigurationError, InvalidMessagesError, MalformedStreamError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    Event,
    InputJsonDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import (
    Message,
    Request,
    SpecificTool,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers import OpenAIChatClient
from llm_worker.testing import Chunking, WireResponse

pytestmark = pytest.mark.anyio


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    body = {"object": "chat.completion.chunk", "choices": [choice], **extra}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def fragment(index: int | None, args: str = "", **first: Any) -> dict[str, Any]:
    """One `tool_calls` entry: `first` may hold `id` and `name` (the first fragment)."""
    call: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        call["index"] = index
    if "id" in first:
        call["id"] = first["id"]
        call["type"] = "function"
    if "name" in first:
        call["function"]["name"] = first["name"]
    return call


def calls(*fragments: dict[str, Any]) -> bytes:
    return chunk({"tool_calls": list(fragments)})


END = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}\n\ndata: [DONE]\n\n'


async def stream(*parts: bytes, finish: str | None = "tool_calls") -> list[Event]:
    body = b"".join(parts) + (chunk(finish=finish) if finish else b"") + END
    for chunking in (Chunking.whole(), Chunking.random(3, max_size=16)):
        events, error, _ = await replay(WireResponse(body, chunking=chunking))
        assert error is None, repr(error)
        check_invariants(events, error)
    return events


def block_events(events: list[Event]) -> list[tuple[str, int, str]]:
    """`(kind, index, detail)` of the block events, for comparing sequences."""
    out: list[tuple[str, int, str]] = []
    for event in events:
        if isinstance(event, BlockStart):
            meta = event.metadata
            name = f"{meta.id}/{meta.name}" if isinstance(meta, ToolUseMetadata) else ""
            out.append(("start", event.index, f"{event.block_type.value}:{name}"))
        elif isinstance(event, BlockDelta):
            delta = event.delta
            if isinstance(delta, InputJsonDelta):
                out.append(("json", event.index, delta.partial_json))
            elif isinstance(delta, TextDelta | ThinkingDelta):
                out.append(("text", event.index, delta.text))
        elif isinstance(event, BlockStop):
            out.append(("stop", event.index, str(event.stop_reason)))
    return out


# --- tool calls -----------------------------------------------------------------------------


async def test_sequential_calls_stop_as_soon_as_complete() -> None:
    events = await stream(
        calls(fragment(0, "", id="call_a", name="f")),
        calls(fragment(0, '{"x":')),
        calls(fragment(0, "1}")),
        calls(fragment(1, "", id="call_b", name="g")),
        calls(fragment(1, '{"y"')),
        calls(fragment(1, ":2}")),
    )
    assert block_events(events) == [
        ("start", 0, "tool_use:call_a/f"),
        ("json", 0, '{"x":'),
        ("json", 0, "1}"),
        ("stop", 0, "None"),  # closed when index 1 arrived: its JSON was complete
        ("start", 1, "tool_use:call_b/g"),
        ("json", 1, '{"y"'),  # index 1 streams live
        ("json", 1, ":2}"),
        ("stop", 1, "tool_use"),
    ]


async def test_interleaved_calls_are_serialized_without_losing_a_byte() -> None:
    events = await stream(
        calls(fragment(0, "", id="call_a", name="f")),
        calls(fragment(0, '{"city": "Par')),
        calls(fragment(1, "", id="call_b", name="g")),  # index 1 before index 0 is finished
        calls(fragment(1, '{"n": ')),
        calls(fragment(0, 'is"')),
        calls(fragment(1, "42")),
        calls(fragment(0, "}"), fragment(1, "}")),  # two indexes in one chunk
    )
    assert block_events(events) == [
        ("start", 0, "tool_use:call_a/f"),
        ("json", 0, '{"city": "Par'),
        ("json", 0, 'is"'),
        ("json", 0, "}"),
        ("stop", 0, "None"),
        ("start", 1, "tool_use:call_b/g"),
        ("json", 1, '{"n": 42}'),  # buffered: emitted whole, in one delta
        ("stop", 1, "tool_use"),
    ]
    assert answer(events).calls == [
        Call("call_a", "f", {"city": "Paris"}),
        Call("call_b", "g", {"n": 42}),
    ]


async def test_three_calls_in_one_chunk_and_buffered_ones_in_index_order() -> None:
    events = await stream(
        calls(
            fragment(2, '{"c": 3}', id="call_c", name="h"),
            fragment(0, '{"a": 1', id="call_a", name="f"),
            fragment(1, '{"b": 2}', id="call_b", name="g"),
        ),
        calls(fragment(0, "}")),
    )
    # Index 2 came first and streams live; it is complete, so the lowest buffered index opens
    # next, then the last one once index 0 is complete.
    assert [(c.id, c.input) for c in answer(events).calls] == [
        ("call_c", {"c": 3}),
        ("call_a", {"a": 1}),
        ("call_b", {"b": 2}),
    ]


async def test_incomplete_live_call_keeps_others_buffered_until_the_end() -> None:
    events = await stream(
        calls(fragment(0, '{"q": "', id="call_a", name="search")),
        calls(fragment(1, '{"q": "y"}', id="call_b", name="search")),
        calls(fragment(0, 'x"}')),
    )
    assert block_events(events)[-4:] == [
        ("stop", 0, "None"),
        ("start", 1, "tool_use:call_b/search"),
        ("json", 1, '{"q": "y"}'),
        ("stop", 1, "tool_use"),
    ]


async def test_empty_arguments_and_arguments_as_an_object() -> None:
    events = await stream(
        calls(fragment(0, "", id="call_a", name="now")),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_b", "function": {"name": "f", "arguments": {"k": [1]}}}
                ]
            }
        ),
    )
    assert answer(events).calls == [Call("call_a", "now", {}), Call("call_b", "f", {"k": [1]})]


async def test_calls_without_index_are_told_apart_by_id() -> None:
    # Gemini's OpenAI-compatible endpoint sends whole calls without `index`.
    events = await stream(
        calls(fragment(None, '{"a": 1}', id="c1", name="f")),
        calls(fragment(None, '{"b": 2}', id="c2", name="g")),
    )
    assert answer(events).calls == [Call("c1", "f", {"a": 1}), Call("c2", "g", {"b": 2})]


async def test_a_call_without_id_gets_one() -> None:
    events = await stream(
        calls(fragment(0, '{"a": 1}', name="f")), calls(fragment(1, "{}", name="f"))
    )
    ids = [c.id for c in answer(events).calls]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


async def test_a_name_arriving_late_holds_the_call_back() -> None:
    events = await stream(
        calls(fragment(0, '{"a": 1}', id="c1", name="f")),
        calls(fragment(1, '{"b":', id="c2")),  # no name yet: cannot start a block
        calls({"index": 1, "function": {"name": "g", "arguments": " 2}"}}),
    )
    assert answer(events).calls == [Call("c1", "f", {"a": 1}), Call("c2", "g", {"b": 2})]


async def test_text_before_and_after_calls() -> None:
    events = await stream(
        chunk({"content": "Let me check."}),
        calls(fragment(0, '{"a": 1}', id="c1", name="f")),
        chunk({"content": " Done."}),
    )
    kinds = [e for e in block_events(events) if e[0] in ("start", "stop")]
    assert kinds == [
        ("start", 0, "text:"),
        ("stop", 0, "None"),
        ("start", 1, "tool_use:c1/f"),
        ("stop", 1, "None"),
        ("start", 2, "text:"),
        ("stop", 2, "tool_use"),
    ]


async def test_more_arguments_after_a_closed_call_are_malformed() -> None:
    body = (
        calls(fragment(0, '{"a": 1}', id="c1", name="f"))
        + calls(fragment(1, "{}", id="c2", name="g"))
        + calls(fragment(0, ' , "b": 2}'))
    )
    events, error, _ = await replay(WireResponse(body + chunk(finish="tool_calls") + END))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)


async def test_whitespace_after_a_closed_call_is_harmless() -> None:
    events = await stream(
        calls(fragment(0, '{"a": 1}', id="c1", name="f")),
        calls(fragment(1, "{}", id="c2", name="g")),
        calls(fragment(0, " \n")),
    )
    assert len(answer(events).calls) == 2


# --- text, thinking, refusal, stop reasons, usage --------------------------------------------


async def test_reasoning_fields_then_text() -> None:
    events = await stream(
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"reasoning_content": "Think"}),
        chunk({"reasoning": "ing."}),
        chunk({"content": "", "reasoning": None}),
        chunk({"content": "Answer"}),
        finish="stop",
    )
    assert [e[:2] for e in block_events(events) if e[0] != "text"] == [
        ("start", 0),
        ("stop", 0),
        ("start", 1),
        ("stop", 1),
    ]
    assert (answer(events).thinking, answer(events).text) == ("Thinking.", "Answer")


async def test_content_as_a_list_of_parts() -> None:
    events = await stream(
        chunk({"content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}),
        chunk({"content": []}),
        finish="stop",
    )
    assert answer(events).text == "Hello"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("tool_calls", StopReason.TOOL_USE),
        ("function_call", StopReason.TOOL_USE),
        ("content_filter", StopReason.CONTENT_FILTER),
        ("eos", StopReason.OTHER),
    ],
)
async def test_finish_reasons(raw: str, reason: StopReason) -> None:
    events = await stream(chunk({"content": "x"}), finish=raw)
    assert (answer(events).stop_reason, answer(events).raw_stop_reason) == (reason, raw)


async def test_vllm_stop_string_is_a_stop_sequence() -> None:
    body = chunk({"content": "1, 2, 3"}) + b'data: {"choices":[{"index":0,"delta":{},'
    body += b'"finish_reason":"stop","stop_reason":"4"}]}\n\n'
    events = await stream(body, finish=None)
    assert answer(events).stop_reason is StopReason.STOP_SEQUENCE
    assert answer(events).raw_stop_reason == "stop"


async def test_refusal_is_text_with_a_refusal_stop() -> None:
    events = await stream(
        chunk({"content": None, "refusal": ""}), chunk({"refusal": "I can't."}), finish="stop"
    )
    assert answer(events).text == "I can't."
    assert answer(events).stop_reason is StopReason.REFUSAL


async def test_other_choices_of_n_are_ignored() -> None:
    other = b'data: {"choices":[{"index":1,"delta":{"content":"B"},"finish_reason":null}]}\n\n'
    events = await stream(chunk({"content": "A"}), other, finish="stop")
    assert answer(events).text == "A"


async def test_usage_details_of_each_provider() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 40,
        "total_tokens": 140,
        "prompt_cache_hit_tokens": 64,  # DeepSeek
        "prompt_tokens_details": {"cache_write_tokens": 12},  # OpenRouter
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    body = chunk({"content": "x"}) + chunk(finish="stop") + chunk(None, usage=usage)
    events, error, _ = await replay(WireResponse(body))  # no [DONE]: finish + usage complete it
    check_invariants(events, error)
    assert answer(events).usage == UsageEvent(100, 40, 140, 64, 12, 30)
    # The usage event comes before the last stop, which carries the stop reason.
    kinds = [type(e).__name__ for e in events]
    assert kinds[-3:] == ["UsageEvent", "BlockStop", "StatusEvent"]


async def test_whole_json_answer_with_tool_calls() -> None:
    completion = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "Two lookups.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "g", "arguments": '{"z": 0}'},
                        },
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    body = json.dumps(completion, indent=2).encode()
    events, error, _ = await replay(WireResponse(body, content_type="application/json"))
    check_invariants(events, error)
    assert answer(events).thinking == "Two lookups."
    assert answer(events).calls == [Call("c1", "f", {}), Call("c2", "g", {"z": 0})]
    assert answer(events).stop_reason is StopReason.TOOL_USE


# --- the request body -------------------------------------------------------------------------


def body(request: Request, model: str = "gpt-4o") -> dict[str, Any]:
    return OpenAIChatClient(model=model, api_key="sk-x").build_body(request)


def test_body_of_a_full_history() -> None:
    history = [
        Message.user("Weather in Paris and Rome?"),
        Message(
            "assistant",
            [
                ThinkingPart("Two cities.", signature="sig"),
                TextPart("Checking."),
                ToolUsePart("c1", "weather", {"city": "Paris"}),
                ToolUsePart("c2", "weather", {"city": "Rome"}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultPart("c1", "sunny"),
                ToolResultPart("c2", "boom", is_error=True),
                TextPart("Also, be brief."),
            ],
        ),
        Message("assistant", [ThinkingPart("only thoughts")]),
    ]
    request = Request(history, system="Be helpful.")
    assert body(request)["messages"] == [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "boom"},
        {"role": "user", "content": "Also, be brief."},
        {"role": "assistant", "content": ""},
    ]


def test_body_settings() -> None:
    tool = ToolSpec("f", "Does f.", {"type": "object", "properties": {}}, strict=True)
    request = Request(
        [Message("user", [TextPart("a"), TextPart("b")])],
        tools=[tool, ToolSpec("g", "", {"type": "object"})],
        tool_choice=SpecificTool("f"),
        max_tokens=99,
        temperature=0.2,
        stop_sequences=["END"],
        thinking=ThinkingConfig(effort="low", budget_tokens=1000),
    )
    assert body(request) == {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "Does f.",
                    "parameters": {"type": "object", "properties": {}},
                    "strict": True,
                },
            },
            {
                "type": "function",
                "function": {"name": "g", "description": "", "parameters": {"type": "object"}},
            },
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "max_completion_tokens": 99,
        "temperature": 0.2,
        "stop": ["END"],
        "reasoning_effort": "low",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_strings(choice: Any) -> None:
    tools = [ToolSpec("f", "", {"type": "object"})]
    assert (
        body(Request([Message.user("x")], tools=tools, tool_choice=choice))["tool_choice"] == choice
    )
    assert "tool_choice" not in body(Request([Message.user("x")], tool_choice=choice))


def test_options_merge_last_and_none_removes() -> None:
    request = Request(
        [Message.user("x")],
        max_tokens=10,
        options={
            "max_tokens": 10,
            "stream_options": {"include_obfuscation": False},
            "response_format": {"type": "json_object"},
            "temperature": None,
        },
        temperature=0.5,
    )
    sent = body(request)
    assert "max_completion_tokens" not in sent and sent["max_tokens"] == 10
    assert sent["stream_options"] == {"include_usage": True, "include_obfuscation": False}
    assert sent["response_format"] == {"type": "json_object"}
    assert "temperature" not in sent
    assert "stream_options" not in body(
        Request([Message.user("x")], options={"stream_options": None})
    )


def test_misplaced_parts_are_rejected() -> None:
    with pytest.raises(InvalidMessagesError, match="tool call"):
        body(Request([Message("user", [ToolUsePart("c", "f", {})])]))
    with pytest.raises(InvalidMessagesError, match="tool result"):
        body(Request([Message("assistant", [ToolResultPart("c", "x")])]))


# --- the client itself ---------------------------------------------------------------------


def test_key_from_environment_and_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123456")
    client = OpenAIChatClient(model="gpt-4o")
    assert client.transport.base_url == "https://api.openai.com/v1"
    assert client.provider == "openai_chat" and client.model == "gpt-4o"
    assert "sk-from-env" not in repr(client)
    assert client.path(Request([])) == "/chat/completions"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIChatClient(model="gpt-4o")
    OpenAIChatClient(model="llama3", base_url="http://127.0.0.1:11434/v1")  # local: no key


async def test_request_goes_to_chat_completions_with_the_key() -> None:
    events, error, server = await replay(
        WireResponse(chunk({"content": "ok"}) + chunk(finish="stop") + END)
    )
    assert error is None and answer(events).text == "ok"
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test-chat-0123456789abcdef"
    assert sent.json()["stream"] is True


def test_from_string_picks_this_client() -> None:
    from llm_worker.providers import from_string

    client = from_string("openai:gpt-4o-mini", api_key="sk-x")
    assert isinstance(client, OpenAIChatClient) and client.model == "gpt-4o-mini"


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": "SEEN"}, "UNSEEN"],
        [{"type": "text", "text": "SEEN"}, ["UNSEEN"]],
        [{"type": "text", "text": "SEEN"}, {"type": "text", "text": 7}],
        [{"type": "text", "text": "SEEN"}, {"type": "text", "text": ["UNSEEN"]}],
        {"type": "text", "text": "UNSEEN"},
        7,
    ],
)
async def test_content_parts_of_the_wrong_shape_are_a_typed_error(content: object) -> None:
    body = chunk({"content": content}) + chunk(finish="stop") + END
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)
    # The message names the field and its JSON type, never the model's content.
    assert "content" in str(error) or "text" in str(error)
    assert "SEEN" not in str(error)
