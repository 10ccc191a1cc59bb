"""`testing._wire_anthropic.encode`: scripted answers as real Messages streams, read back by
`AnthropicClient` to the very events `ScriptedClient` yields for the same script."""

from __future__ import annotations

import anyio
import pytest
from test_anthropic_support import (
    TIMEOUT,
    answer,
    check_invariants,
    collect,
    replay,
    sse_payloads,
)

from llm_worker import ThinkingConfig, Worker, tool
from llm_worker.errors import OverloadedError, ProviderError
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    Event,
    StatusEvent,
    StopReason,
    UsageEvent,
)
from llm_worker.messages import (
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.testing import (
    Chunking,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedResponse,
    WireResponse,
)
from llm_worker.testing._wire_anthropic import encode

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

USAGE = UsageEvent(
    input_tokens=140,
    output_tokens=60,
    total_tokens=200,
    cache_read_input_tokens=100,
    cache_creation_input_tokens=30,
    reasoning_tokens=12,
)

SCRIPT = ScriptedResponse(
    [
        ThinkingPart("I should look it up, carefully — ünïcödé too.", signature="EqQBsig=="),
        ThinkingPart("", redacted="EmwKAhgBEgy3va"),
        TextPart("Let me check the weather in Kyōto."),
        ToolUsePart("toolu_1", "get_weather", {"city": "Kyōto", "days": [1, 2]}),
        ToolUsePart("", "now", {}),
    ],
    usage=USAGE,
    chunk_size=7,
)


def _block_events(events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events:
        if isinstance(event, BlockStop):
            # ScriptedClient has no wire spelling of the stop reason; the wire has one.
            out.append(BlockStop(event.index, event.block_type, event.stop_reason))
        elif isinstance(event, BlockStart | BlockDelta | BlockAbort):
            out.append(event)
    return out


async def _scripted(response: ScriptedResponse) -> tuple[list[Event], ProviderError | None]:
    events: list[Event] = []
    error: ProviderError | None = None
    with anyio.fail_after(TIMEOUT):
        try:
            async for event in ScriptedClient([response]).stream(Request([Message.user("q")])):
                events.append(event)
        except ProviderError as exc:
            error = exc
    return events, error


@pytest.mark.parametrize(
    "chunking", [Chunking.whole(), Chunking.bytewise()], ids=["whole", "bytewise"]
)
async def test_encoded_stream_reads_back_to_the_scripted_events(chunking: Chunking) -> None:
    body = encode(SCRIPT, model="claude-test")
    ours, error, _ = await replay(WireResponse(body, chunking=chunking))
    assert error is None
    check_invariants(ours)
    reference, _ = await _scripted(SCRIPT)
    assert _block_events(ours) == _block_events(reference)
    usage = [e for e in ours if isinstance(e, UsageEvent)]
    assert usage[-1] == USAGE
    assert [b.input for b in answer(ours).blocks if b.kind == "tool_use"] == [
        {"city": "Kyōto", "days": [1, 2]},
        {},
    ]


async def test_encoded_stream_has_the_recorded_shape() -> None:
    payloads = sse_payloads(encode(SCRIPT, model="claude-test").decode())
    kinds = [p["type"] for p in payloads]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert "ping" in kinds
    assert payloads[0]["message"]["model"] == "claude-test"
    assert payloads[0]["message"]["usage"]["input_tokens"] == 140 - 100 - 30
    empty_args = [
        p["delta"] for p in payloads if p["type"] == "content_block_delta" and p["index"] == 4
    ]
    assert empty_args == [{"type": "input_json_delta", "partial_json": ""}]
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"


async def test_a_failing_script_ends_with_an_error_event() -> None:
    failing = ScriptedResponse(
        [TextPart("partial answer")],
        fail_with=OverloadedError("Overloaded", error_type="overloaded_error"),
    )
    ours, error, _ = await replay(WireResponse(encode(failing, model="m")))
    assert isinstance(error, OverloadedError)
    assert error.streamed
    check_invariants(ours, failed=True)
    reference, reference_error = await _scripted(failing)
    assert isinstance(reference_error, OverloadedError)
    assert _block_events(ours) == _block_events(reference)
    assert [e for e in ours if isinstance(e, ErrorEvent)] == [
        ErrorEvent("overloaded_error", "Overloaded")
    ]


@pytest.mark.parametrize(
    "bad",
    [
        ScriptedResponse([ToolResultPart("x", "y")]),
        ScriptedResponse([TextPart("t", signature="gemini")]),
        ScriptedResponse([ToolUsePart("a", "f", {}, signature="gemini")]),
        ScriptedResponse([TextPart("t")], stop_reason=StopReason.CONTENT_FILTER),
    ],
    ids=["tool-result", "text-signature", "call-signature", "content-filter"],
)
def test_what_anthropic_cannot_stream_is_refused(bad: ScriptedResponse) -> None:
    with pytest.raises(ValueError, match=r"Anthropic|tool result"):
        encode(bad, model="m")


async def test_scripted_model_server_speaks_anthropic_to_the_real_client() -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "lookup", {"q": "x"})]),
        ScriptedResponse.text("Found it."),
    ]
    server = ScriptedModelServer("anthropic", script, model="claude-test")
    async with server:
        client = server.client()
        try:
            first, error = await collect(client, Request([Message.user("find x")]))
            assert error is None
            call = answer(first).blocks[0]
            history = [
                Message.user("find x"),
                Message("assistant", [ToolUsePart(call.id, call.name, call.input)]),
                Message("user", [ToolResultPart(call.id, "x is here")]),
            ]
            second, error = await collect(client, Request(history))
            assert error is None
        finally:
            await client.aclose()
    assert (call.name, call.input) == ("lookup", {"q": "x"})
    assert answer(second).blocks[0].text == "Found it."
    sent = server.requests[1].json()
    assert server.requests[1].path == "/v1/messages"
    assert sent["messages"][2]["content"][0]["tool_use_id"] == call.id
    statuses = [e for e in second if isinstance(e, StatusEvent)]
    assert len(statuses) == 2


async def test_worker_tool_loop_with_thinking_sends_the_signed_thinking_back() -> None:
    @tool
    def fixed_version() -> str:
        """Return a fixed version string."""
        return "0.32a0"

    script = [
        ScriptedResponse(
            [
                ThinkingPart("Call the tool first.", signature="EoQDsig=="),
                ToolUsePart("", "fixed_version", {}),
            ]
        ),
        ScriptedResponse.text("The version is 0.32a0."),
    ]
    server = ScriptedModelServer("anthropic", script, model="claude-test")
    async with server:
        client = server.client()
        try:
            worker = Worker(  # caching off: the blocks as sent back, without breakpoints
                client,
                tools=[fixed_version],
                thinking=ThinkingConfig(budget_tokens=1024),
                prompt_cache=False,
            )
            with anyio.fail_after(TIMEOUT):
                result = await worker.run("Which version?")
        finally:
            await client.aclose()
    assert result.text == "The version is 0.32a0."
    second = server.requests[1].json()
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024, "display": "summarized"}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Call the tool first.", "signature": "EoQDsig=="},
            {"type": "tool_use", "id": "call_0", "name": "fixed_version", "input": {}},
        ],
    }
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "0.32a0"}],
    }
