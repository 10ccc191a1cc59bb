"""What Chat Completions servers send beyond text, calls and reasoning, and what goes back.

DeepSeek's `reasoning_content` sent back to its model, citations (`annotations`), log
probabilities, the response's id, model and tier, the legacy `function_call`, audio
transcripts, audio and prediction token counts, `parallel_tool_calls` and the reasoning
efforts. Recordings where one exists, else chunks in the recorded shape; each stream goes
through the real client over HTTP.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_openai_chat_support import answer, check_invariants, recorded_response, replay

from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockType,
    CitationDelta,
    Event,
    ResponseStatus,
    StatusEvent,
    StopReason,
    TextDelta,
    TokenLogprob,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.messages import (
    Message,
    Origin,
    Request,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers import OpenAIChatClient
from llm_worker.testing import WireResponse
from support import streams
from support.recorded import load

pytestmark = pytest.mark.anyio

API = "openai_chat"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def body_for(request: Request, model: str) -> dict[str, Any]:
    return OpenAIChatClient(model=model, api_key="sk-test-chat-depth-0123").build_body(request)


def chunk(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> bytes:
    body = {
        "id": "chatcmpl-depth",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def usage_chunk(usage: dict[str, Any]) -> bytes:
    body = {"id": "chatcmpl-depth", "object": "chat.completion.chunk", "choices": []}
    return b"data: " + orjson.dumps({**body, "usage": usage}) + b"\n\ndata: [DONE]\n\n"


USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}


async def events_of(*chunks: bytes, usage: dict[str, Any] | None = None) -> list[Event]:
    events, error, _ = await replay(WireResponse(b"".join(chunks) + usage_chunk(usage or USAGE)))
    assert error is None, repr(error)
    check_invariants(events, error)
    return events


def recorded_reasoning(name: str) -> str:
    text = ""
    for line in load(API, name)["response"]["body"].splitlines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            for choice in orjson.loads(line[5:])["choices"]:
                text += choice["delta"].get("reasoning_content") or ""
    return text


# -- reasoning_content goes back ------------------------------------------------------------


async def test_deepseek_reasoning_goes_back_to_the_same_model() -> None:
    # DeepSeek's thinking mode answers HTTP 400 "Missing `reasoning_content` field" to a
    # tool-call message sent back without its reasoning.
    model = "deepseek-reasoner"
    events, error, _ = await replay(recorded_response("deepseek_reasoning_content"), model=model)
    assert error is None
    said = streams.assemble(events, Origin(API, model))
    thinking = said.content[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.origin == Origin(API, model)
    said.content.append(ToolUsePart("call_1", "get", {"city": "Oslo"}))
    history = [Message.user("Hello"), said, Message("user", [ToolResultPart("call_1", "sunny")])]
    sent = body_for(Request(history), model)["messages"][1]
    assert sent["reasoning_content"] == recorded_reasoning("deepseek_reasoning_content")
    assert sent["reasoning_content"].startswith("Hmm")
    # Another model never reads it.
    assert "reasoning_content" not in body_for(Request(history), "deepseek-chat")["messages"][1]


async def test_reasoning_streamed_as_reasoning_is_not_sent_back() -> None:
    # OpenRouter and Groq stream `reasoning`; Groq (and Cerebras) answer HTTP 400 to an
    # assistant message that carries `reasoning_content` or `reasoning`.
    model = "anthropic/claude-sonnet-4.5"
    name = "openrouter_reasoning_details_sse_comments"
    events, error, _ = await replay(recorded_response(name), model=model)
    assert error is None
    said = streams.assemble(events, Origin(API, model))
    assert [p.origin for p in said.content if isinstance(p, ThinkingPart)] == [None]
    sent = body_for(Request([Message.user("q"), said, Message.user("more")]), model)
    assert "reasoning_content" not in sent["messages"][1]


def test_every_own_thinking_part_is_joined_and_others_dropped() -> None:
    own, other = Origin(API, "kimi-k2-thinking"), Origin(API, "other")
    said = Message(
        "assistant",
        [
            ThinkingPart("First, ", origin=own),
            TextPart("Let me look."),
            ThinkingPart("then.", origin=own),
            ThinkingPart("Not mine.", origin=other),
            ThinkingPart("Signed elsewhere.", signature="sig", origin=Origin("anthropic", "c")),
        ],
    )
    sent = body_for(Request([Message.user("q"), said]), "kimi-k2-thinking")["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": "Let me look.",
        "reasoning_content": "First, then.",
    }


# -- the response itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status"),
    [
        (
            "plain_text_with_usage_chunk",
            (
                "chatcmpl-C2P2HtMJhPkWjQ2adKerkdVilXmRL",
                "gpt-4o-2024-08-06",
                "default",
                "fp_07871e2ad8",
            ),
        ),
        # Azure's first chunk (prompt filter results) has empty id and model.
        (
            "azure_content_filter_results",
            ("chatcmpl-9HpbaAXyt0cAnlWvI8kUAFpZt5jyQ", "gpt-35-turbo", None, None),
        ),
        # Snowflake sends empty strings: nothing is known.
        ("snowflake_logprobs", (None, "claude-sonnet-4-6", None, None)),
    ],
)
async def test_the_closing_status_names_the_response(
    name: str, status: tuple[str | None, str | None, str | None, str | None]
) -> None:
    events, error, _ = await replay(recorded_response(name))
    assert error is None
    assert events[-1] == StatusEvent(ResponseStatus.COMPLETED, *status)


# -- citations ------------------------------------------------------------------------------


async def test_annotations_become_citations_of_the_text() -> None:
    name = "openrouter_annotations"
    events, error, _ = await replay(recorded_response(name), model="deepseek/deepseek-chat")
    assert error is None
    cited = [
        e.delta.citation
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, CitationDelta)
    ]
    assert len(cited) == 5
    first = cited[0]
    assert (first.url, first.title) == (
        "https://github.com/pydantic/pydantic-ai",
        "AI Agent Framework, the Pydantic way - GitHub",
    )
    assert first.cited_text is not None and first.cited_text.startswith("# pydantic/pydantic-ai")
    assert first.data["type"] == "url_citation"
    assert cited[1].title is None  # an empty title is no title
    said = streams.assemble(events, Origin(API, "deepseek/deepseek-chat"))
    (text,) = [p for p in said.content if isinstance(p, TextPart)]
    assert text.citations == cited
    assert "github.com/pydantic/pydantic-ai" in text.text
    # Chat has no request field for them.
    sent = body_for(Request([Message.user("q"), said]), "deepseek/deepseek-chat")
    assert set(sent["messages"][1]) == {"role", "content"}


# -- log probabilities ----------------------------------------------------------------------


async def test_logprobs_ride_on_the_text_deltas() -> None:
    top = [{"token": "Hel", "logprob": -0.01, "bytes": [72]}, {"token": "Hi", "logprob": -4.6}]
    logprobs = {
        "content": [{"token": "Hel", "logprob": -0.01, "bytes": [72], "top_logprobs": top}],
        "refusal": None,
    }
    events = await events_of(
        chunk({"role": "assistant", "content": "Hel"}, logprobs=logprobs),
        chunk({"content": "lo"}, logprobs=None),
        chunk({}, "stop"),
    )
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert deltas == [
        TextDelta("Hel", [TokenLogprob("Hel", -0.01, [("Hel", -0.01), ("Hi", -4.6)])]),
        TextDelta("lo"),
    ]


async def test_snowflake_empty_logprobs_are_none() -> None:
    events, error, _ = await replay(recorded_response("snowflake_logprobs"))
    assert error is None
    texts = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert texts and all(isinstance(t, TextDelta) and t.logprobs is None for t in texts)


# -- legacy and audio fields ----------------------------------------------------------------


async def test_a_legacy_function_call_is_a_tool_call() -> None:
    events = await events_of(
        chunk(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get", "arguments": ""},
            }
        ),
        chunk({"function_call": {"arguments": '{"city":'}}),
        chunk({"function_call": {"arguments": '"Oslo"}'}}),
        chunk({}, "function_call"),
    )
    (start,) = [e for e in events if isinstance(e, BlockStart)]
    assert start.block_type is BlockType.TOOL_USE
    assert isinstance(start.metadata, ToolUseMetadata) and start.metadata.name == "get"
    summary = answer(events)
    assert [(c.name, c.input) for c in summary.calls] == [("get", {"city": "Oslo"})]
    assert summary.stop_reason is StopReason.TOOL_USE


async def test_an_audio_transcript_is_the_answer_text() -> None:
    audio = {"id": "audio_1", "data": "UklGRg==", "expires_at": 1, "transcript": "Hello"}
    events = await events_of(
        chunk({"role": "assistant", "audio": audio}),
        chunk({"audio": {"transcript": " there."}}),
        chunk({}, "stop"),
    )
    assert answer(events).text == "Hello there."


async def test_audio_and_prediction_tokens_are_counted() -> None:
    usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": 2},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 3,
            "accepted_prediction_tokens": 4,
            "rejected_prediction_tokens": 5,
        },
    }
    events = await events_of(chunk({"content": "x"}), chunk({}, "stop"), usage=usage)
    assert [e for e in events if isinstance(e, UsageEvent)] == [
        UsageEvent(
            5,
            7,
            12,
            cache_read_input_tokens=1,
            reasoning_tokens=0,
            audio_input_tokens=2,
            audio_output_tokens=3,
            accepted_prediction_tokens=4,
            rejected_prediction_tokens=5,
        )
    ]


# -- request settings -----------------------------------------------------------------------


def test_parallel_tool_calls_go_with_tools_only() -> None:
    # OpenAI: "'parallel_tool_calls' is only allowed when 'tools' are specified".
    tools = [ToolSpec("get", "Get.", SCHEMA)]
    request = Request([Message.user("x")], tools=tools, parallel_tool_calls=False)
    assert body_for(request, "gpt-4.1")["parallel_tool_calls"] is False
    request.tools = []
    assert "parallel_tool_calls" not in body_for(request, "gpt-4.1")


@pytest.mark.parametrize(
    ("effort", "sent"), [("none", "none"), ("xhigh", "xhigh"), ("max", "xhigh")]
)
def test_efforts_go_as_the_api_spells_them(effort: Any, sent: str) -> None:
    request = Request([Message.user("x")], thinking=ThinkingConfig(effort=effort))
    assert body_for(request, "gpt-5.2")["reasoning_effort"] == sent


def test_options_join_the_stop_list() -> None:
    # Lists in options join the body's (the merge rule of every client).
    request = Request([Message.user("x")], stop_sequences=["END"], options={"stop": ["STOP"]})
    assert body_for(request, "gpt-4.1")["stop"] == ["END", "STOP"]
