"""Anthropic server-tool, MCP and compaction blocks: kept whole, sent back only to their model.

A `pause_turn` answer must go back as it came for the server tool to go on. The recorded
answer is replayed over HTTP through `AnthropicClient` and assembled by the Worker's
`Assembler`; the next request must hold the recording's blocks exactly (read from the
recording's JSON by `expected`, not through the client), and every other client drops them.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_anthropic_support import (
    TIMEOUT,
    answer,
    assemble,
    block_delta,
    block_start,
    block_stop,
    check_invariants,
    expected,
    message_end,
    message_start,
    recorded_response,
    replay,
)

from llm_worker import Timeline, Worker
from llm_worker.events import BlockStart, BlockType, Event, ProviderMetadata
from llm_worker.messages import (
    Message,
    Origin,
    ProviderPart,
    Request,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    messages_from_json,
    messages_to_json,
)
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-5"
ORIGIN = Origin("anthropic", MODEL)
PAUSE = "pause_turn_web_search"


async def _answer(name: str) -> tuple[list[Event], Message]:
    events, error, _ = await replay(recorded_response(name))
    assert error is None, error
    check_invariants(events)
    return events, assemble(events, ORIGIN)


def _recorded_server_blocks(name: str) -> list[dict[str, Any]]:
    return [b.data for b in expected(name).blocks if b.data is not None]


def _recorded_content(name: str) -> list[dict[str, Any]]:
    """The answer's blocks as the API wants them back (empty text blocks it rejects left out)."""
    out: list[dict[str, Any]] = []
    for b in expected(name).blocks:
        if b.data is not None:
            out.append(b.data)
        elif b.kind == "thinking":
            out.append({"type": "thinking", "thinking": b.text, "signature": b.signature})
        elif b.kind == "text" and b.text:
            out.append({"type": "text", "text": b.text})
    return out


async def test_pause_turn_answer_keeps_every_server_block_in_order() -> None:
    _, message = await _answer(PAUSE)
    kept = [p for p in message.content if isinstance(p, ProviderPart)]
    want = _recorded_server_blocks(PAUSE)
    assert len(want) == 21
    assert [p.data for p in kept] == want
    assert all(p.origin == ORIGIN for p in kept)
    # Parsed inputs, whole results, and the unanswered call the pause left open.
    assert kept[0].data == {
        "type": "server_tool_use",
        "id": "srvtoolu_01FGPZ2P6yPXWdiD1Cxjpix3",
        "name": "web_search",
        "input": {"query": "San Francisco weather today"},
    }
    assert kept[1].data["type"] == "web_search_tool_result"
    assert kept[1].data["tool_use_id"] == "srvtoolu_01FGPZ2P6yPXWdiD1Cxjpix3"
    assert all(r["encrypted_content"] for r in kept[1].data["content"])
    assert kept[-1].data["id"] == "srvtoolu_01NKrV3hGbcHeBVtaTKBHRuA"
    assert kept[-1].data["input"] == {
        "query": "latest news on the air quality in San Francisco today"
    }
    # Thinking first, then three texts among the server blocks.
    assert isinstance(message.content[0], ThinkingPart)
    assert sum(isinstance(p, TextPart) for p in message.content) == 3
    assert len(message.content) == 25


async def test_the_next_request_sends_the_paused_answer_back_exactly() -> None:
    _, message = await _answer(PAUSE)
    history = [Message.user("search"), message]
    request = Request(history, thinking=ThinkingConfig(budget_tokens=4096))
    client = AnthropicClient(model=MODEL, api_key="k")
    body = client.build_body(request)
    assert body["messages"][1] == {"role": "assistant", "content": _recorded_content(PAUSE)}
    assert body["messages"][1]["content"][0]["type"] == "thinking"
    # The same after a trip through JSON (a paused run, a saved session).
    again = client.build_body(
        Request(messages_from_json(messages_to_json(history)), thinking=request.thinking)
    )
    assert again == body


