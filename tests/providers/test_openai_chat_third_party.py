"""Chat Completions streams of other servers (tests/fixtures/third_party/openai_chat).

Each stream goes over HTTP on 127.0.0.1 through the real `OpenAIChatClient`, and then through
a Worker, whose next request body (the history it sends back) is checked against the
request types: the OpenAI SDK's, and Mistral's for Mistral's own content parts.

- parallel tool calls sharing one `index` with different ids (Ollama, LiteLLM `ollama_chat`,
  proxies) are separate calls;
- Mistral's (Magistral) thinking content parts are thinking, sent back as Mistral takes it;
- a stream that ends after its `finish_reason` with neither usage nor `[DONE]` is complete;
- `system_fingerprint` is kept on the closing status.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_openai_chat_support import Call, answer, check_invariants, client_for, replay

from llm_worker import Message, Worker, tool
from llm_worker.events import (
    BlockStart,
    Event,
    ResponseStatus,
    StatusEvent,
    StopReason,
    ThinkingMetadata,
    UsageEvent,
)
from llm_worker.messages import Origin, Request, TextPart, ThinkingPart, ToolUsePart
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import streams
from support.mistral_types import Messages
from support.sdk_types import mismatches
from support.third_party import load, response
from support.wire_bodies import assert_valid

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

API = "openai_chat"
DONE = b"data: [DONE]\n\n"
CHUNKINGS = [
    pytest.param(Chunking.whole(), id="whole"),
    pytest.param(Chunking.random(5, max_size=13), id="random"),
]


def _fixture(name: str, chunking: Chunking | None = None) -> WireResponse:
    return response(API, name, chunking)


def _final(text: str = "Done.") -> WireResponse:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return WireResponse(body + b"data: [DONE]\n\n")


def _sdk_mismatches(body: dict[str, Any]) -> list[str]:
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    return mismatches(body, CompletionCreateParamsStreaming)


class Lookups:
    def __init__(self) -> None:
        self.cities: list[str] = []

    @tool
    async def lookup(self, city: str) -> str:
        """Look up the weather of a city."""
        self.cities.append(city)
        return f"{city}: clear"


async def _run_worker(
    first: WireResponse, *, model: str = "qwen3:8b"
) -> tuple[Worker, Lookups, list[dict[str, Any]], Any]:
    desk = Lookups()
    async with WireServer([first, _final()]) as server:
        client = client_for(server, model=model)
        try:
            worker = Worker(client, tools=[desk.lookup])
            with anyio.fail_after(streams.TIMEOUT):
                result = await worker.run("Weather?")
        finally:
            await client.aclose()
        bodies = [r.json() for r in server.requests]
    return worker, desk, bodies, result


# -- 1. parallel calls at one index ------------------------------------------------------------


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_ollama_parallel_calls_at_one_index_are_two_calls(chunking: Chunking) -> None:
    events, error, _ = await replay(_fixture("ollama_parallel_calls_one_index", chunking))
    check_invariants(events, error)
    got = answer(events)
    assert got.calls == [
        Call("call_k7yt2m1q", "lookup", {"city": "Kyoto"}),
        Call("call_p3xw9c0d", "lookup", {"city": "Osaka"}),
    ]
    assert got.stop_reason is StopReason.TOOL_USE


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_fragments_without_an_id_continue_the_last_call_of_their_index(
    chunking: Chunking,
) -> None:
    events, error, _ = await replay(_fixture("proxy_parallel_call_fragments_one_index", chunking))
    check_invariants(events, error)
    assert answer(events).calls == [
        Call("call_a1", "lookup", {"city": "Kyoto"}),
        Call("call_b2", "lookup", {"city": "Osaka"}),
    ]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"


def _fragment(index: int, args: str, call_id: str | None = None, name: str | None = None) -> bytes:
    call: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id is not None:
        call["id"] = call_id
    if name is not None:
        call["function"]["name"] = name
    return _chunk({"tool_calls": [call]})


async def test_a_fragment_repeating_its_calls_id_continues_that_call() -> None:
    # Some proxies repeat the id (and name) on every fragment of one call.
    body = (
        _fragment(0, '{"city": ', "call_1", "lookup")
        + _fragment(0, '"Kyoto"}', "call_1", "lookup")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert answer(events).calls == [Call("call_1", "lookup", {"city": "Kyoto"})]


async def test_openai_interleaved_indexes_still_pair_by_index() -> None:
    # OpenAI's own shape: an id only in each call's first fragment, calls told by index, the
    # fragments of two calls interleaved.
    body = (
        _fragment(0, '{"city": ', "call_1", "lookup")
        + _fragment(1, '{"city": ', "call_2", "lookup")
        + _fragment(0, '"Kyoto"}')
        + _fragment(1, '"Osaka"}')
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert answer(events).calls == [
        Call("call_1", "lookup", {"city": "Kyoto"}),
        Call("call_2", "lookup", {"city": "Osaka"}),
    ]


async def test_a_new_id_at_the_index_of_an_unfinished_call_fails_that_call_visibly() -> None:
    # The first call's arguments never completed: it is not silently glued to the second.
    body = (
        _fragment(0, '{"city": ', "call_1", "lookup")
        + _fragment(0, '{"city": "Osaka"}', "call_2", "lookup")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    metas = [e.metadata for e in events if isinstance(e, BlockStart)]
    assert [getattr(m, "id", None) for m in metas] == ["call_1", "call_2"]


async def test_the_worker_runs_both_ollama_calls_and_answers_each() -> None:
    worker, desk, bodies, result = await _run_worker(_fixture("ollama_parallel_calls_one_index"))
    assert result.text == "Done."
    assert desk.cities == ["Kyoto", "Osaka"]
    second = bodies[1]
    (step,) = assert_valid(API, second)
    assert [(c.id, c.args) for c in step.calls] == [
        ("call_k7yt2m1q", {"city": "Kyoto"}),
        ("call_p3xw9c0d", {"city": "Osaka"}),
    ]
    assert [r.output for r in step.results] == ["Kyoto: clear", "Osaka: clear"]
    assert _sdk_mismatches(second) == []
    assert [p.id for p in worker.history[1].tool_uses] == ["call_k7yt2m1q", "call_p3xw9c0d"]


# -- 2. Mistral thinking ---------------------------------------------------------------------


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_mistral_thinking_parts_are_thinking(chunking: Chunking) -> None:
    events, error, _ = await replay(
        _fixture("mistral_magistral_thinking", chunking), model="magistral-medium-latest"
    )
    check_invariants(events, error)
    got = answer(events)
    assert got.thinking == "The user asks 17 times 2. 17 multiplied by 2 is 34."
    assert got.text == "17 x 2 = 34."
    assert got.usage == UsageEvent(input_tokens=12, output_tokens=41, total_tokens=53)
    starts = [e.metadata for e in events if isinstance(e, BlockStart)]
    assert starts[0] == ThinkingMetadata(replay=True, item_id="thinking")
    origin = Origin(API, "magistral-medium-latest")
    message = streams.assemble(events, origin)
    assert message.content[0] == ThinkingPart(got.thinking, item_id="thinking", origin=origin)


async def test_mistral_thinking_goes_back_as_a_thinking_part_to_the_same_model() -> None:
    model = "magistral-medium-latest"
    fixture = _fixture("mistral_magistral_thinking_tool_call")
    worker, desk, bodies, result = await _run_worker(fixture, model=model)
    assert result.text == "Done." and desk.cities == ["Kyoto"]
    second = bodies[1]
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": [
                    {
                        "type": "text",
                        "text": "I should look up Kyoto's weather with the lookup tool.",
                    }
                ],
            }
        ],
        "tool_calls": [
            {
                "id": "D681PevKs",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"city":"Kyoto"}'},
            }
        ],
    }
    assert mismatches({"messages": second["messages"]}, Messages) == []
    assert_valid(API, second)
    # Another model gets no thinking, and a body the OpenAI SDK's types take.
    other = build_chat_body(Request(worker.history), "gpt-4o")
    assert "thinking" not in orjson.dumps(other).decode()
    assert _sdk_mismatches(other) == []


def test_mistral_thinking_and_text_keep_their_order() -> None:
    origin = Origin(API, "magistral-small")
    answer_ = Message(
        "assistant",
        [
            ThinkingPart("a", item_id="thinking", origin=origin),
            TextPart("b"),
            TextPart("c"),
            ThinkingPart("d", item_id="thinking", origin=origin),
            ToolUsePart("call_1", "lookup", {"city": "Kyoto"}),
        ],
    )
    body = build_chat_body(Request([Message.user("q"), answer_]), "magistral-small")
    content = body["messages"][1]["content"]
    assert content == [
        {"type": "thinking", "thinking": [{"type": "text", "text": "a"}]},
        {"type": "text", "text": "bc"},
        {"type": "thinking", "thinking": [{"type": "text", "text": "d"}]},
    ]
    assert mismatches({"messages": body["messages"]}, Messages) == []


async def test_a_thinking_part_of_the_wrong_shape_is_a_typed_error() -> None:
    from llm_worker.errors import MalformedStreamError

    body = _chunk({"content": [{"type": "thinking", "thinking": 42}]}) + _chunk({}, "stop")
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)


# -- 4. the end of a stream without usage or [DONE] ---------------------------------------------


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_a_stream_ending_after_its_finish_reason_is_complete(chunking: Chunking) -> None:
    events, error, _ = await replay(_fixture("local_server_finish_without_usage_or_done", chunking))
    check_invariants(events, error)
    got = answer(events)
    assert (got.text, got.stop_reason) == ("Hi there.", StopReason.END_TURN)


async def test_the_worker_runs_a_call_of_a_stream_ending_after_its_finish_reason() -> None:
    fixture = _fixture("local_server_tool_call_finish_without_usage_or_done")
    _, desk, bodies, result = await _run_worker(fixture, model="local-model")
    assert result.text == "Done." and desk.cities == ["Kyoto"]
    assert _sdk_mismatches(bodies[1]) == []


async def test_a_stream_cut_before_its_finish_reason_is_still_interrupted() -> None:
    from llm_worker.errors import StreamInterruptedError

    body = load(API, "local_server_finish_without_usage_or_done")["response"]["body"]
    cut = body[: body.index('"finish_reason":"stop"')]
    cut = cut[: cut.rfind("\n\n") + 2]
    events, error, _ = await replay(WireResponse(cut))
    check_invariants(events, error)
    assert isinstance(error, StreamInterruptedError)


# -- 9. system_fingerprint -------------------------------------------------------------------


def _closing(events: list[Event]) -> StatusEvent:
    last = events[-1]
    assert isinstance(last, StatusEvent)
    return last


async def test_the_system_fingerprint_is_on_the_closing_status() -> None:
    events, error, _ = await replay(_fixture("ollama_parallel_calls_one_index"))
    assert error is None
    closing = _closing(events)
    assert closing.status is ResponseStatus.COMPLETED
    assert (closing.response_id, closing.system_fingerprint) == ("chatcmpl-412", "fp_ollama")


async def test_the_system_fingerprint_is_on_a_failed_status_too() -> None:
    chunk = {"id": "chatcmpl-1", "system_fingerprint": "fp_1", "choices": []}
    body = b"data: " + orjson.dumps(chunk) + b"\n\n" + _chunk({"content": "cut"})
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    closing = _closing(events)
    assert (closing.status, closing.system_fingerprint) == (ResponseStatus.FAILED, "fp_1")


@pytest.mark.parametrize("index", [0, 1], ids=["same-index", "next-index"])
async def test_one_call_sent_twice_under_one_id_fails_the_stream(index: int) -> None:
    from llm_worker.errors import MalformedStreamError

    body = (
        _fragment(0, '{"city": "Kyoto"}', "dup", "lookup")
        + _fragment(index, '{"city": "Kyoto"}', "dup", "lookup")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError) and "'dup'" in error.message
