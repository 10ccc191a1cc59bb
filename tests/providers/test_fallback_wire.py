"""FallbackClient over real wire formats: Anthropic -> Gemini with thinking, cut tool calls.

Each server is a real HTTP server on 127.0.0.1 speaking the provider's wire format; the
bodies the clients send are read back to check what crossed from one provider to another.
"""

from __future__ import annotations

import anyio
import orjson
import pytest

from llm_worker import Worker, tool
from llm_worker.errors import OverloadedError
from llm_worker.events import UsageEvent
from llm_worker.messages import Origin, TextPart, ThinkingConfig, ThinkingPart, ToolUsePart
from llm_worker.providers import Cooldown, FallbackClient, RetryPolicy
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer
from llm_worker.testing._wire_anthropic import encode as anthropic_body

CLAUDE = "claude-sonnet-4-5"
GEMINI = "gemini-2.5-pro"
THINKING = ThinkingConfig(budget_tokens=2048)


def _mid_stream_overload() -> ScriptedResponse:
    error = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
    return ScriptedResponse(
        [ThinkingPart("weighing it", signature="sig-claude-2"), TextPart("The answer is")],
        fail_with=error,
        usage=UsageEvent(input_tokens=40, output_tokens=3),
    )


@pytest.mark.anyio
async def test_a_conversation_moves_from_anthropic_to_gemini_and_back_with_thinking() -> None:
    claude_script = [
        ScriptedResponse([ThinkingPart("first thought", signature="sig-claude-1"), TextPart("A")]),
        _mid_stream_overload(),
        ScriptedResponse([ThinkingPart("third thought", signature="sig-claude-3"), TextPart("C")]),
    ]
    gemini_script = [
        ScriptedResponse([ThinkingPart("gemini thought", signature="sig-gemini"), TextPart("B")])
    ]
    async with (
        ScriptedModelServer("anthropic", claude_script, model=CLAUDE) as claude,
        ScriptedModelServer("gemini", gemini_script, model=GEMINI) as gemini,
        claude.client() as first,
        gemini.client() as second,
    ):
        client = FallbackClient([first, second], cooldown=Cooldown.disabled())
        worker = Worker(client, thinking=THINKING)
        with anyio.fail_after(15):
            assert (await worker.run("one")).text == "A"
            moved = await worker.run("two")  # Claude breaks mid-stream: Gemini answers
            assert moved.text == "B"
            assert (await worker.run("three")).text == "C"  # Claude is back
    # Gemini's request: Claude's thinking went without its signature (a foreign one would be
    # refused with a 400), and no half answer of the broken stream.
    to_gemini = gemini.requests[0].body.decode()
    assert "sig-claude" not in to_gemini
    assert "The answer is" not in to_gemini
    assert gemini.requests[0].json()["generationConfig"]["thinkingConfig"]
    # Claude's next request: its own signed thinking back, Gemini's signature not.
    to_claude = claude.requests[2].json()
    assert "sig-gemini" not in orjson.dumps(to_claude).decode()
    sent_thinking = [
        block
        for message in to_claude["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "thinking"
    ]
    assert [b["signature"] for b in sent_thinking] == ["sig-claude-1"]
    # The history: each answer's opaque data marked by the client that answered it.
    origins = [
        part.origin
        for message in worker.history
        for part in message.content
        if isinstance(part, ThinkingPart)
    ]
    assert origins == [
        Origin("anthropic", CLAUDE),
        Origin("gemini", GEMINI),
        Origin("anthropic", CLAUDE),
    ]
    # The withdrawn answer reported its input tokens (message_start): billed to Claude.
    assert [(u.provider, u.model, u.usage.input_tokens) for u in moved.request_usage] == [
        ("anthropic", CLAUDE, 40),
        ("gemini", GEMINI, moved.request_usage[1].usage.input_tokens),
    ]
    assert moved.usage.input_tokens == 40 + (moved.request_usage[1].usage.input_tokens or 0)


_ran: list[str] = []


@tool(effect="side_effect")
def send_mail(to: str) -> str:
    """Send a mail."""
    _ran.append(to)
    return f"sent to {to}"


@pytest.mark.anyio
async def test_a_stream_cut_inside_a_tool_call_leaves_no_half_call() -> None:
    _ran.clear()
    body = anthropic_body(
        ScriptedResponse(
            [TextPart("Sending now."), ToolUsePart("toolu_1", "send_mail", {"to": "ann@x.org"})],
            chunk_size=4,
        ),
        model=CLAUDE,
    )
    cut = body.index(b"input_json_delta") + 40  # inside the call's arguments
    async with (
        WireServer([WireResponse(body, cut_at=cut)]) as broken,
        ScriptedModelServer(
            "openai_chat",
            [
                ScriptedResponse([ToolUsePart("", "send_mail", {"to": "bob@x.org"})]),
                ScriptedResponse.text("Sent."),
            ],
        ) as spare,
        spare.client() as second,
    ):
        from llm_worker.providers import AnthropicClient

        first = AnthropicClient(
            model=CLAUDE, base_url=broken.base_url, api_key="k", retry=RetryPolicy.disabled()
        )
        async with first:
            client = FallbackClient([first, second], cooldown=Cooldown(failures=1))
            worker = Worker(client, tools=[send_mail])
            with anyio.fail_after(15):
                result = await worker.run("Mail Bob")
    assert result.text == "Sent."
    assert _ran == ["bob@x.org"]  # the cut call never ran; the new answer's did, once
    calls = [p for m in result.messages for p in m.content if isinstance(p, ToolUsePart)]
    assert [c.input for c in calls] == [{"to": "bob@x.org"}]
    assert "Sending now." not in [m.text for m in result.messages]
    assert len(broken.requests) == 1  # its breaker opened: the second request skipped it