async def test_a_prompt_cache_marker_does_not_reach_the_kept_block() -> None:
    _, message = await _answer(PAUSE)
    client = AnthropicClient(model=MODEL, api_key="k", prompt_cache=("messages",))
    body = client.build_body(Request([Message.user("search"), message]))
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    last = message.content[-1]
    assert isinstance(last, ProviderPart)
    assert "cache_control" not in last.data


async def test_another_model_gets_none_of_the_server_blocks() -> None:
    _, message = await _answer(PAUSE)
    body = AnthropicClient(model="claude-opus-4-1", api_key="k").build_body(
        Request([Message.user("search"), message, Message.user("go on")])
    )
    assert b"srvtoolu_" not in orjson.dumps(body)
    # The texts of any origin go; the thinking and the server blocks are bound to the model.
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text"] * 3


def _other_clients() -> list[HttpClient]:
    return [
        OpenAIChatClient(model=MODEL, api_key="k"),
        OpenAIResponsesClient(model=MODEL, api_key="k"),
        GeminiClient(model=MODEL, api_key="k"),
    ]


@pytest.mark.parametrize("client", _other_clients(), ids=lambda c: c.provider)
async def test_other_providers_drop_the_server_blocks(client: HttpClient) -> None:
    _, message = await _answer(PAUSE)
    message.content.append(TextPart("The searches are done."))
    # In a user message too (a hand-built history): dropped, not an error.
    user = Message("user", [TextPart("go on"), ProviderPart({"type": "x"}, origin=ORIGIN)])
    body = client.build_body(Request([Message.user("search"), message, user]))
    dumped = orjson.dumps(body)
    assert b"srvtoolu_" not in dumped
    assert b"web_search_tool_result" not in dumped
    assert b"The searches are done." in dumped
    assert b"go on" in dumped


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("compaction_block", ["compaction"]),
        ("mcp_connector_tool_use", ["mcp_tool_use", "mcp_tool_result"]),
        (
            "code_execution_server_tool",
            ["server_tool_use", "bash_code_execution_tool_result", "container"],
        ),
        ("web_fetch_server_tool", ["server_tool_use", "web_fetch_tool_result"]),
        ("tool_search_run_step1", ["server_tool_use", "tool_search_tool_result"]),
    ],
)
async def test_recorded_native_blocks_are_kept_with_their_deltas(
    name: str, kinds: list[str]
) -> None:
    _, message = await _answer(name)
    kept = [p.data for p in message.content if isinstance(p, ProviderPart)]
    assert [d["type"] for d in kept] == kinds
    assert kept == _recorded_server_blocks(name)


async def test_compaction_content_is_the_concatenated_deltas() -> None:
    _, message = await _answer("compaction_block")
    block = message.content[0]
    assert isinstance(block, ProviderPart)
    assert block.data["content"].startswith("The user provided a very long context")


