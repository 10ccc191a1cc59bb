"""Review probes of the Chat Completions depth items: what a hostile or unusual stream gives.

DeepSeek's `reasoning_content` after a JSON round trip and next to other providers' thinking,
a legacy `function_call` next to `tool_calls`, citations before any text, odd log
probabilities, and an audio transcript next to text. Each stream goes through the real client
over HTTP.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_openai_chat_support import answer, check_invariants, replay

from llm_worker.events import BlockDelta, BlockStart, BlockType, CitationDelta, Event, TextDelta
from llm_worker.messages import (
    Message,
    Origin,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.providers import AnthropicClient, GeminiClient, OpenAIChatClient
from llm_worker.testing import WireResponse
from support import streams

pytestmark = pytest.mark.anyio

API = "openai_chat"
KEY = "sk-test-chat-review-0123"
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}


def chunk(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> bytes:
    body = {
        "id": "chatcmpl-review",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def done() -> bytes:
    body = {"id": "chatcmpl-review", "object": "chat.completion.chunk", "choices": []}
    return b"data: " + orjson.dumps({**body, "usage": USAGE}) + b"\n\ndata: [DONE]\n\n"


async def events_of(*chunks: bytes) -> list[Event]:
    events, error, _ = await replay(WireResponse(b"".join(chunks) + done()))
    assert error is None, repr(error)
    check_invariants(events, error)
    return events


# -- reasoning_content ----------------------------------------------------------------------


def deepseek_history() -> list[Message]:
    """A tool loop of deepseek-reasoner whose history went through JSON, among other providers'
    thinking (a signed Anthropic block, a signed Gemini thought)."""
    own = Origin(API, "deepseek-reasoner")
    said = Message(
        "assistant",
        [
            ThinkingPart("Claude thinks.", signature="sig-a", origin=Origin("anthropic", "c")),
            ThinkingPart("Gemini thinks.", signature="sig-g", origin=Origin("gemini", "g")),
            ThinkingPart("DeepSeek thinks.", origin=own),
            TextPart("Checking."),
            ToolUsePart("call_1", "get", {"city": "Oslo"}),
        ],
    )
    history = [Message.user("Weather?"), said, Message("user", [ToolResultPart("call_1", "ok")])]
    return [Message.from_json(m.to_json()) for m in history]


def test_reasoning_content_survives_json_and_goes_only_to_its_model() -> None:
    history = deepseek_history()
    request = Request(history)
    body = OpenAIChatClient(model="deepseek-reasoner", api_key=KEY).build_body(request)
    assert body["messages"][1]["reasoning_content"] == "DeepSeek thinks."
    # Another provider never reads DeepSeek's reasoning, as text or otherwise.
    anthropic = AnthropicClient(model="c", api_key=KEY).build_body(request)
    gemini = GeminiClient(model="g", api_key=KEY).build_body(request)
    assert "DeepSeek thinks." not in orjson.dumps(anthropic).decode()
    assert "DeepSeek thinks." not in orjson.dumps(gemini).decode()
    assert "Claude thinks." in orjson.dumps(anthropic).decode()


# -- legacy function_call -------------------------------------------------------------------


async def test_a_call_repeated_in_function_call_and_tool_calls_is_one_call() -> None:
    # A compatible server that fills both the legacy and the current field with the same call:
    # the arguments must not be joined twice into one broken call.
    call = {"name": "get", "arguments": '{"city":"Oslo"}'}
    events = await events_of(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": call}],
                "function_call": call,
            }
        ),
        chunk({}, "tool_calls"),
    )
    assert [(c.id, c.name, c.input) for c in answer(events).calls] == [
        ("call_1", "get", {"city": "Oslo"})
    ]


# -- citations ------------------------------------------------------------------------------


async def test_a_citation_before_any_text_is_on_the_text_block() -> None:
    annotation = {
        "type": "url_citation",
        "url_citation": {"url": "https://a.example", "start_index": 0, "end_index": 2},
    }
    events = await events_of(
        chunk({"role": "assistant", "annotations": [annotation, "junk", {"type": "weird"}]}),
        chunk({"content": "Hi there"}),
        chunk({}, "stop"),
    )
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.block_type for s in starts] == [BlockType.TEXT]
    said = streams.assemble(events, Origin(API, "gpt-4o"))
    (text,) = said.content
    assert isinstance(text, TextPart) and text.text == "Hi there"
    assert [c.url for c in text.citations] == ["https://a.example", None, None]
    assert sum(isinstance(e, BlockDelta) and isinstance(e.delta, CitationDelta) for e in events)


# -- log probabilities ----------------------------------------------------------------------


async def test_odd_logprobs_are_passed_over_not_fatal() -> None:
    odd = {
        "content": [
            {"token": "H", "logprob": None},
            {"token": 5, "logprob": -1.0},
            {"logprob": -1.0},
            {"token": "i", "logprob": True},
            "junk",
            {"token": "!", "logprob": -2, "top_logprobs": [{"token": "?"}, None, {"token": "!"}]},
        ]
    }
    events = await events_of(
        chunk({"content": "Hi"}, logprobs=odd),
        chunk({"content": "!"}, logprobs="not an object"),
        chunk({"content": "?"}, logprobs={"content": None}),
        chunk({}, "stop"),
    )
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Hi", "!", "?"]
    first = deltas[0]
    assert isinstance(first, TextDelta) and first.logprobs is not None
    assert [(t.token, t.logprob, t.top) for t in first.logprobs] == [("!", -2.0, [])]
    assert all(isinstance(d, TextDelta) and d.logprobs is None for d in deltas[1:])


# -- audio ----------------------------------------------------------------------------------


async def test_an_audio_transcript_and_text_keep_their_order() -> None:
    events = await events_of(
        chunk({"role": "assistant", "content": "Text, ", "audio": {"transcript": "then audio"}}),
        chunk({"audio": {"id": "audio_1", "data": "UklGRg=="}}),
        chunk({"audio": "not an object", "content": "."}),
        chunk({}, "stop"),
    )
    assert answer(events).text == "Text, then audio."
