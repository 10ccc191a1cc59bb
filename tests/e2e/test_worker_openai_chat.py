"""The Worker over the OpenAI Chat Completions wire: tool loop, skip, pause / resume.

The scripted model streams real `chat.completion.chunk` SSE (reasoning as DeepSeek's
`reasoning_content`); the real `OpenAIChatClient` builds each request. The reasoning goes back
to the same model as the assistant message's `reasoning_content` (DeepSeek's thinking mode
answers HTTP 400 to a tool-call message without it). Chat has no error flag on a tool result:
a failed or skipped call is a `role: "tool"` message whose text says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_worker import Origin, RunStatus, TextPart, ThinkingPart, ToolUsePart
from support.e2e import (
    FINAL_TEXT,
    run_paused_then_resumed,
    run_tool_loop,
    run_with_skip,
)
from support.wire_bodies import WireCall, WireResult

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

MODEL = "gpt-4.1-mini"
FIRST = [
    ThinkingPart("Kyoto's weather: call lookup; also try explode."),
    TextPart("Let me check."),
    ToolUsePart("call_Kyoto", "lookup", {"city": "Kyoto"}),
    ToolUsePart("call_Boom", "explode", {"reason": "test"}),
]
ASSISTANT = {
    "role": "assistant",
    "content": "Let me check.",
    "reasoning_content": "Kyoto's weather: call lookup; also try explode.",
    "tool_calls": [
        {
            "id": "call_Kyoto",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"city":"Kyoto"}'},
        },
        {
            "id": "call_Boom",
            "type": "function",
            "function": {"name": "explode", "arguments": '{"reason":"test"}'},
        },
    ],
}
LOOKUP_RESULT = {"role": "tool", "tool_call_id": "call_Kyoto", "content": "Kyoto: 21 C, clear"}
EXPLODE_RESULT = {
    "role": "tool",
    "tool_call_id": "call_Boom",
    "content": "RuntimeError: boom: test",
}


def _turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["messages"]


async def test_tool_loop_sends_calls_and_tool_messages_in_call_order() -> None:
    run = await run_tool_loop("openai_chat", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert run.result.requests == 2
    usage = run.result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (330, 57, 387)
    first, second = run.bodies
    assert _turns(first) == [{"role": "user", "content": "What is the weather in Kyoto?"}]
    assert second["reasoning_effort"] == "low"
    assert second["stream_options"] == {"include_usage": True}
    assert [t["function"]["name"] for t in second["tools"]] == ["lookup", "explode"]
    assert _turns(second)[1:] == [ASSISTANT, LOOKUP_RESULT, EXPLODE_RESULT]
    assert run.steps[0].calls == [
        WireCall("call_Kyoto", "lookup", {"city": "Kyoto"}),
        WireCall("call_Boom", "explode", {"reason": "test"}),
    ]
    assert run.steps[0].results == [
        WireResult("call_Kyoto", None, "Kyoto: 21 C, clear", None),
        WireResult("call_Boom", None, "RuntimeError: boom: test", None),
    ]
    # The reasoning reached the history marked as this model's, which is why it went back.
    reasoning = run.history[1].content[0]
    assert isinstance(reasoning, ThinkingPart)
    assert reasoning.text == "Kyoto's weather: call lookup; also try explode."
    assert reasoning.origin == Origin("openai_chat", MODEL)


async def test_skipped_call_is_answered_with_a_tool_message() -> None:
    run = await run_with_skip("openai_chat", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.desk.ran == [("explode", {"reason": "test"})]
    skipped = {
        "role": "tool",
        "tool_call_id": "call_Kyoto",
        "content": "Skipped: a before_tool_call hook did not let this call run: "
        "lookups are off today.",
    }
    assert _turns(run.bodies[1])[1:] == [ASSISTANT, skipped, EXPLODE_RESULT]


async def test_paused_run_resumes_from_json() -> None:
    run = await run_paused_then_resumed("openai_chat", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert [name for name, _ in run.desk.ran] == ["lookup", "explode"]
    assert len(run.bodies) == 2
    assert _turns(run.bodies[1])[1:] == [ASSISTANT, LOOKUP_RESULT, EXPLODE_RESULT]