async def test_synthetic_deltas_merge_into_the_kept_block() -> None:
    body = (
        message_start()
        + block_start(0, {"type": "compaction", "content": None})
        + block_delta(0, {"type": "compaction_delta", "content": "first, "})
        + block_delta(0, {"type": "compaction_delta", "content": "second"})
        + block_stop(0)
        + block_start(1, {"type": "future_block", "citations": None})
        + block_delta(1, {"type": "citations_delta", "citation": {"n": 1}})
        + block_delta(1, {"type": "citations_delta", "citation": {"n": 2}})
        + block_delta(1, {"type": "brand_new_delta"})
        + block_stop(1)
        + block_start(2, {"type": "mcp_tool_use", "id": "m1", "name": "ask", "input": {}})
        + block_delta(2, {"type": "input_json_delta", "partial_json": ""})
        + block_stop(2)
        # Cut off before its stop: a half block is never kept.
        + block_start(3, {"type": "server_tool_use", "id": "s1", "name": "web_search"})
        + message_end()
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [s.metadata for s in starts] == [
        ProviderMetadata({"type": "compaction", "content": "first, second"}),
        ProviderMetadata({"type": "future_block", "citations": [{"n": 1}, {"n": 2}]}),
        ProviderMetadata({"type": "mcp_tool_use", "id": "m1", "name": "ask", "input": {}}),
    ]
    assert [b.kind for b in answer(events).blocks] == ["provider"] * 3


async def test_the_timeline_routes_provider_blocks_to_no_handler() -> None:
    events, _ = await _answer(PAUSE)
    timeline = Timeline()
    seen: list[str] = []
    timeline.on_text_block(lambda e: seen.append(f"text:{type(e).__name__}"))
    timeline.on_thinking_block(lambda e: seen.append(f"thinking:{type(e).__name__}"))
    timeline.on_tool_use_block(lambda e: seen.append(f"tool:{type(e).__name__}"))
    for event in events:
        timeline.dispatch(event)
        if isinstance(event, BlockStart) and event.block_type is BlockType.PROVIDER:
            assert timeline.current_block is None
    starts = [s for s in seen if s.endswith("Start")]
    assert starts == ["thinking:ThinkingBlockStart"] + ["text:TextBlockStart"] * 3
    assert not any(s.startswith("tool:") for s in seen)
    assert not any(s.endswith("Abort") for s in seen)


async def test_the_worker_sends_a_paused_answer_back_and_goes_on() -> None:
    final = (
        message_start()
        + block_start(0, {"type": "text", "text": ""})
        + block_delta(0, {"type": "text_delta", "text": "All searches done."})
        + block_stop(0)
        + message_end()
    )
    async with WireServer([recorded_response(PAUSE), WireResponse(final)]) as server:
        client = AnthropicClient(
            model=MODEL,
            api_key="k",
            base_url=server.base_url,
            retry=RetryPolicy.disabled(),
        )
        # Caching off: the answer as sent back, without the end breakpoint on its last block.
        worker = Worker(client, thinking=ThinkingConfig(budget_tokens=4096), prompt_cache=False)
        try:
            with anyio.fail_after(TIMEOUT):
                result = await worker.run("search")
        finally:
            await client.aclose()
    assert result.text == "All searches done."
    assert result.requests == 2
    second = server.requests[1].json()
    sent_back = second["messages"][1]
    assert sent_back == {"role": "assistant", "content": _recorded_content(PAUSE)}
    assert second["messages"][-1] == sent_back  # nothing after it: the turn goes on


async def test_a_scripted_provider_part_reaches_the_history_with_the_client_origin() -> None:
    from llm_worker.events import StopReason
    from llm_worker.testing import ScriptedClient, ScriptedResponse

    block = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
    client = ScriptedClient(
        [
            ScriptedResponse([ProviderPart(block)], stop_reason=StopReason.PAUSE_TURN),
            ScriptedResponse.text("done"),
        ],
        provider="anthropic",
        model=MODEL,
    )
    worker = Worker(client)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("search")
    assert result.text == "done"
    assert worker.history[1].content == [ProviderPart(block, origin=ORIGIN)]
    assert client.requests[1].messages[-1].content == [ProviderPart(block, origin=ORIGIN)]


async def test_a_server_tools_integer_past_64_bits_keeps_its_digits() -> None:
    # orjson reads such an integer as the nearest float: the block went back to the model
    # with another number than it sent.
    wide = 2**70 + 1
    body = (
        message_start()
        + block_start(0, {"type": "mcp_tool_use", "id": "m1", "name": "pay", "input": {}})
        + block_delta(0, {"type": "input_json_delta", "partial_json": '{"cents": '})
        + block_delta(0, {"type": "input_json_delta", "partial_json": f"{wide}}}"})
        + block_stop(0)
        + message_end()
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    (start,) = [e for e in events if isinstance(e, BlockStart)]
    assert start.metadata == ProviderMetadata(
        {"type": "mcp_tool_use", "id": "m1", "name": "pay", "input": {"cents": wide}}
    )
