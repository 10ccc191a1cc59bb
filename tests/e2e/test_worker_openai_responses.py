"""The Worker over the OpenAI Responses wire: tool loop, skip, pause / resume.

The scripted model streams real Responses SSE (a `reasoning` item with a summary and
`encrypted_content`, a `message` item, two `function_call` items); the real
`OpenAIResponsesClient` builds each request. The runs use `store: false`, where OpenAI keeps
nothing: the reasoning item must come back whole (id, summary, encrypted content) and be
followed by the items it produced, named by their ids, or the API rejects the request.
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

MODEL = "gpt-5-mini"
ENCRYPTED = "gAAAAABoEncrypted-reasoning-of-the-model=="
FIRST = [
    ThinkingPart(
        "Kyoto's weather: call lookup; also try explode.", signature=ENCRYPTED, item_id="rs_01"
    ),
    TextPart("Let me check.", item_id="msg_01"),
    ToolUsePart("call_Kyoto", "lookup", {"city": "Kyoto"}, item_id="fc_01"),
    ToolUsePart("call_Boom", "explode", {"reason": "test"}, item_id="fc_02"),
]
ASSISTANT_ITEMS = [
    {
        "type": "reasoning",
        "id": "rs_01",
        "summary": [
            {"type": "summary_text", "text": "Kyoto's weather: call lookup; also try explode."}
        ],
        "encrypted_content": ENCRYPTED,
    },
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_01",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
    },
    {
        "type": "function_call",
        "id": "fc_01",
        "call_id": "call_Kyoto",
        "name": "lookup",
        "arguments": '{"city":"Kyoto"}',
    },
    {
        "type": "function_call",
        "id": "fc_02",
        "call_id": "call_Boom",
        "name": "explode",
        "arguments": '{"reason":"test"}',
    },
]
LOOKUP_RESULT = {
    "type": "function_call_output",
    "call_id": "call_Kyoto",
    "output": "Kyoto: 21 C, clear",
}
EXPLODE_RESULT = {
    "type": "function_call_output",
    "call_id": "call_Boom",
    "output": "RuntimeError: boom: test",
}


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["input"]


async def test_tool_loop_replays_the_reasoning_item_with_its_encrypted_content() -> None:
    run = await run_tool_loop("openai_responses", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert run.result.requests == 2
    usage = run.result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (330, 57, 387)
    first, second = run.bodies
    assert _items(first) == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "What is the weather in Kyoto?"}],
        }
    ]
    for body in (first, second):
        assert body["store"] is False
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert [t["name"] for t in second["tools"]] == ["lookup", "explode"]
    assert _items(second)[1:] == [*ASSISTANT_ITEMS, LOOKUP_RESULT, EXPLODE_RESULT]
    assert run.steps[0].results == [
        WireResult("call_Kyoto", None, "Kyoto: 21 C, clear", None),
        WireResult("call_Boom", None, "RuntimeError: boom: test", None),
    ]
    own = Origin("openai_responses", MODEL)
    assert [getattr(p, "origin", None) for p in run.history[1].content] == [own] * 4


async def test_skipped_call_is_answered_with_a_function_call_output() -> None:
    run = await run_with_skip("openai_responses", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.desk.ran == [("explode", {"reason": "test"})]
    skipped = {
        "type": "function_call_output",
        "call_id": "call_Kyoto",
        "output": "Skipped: a before_tool_call hook did not let this call run: "
        "lookups are off today.",
    }
    assert _items(run.bodies[1])[1:] == [*ASSISTANT_ITEMS, skipped, EXPLODE_RESULT]


async def test_paused_run_resumes_from_json_with_the_reasoning_item_intact() -> None:
    run = await run_paused_then_resumed("openai_responses", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert ENCRYPTED in run.state_json
    assert [name for name, _ in run.desk.ran] == ["lookup", "explode"]
    assert len(run.bodies) == 2
    assert _items(run.bodies[1])[1:] == [*ASSISTANT_ITEMS, LOOKUP_RESULT, EXPLODE_RESULT]
