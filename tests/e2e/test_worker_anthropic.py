"""The Worker over the Anthropic Messages wire: tool loop, skip, pause / resume.

The scripted model streams real Messages SSE; the real `AnthropicClient` builds each request.
What the server received is checked block for block: the signed thinking goes back first in
the assistant turn, the `tool_result` blocks answer the `tool_use` ids in call order, a failed
or skipped call carries `is_error: true`.
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
from support.wire_bodies import WireResult

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

MODEL = "claude-sonnet-4-5"
SIGNATURE = "EqQBCkYIBxgCKkBsignature+of/the==thinking"
FIRST = [
    ThinkingPart("Kyoto's weather: call lookup; also try explode.", signature=SIGNATURE),
    TextPart("Let me check."),
    ToolUsePart("toolu_01Kyoto", "lookup", {"city": "Kyoto"}),
    ToolUsePart("toolu_02Boom", "explode", {"reason": "test"}),
]
ASSISTANT = {
    "role": "assistant",
    "content": [
        {
            "type": "thinking",
            "thinking": "Kyoto's weather: call lookup; also try explode.",
            "signature": SIGNATURE,
        },
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01Kyoto", "name": "lookup", "input": {"city": "Kyoto"}},
        {"type": "tool_use", "id": "toolu_02Boom", "name": "explode", "input": {"reason": "test"}},
    ],
}
LOOKUP_RESULT = {
    "type": "tool_result",
    "tool_use_id": "toolu_01Kyoto",
    "content": "Kyoto: 21 C, clear",
}
EXPLODE_RESULT = {
    "type": "tool_result",
    "tool_use_id": "toolu_02Boom",
    "content": "RuntimeError: boom: test",
    "is_error": True,
}


# Prompt caching is on by default: the last block of each request is its sliding breakpoint.
MARK = {"cache_control": {"type": "ephemeral"}}
EXPLODE_MARKED = {**EXPLODE_RESULT, **MARK}


def _turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["messages"]


async def test_tool_loop_sends_signed_thinking_calls_and_results_back() -> None:
    run = await run_tool_loop("anthropic", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert run.result.requests == 2
    usage = run.result.usage
    assert (usage.input_tokens, usage.output_tokens) == (330, 57)
    first, second = run.bodies
    assert _turns(first) == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is the weather in Kyoto?", **MARK}],
        }
    ]
    assert [t["name"] for t in second["tools"]] == ["lookup", "explode"]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024, "display": "summarized"}
    assert _turns(second)[1:] == [
        ASSISTANT,
        {"role": "user", "content": [LOOKUP_RESULT, EXPLODE_MARKED]},
    ]
    assert run.steps[0].results == [
        WireResult("toolu_01Kyoto", None, "Kyoto: 21 C, clear", False),
        WireResult("toolu_02Boom", None, "RuntimeError: boom: test", True),
    ]
    assert [name for name, _ in run.desk.ran] == ["lookup", "explode"]
    thinking = run.history[1].content[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.origin == Origin("anthropic", MODEL)
    assert [m.role for m in run.history] == ["user", "assistant", "user", "assistant"]


async def test_skipped_call_is_answered_with_an_error_result() -> None:
    run = await run_with_skip("anthropic", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.desk.ran == [("explode", {"reason": "test"})]
    skipped = {
        "type": "tool_result",
        "tool_use_id": "toolu_01Kyoto",
        "content": "Skipped: a before_tool_call hook did not let this call run: "
        "lookups are off today.",
        "is_error": True,
    }
    assert _turns(run.bodies[1])[1:] == [
        ASSISTANT,
        {"role": "user", "content": [skipped, EXPLODE_MARKED]},
    ]


async def test_paused_run_resumes_from_json_with_the_signature_intact() -> None:
    run = await run_paused_then_resumed("anthropic", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert SIGNATURE in run.state_json
    assert [name for name, _ in run.desk.ran] == ["lookup", "explode"]
    assert len(run.bodies) == 2
    assert _turns(run.bodies[1])[1:] == [
        ASSISTANT,
        {"role": "user", "content": [LOOKUP_RESULT, EXPLODE_MARKED]},
    ]
