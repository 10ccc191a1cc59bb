"""The Worker over the Gemini wire: tool loop, skip, pause / resume.

The scripted model streams real `streamGenerateContent?alt=sse` chunks (a thought summary,
text, two whole `functionCall` parts without ids, the first carrying the `thoughtSignature`,
as Gemini sends them); the real `GeminiClient` builds each request. Gemini pairs results with
calls by name and order: the `functionResponse` parts must open the next user content in call
order, a failed or skipped call answered under `error`; the signature must come back on the
part that carried it, and the unsigned thought summary must not come back at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_worker import Origin, RunStatus, TextPart, ThinkingPart, ToolUsePart
from support.e2e import (
    FINAL_TEXT,
    calls_of,
    run_paused_then_resumed,
    run_tool_loop,
    run_with_skip,
)
from support.wire_bodies import WireCall, WireResult

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

MODEL = "gemini-2.5-flash"
SIGNATURE = "CikB0e2Kbw5tJ9dwYB9m1I9W28H1signature=="
FIRST = [
    ThinkingPart("**Planning**\n\nI will look Kyoto up and try explode."),
    TextPart("Let me check."),
    ToolUsePart("", "lookup", {"city": "Kyoto"}, signature=SIGNATURE),
    ToolUsePart("", "explode", {"reason": "test"}),
]
MODEL_TURN = {
    "role": "model",
    "parts": [
        {"text": "Let me check."},
        {
            "functionCall": {"name": "lookup", "args": {"city": "Kyoto"}},
            "thoughtSignature": SIGNATURE,
        },
        {"functionCall": {"name": "explode", "args": {"reason": "test"}}},
    ],
}
LOOKUP_RESULT = {
    "functionResponse": {"name": "lookup", "response": {"output": "Kyoto: 21 C, clear"}}
}
EXPLODE_RESULT = {
    "functionResponse": {"name": "explode", "response": {"error": "RuntimeError: boom: test"}}
}


def _contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["contents"]


async def test_tool_loop_sends_the_signature_and_responses_in_call_order() -> None:
    run = await run_tool_loop("gemini", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert run.result.requests == 2
    usage = run.result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (330, 57, 387)
    first, second = run.bodies
    assert _contents(first) == [
        {"role": "user", "parts": [{"text": "What is the weather in Kyoto?"}]}
    ]
    assert second["generationConfig"] == {
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}
    }
    names = [d["name"] for d in second["tools"][0]["functionDeclarations"]]
    assert names == ["lookup", "explode"]
    assert _contents(second)[1:] == [
        MODEL_TURN,
        {"role": "user", "parts": [LOOKUP_RESULT, EXPLODE_RESULT]},
    ]
    assert run.steps[0].calls == [
        WireCall(None, "lookup", {"city": "Kyoto"}, SIGNATURE),
        WireCall(None, "explode", {"reason": "test"}),
    ]
    assert run.steps[0].results == [
        WireResult(None, "lookup", "Kyoto: 21 C, clear", False),
        WireResult(None, "explode", "RuntimeError: boom: test", True),
    ]
    # Gemini sends no call ids: the client made stable ones, and the results answer them.
    calls = calls_of(run.history)
    assert [c.id for c in calls] == ["gemini_call_0", "gemini_call_1"]
    assert [r.tool_use_id for r in run.history[2].tool_results] == [
        "gemini_call_0",
        "gemini_call_1",
    ]
    assert calls[0].origin == Origin("gemini", MODEL)


async def test_skipped_call_is_answered_under_error() -> None:
    run = await run_with_skip("gemini", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.desk.ran == [("explode", {"reason": "test"})]
    skipped = {
        "functionResponse": {
            "name": "lookup",
            "response": {
                "error": "Skipped: a before_tool_call hook did not let this call run: "
                "lookups are off today."
            },
        }
    }
    assert _contents(run.bodies[1])[1:] == [
        MODEL_TURN,
        {"role": "user", "parts": [skipped, EXPLODE_RESULT]},
    ]


async def test_paused_run_resumes_from_json_with_the_signature_intact() -> None:
    run = await run_paused_then_resumed("gemini", FIRST, model=MODEL)

    assert run.result.status is RunStatus.FINISHED
    assert run.result.text == FINAL_TEXT
    assert SIGNATURE in run.state_json
    assert [name for name, _ in run.desk.ran] == ["lookup", "explode"]
    assert len(run.bodies) == 2
    assert _contents(run.bodies[1])[1:] == [
        MODEL_TURN,
        {"role": "user", "parts": [LOOKUP_RESULT, EXPLODE_RESULT]},
    ]
