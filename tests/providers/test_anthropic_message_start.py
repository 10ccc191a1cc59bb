"""A whole answer inside `message_start` (a turn resumed by programmatic tool calling).

The streams are built from the anthropic SDK's own types (`Message`, `ToolUseBlock`,
`RawMessageStartEvent`, …) serialized as the SDK does, so their shape is the API's, not ours.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anthropic.types import (
    Message as SDKMessage,
)
from anthropic.types import (
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    ServerToolCaller,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from anthropic.types.message_delta_usage import MessageDeltaUsage
from anthropic.types.raw_message_delta_event import Delta
from pydantic import BaseModel
from test_anthropic_support import check_invariants, replay

from llm_worker import Worker, tool
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    InputJsonDelta,
    SignatureDelta,
    StopReason,
    ThinkingDelta,
    ToolUseMetadata,
    UsageEvent,
)
from llm_worker.events import TextDelta as NeutralText
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer

CALLER = ServerToolCaller(type="code_execution_20250825", tool_id="srvtoolu_01")
CALLED = {"type": "code_execution_20250825", "tool_id": "srvtoolu_01"}


def sse(*events: BaseModel) -> str:
    return "".join(
        f"event: {getattr(e, 'type')}\ndata: {e.model_dump_json()}\n\n"  # noqa: B009
        for e in events
    )


def message(content: list[Any], stop_reason: Any = "tool_use") -> RawMessageStartEvent:
    whole = SDKMessage(
        id="msg_01",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=content,
        stop_reason=stop_reason,
        stop_sequence=None,
        usage=Usage(input_tokens=120, output_tokens=30),
    )
    return RawMessageStartEvent(message=whole, type="message_start")


def tool_use(call_id: str = "toolu_01", city: str = "Oslo") -> ToolUseBlock:
    return ToolUseBlock(
        id=call_id, name="lookup", input={"city": city}, type="tool_use", caller=CALLER
    )


STOP = RawMessageStopEvent(type="message_stop")


@pytest.mark.anyio
async def test_a_tool_call_inside_message_start_is_emitted_with_its_stop_reason() -> None:
    events, error, _ = await replay(WireResponse(sse(message([tool_use()]), STOP)))
    assert error is None
    check_invariants(events)
    blocks = [e for e in events if isinstance(e, BlockStart | BlockDelta | BlockStop)]
    assert blocks == [
        # A call made from code keeps its caller: the follow-up must send it back.
        BlockStart(0, BlockType.TOOL_USE, ToolUseMetadata("toolu_01", "lookup", caller=CALLED)),
        BlockDelta(0, InputJsonDelta('{"city":"Oslo"}')),
        BlockStop(0, BlockType.TOOL_USE, StopReason.TOOL_USE, "tool_use"),
    ]
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert usage[0].input_tokens == 120


@pytest.mark.anyio
async def test_every_kind_of_block_in_message_start_reads_as_if_streamed() -> None:
    content = [
        ThinkingBlock(type="thinking", thinking="Plan.", signature="sig=="),
        TextBlock(type="text", text="Looking it up."),
        tool_use("toolu_01", "Oslo"),
        tool_use("toolu_02", "Kyoto"),
    ]
    events, error, _ = await replay(WireResponse(sse(message(content), STOP)))
    assert error is None
    check_invariants(events)
    deltas = [(e.index, e.delta) for e in events if isinstance(e, BlockDelta)]
    assert deltas == [
        (0, ThinkingDelta("Plan.")),
        (0, SignatureDelta("sig==")),
        (1, NeutralText("Looking it up.")),
        (2, InputJsonDelta('{"city":"Oslo"}')),
        (3, InputJsonDelta('{"city":"Kyoto"}')),
    ]
    stops = [e for e in events if isinstance(e, BlockStop)]
    assert [s.stop_reason for s in stops] == [None, None, None, StopReason.TOOL_USE]


@pytest.mark.anyio
async def test_blocks_streamed_after_a_full_message_start_follow_them() -> None:
    # The message_start content first; a block that then streams comes after it, and the
    # stop reason of a message_delta wins over the one of message_start.
    streamed = [
        RawContentBlockStartEvent(
            type="content_block_start", index=1, content_block=TextBlock(type="text", text="")
        ),
        RawContentBlockDeltaEvent(
            type="content_block_delta", index=1, delta=TextDelta(type="text_delta", text="Done.")
        ),
        RawContentBlockStopEvent(type="content_block_stop", index=1),
        RawMessageDeltaEvent(
            type="message_delta",
            delta=Delta(stop_reason="end_turn", stop_sequence=None),
            usage=MessageDeltaUsage(output_tokens=40),
        ),
    ]
    body = sse(message([TextBlock(type="text", text="Resumed. ")], None), *streamed, STOP)
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events)
    texts = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert texts == [NeutralText("Resumed. "), NeutralText("Done.")]
    assert [e for e in events if isinstance(e, BlockStop)][-1].stop_reason is StopReason.END_TURN


@pytest.mark.anyio
async def test_the_worker_runs_the_call_a_resumed_turn_carries() -> None:
    ran: list[str] = []

    @tool
    async def lookup(city: str) -> str:
        """Look up the weather of a city."""
        ran.append(city)
        return f"{city}: 21 C"

    final = sse(
        message([TextBlock(type="text", text="It is 21 C in Oslo.")], "end_turn"),
        STOP,
    )
    answers = [WireResponse(sse(message([tool_use()]), STOP)), WireResponse(final)]
    async with WireServer(answers) as server:
        from llm_worker.providers import AnthropicClient

        client = AnthropicClient(
            model="claude-sonnet-4-5",
            api_key="sk-ant-test-key",
            base_url=server.base_url,
            retry=RetryPolicy.disabled(),
        )
        with anyio.fail_after(10):
            result = await Worker(client, tools=[lookup]).run("Weather in Oslo?")
        await client.aclose()
    assert ran == ["Oslo"]
    assert result.text == "It is 21 C in Oslo."
    sent = server.requests[1].json()["messages"]
    assert sent[1]["content"][0]["id"] == "toolu_01"
    assert sent[2]["content"][0]["tool_use_id"] == "toolu_01"
