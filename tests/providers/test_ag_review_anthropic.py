"""Adversarial probes of the Anthropic depth work (issue #20): what goes back, and where.

Citations, a call made from code with its caller, the code-execution container and a
compaction block, after a JSON round trip of the history, sent to the same model, another
Claude model and every other provider: Anthropic's own objects reach Anthropic only.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_anthropic_support import (
    assemble,
    block_delta,
    block_start,
    block_stop,
    check_invariants,
    message_start,
    recorded_response,
    replay,
    sse,
)

from llm_worker.messages import (
    Message,
    Origin,
    ProviderPart,
    Request,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
)
from llm_worker.providers._anthropic_request import build_body as anthropic_body
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.providers._openai_responses_request import build_body as responses_body
from llm_worker.testing import WireResponse

pytestmark = pytest.mark.anyio

MODEL = "claude-test"
ORIGIN = Origin("anthropic", MODEL)
FUTURE = "2999-01-01T00:00:00Z"

# Strings only Anthropic's own objects hold: a citation's kind and index, the caller's
# server call, the container, the compaction's opaque content and signature.
_ANTHROPIC_ONLY = (
    "web_search_result_location",
    "encrypted_index",
    "srvtoolu_1",
    "container_1",
    "ENC1",
    "SIG1",
)


def _message_end(delta: dict[str, Any]) -> str:
    end = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 1}}
    return sse(end) + sse({"type": "message_stop"})


def _code_call_and_compaction() -> str:
    call = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": {"key": "a"},
        "caller": {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"},
    }
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution"}
    return (
        message_start()
        + block_start(0, {"type": "compaction", "content": "summary"})
        + block_delta(0, {"type": "compaction_delta", "encrypted_content": "ENC1"})
        + block_delta(0, {"type": "signature_delta", "signature": "SIG1"})
        + block_stop(0)
        + block_start(1, {**server, "input": {"code": "run()"}})
        + block_stop(1)
        + block_start(2, call)
        + block_stop(2)
        + _message_end(
            {"stop_reason": "tool_use", "container": {"id": "container_1", "expires_at": FUTURE}}
        )
    )


async def _answer(body: str | WireResponse) -> Message:
    events, error, _ = await replay(body if isinstance(body, WireResponse) else WireResponse(body))
    assert error is None, error
    check_invariants(events)
    return assemble(events, ORIGIN)


async def _history() -> list[Message]:
    searched = await _answer(recorded_response("web_search_citations"))
    coded = await _answer(_code_call_and_compaction())
    history = [
        Message.user("weather?"),
        searched,
        Message.user("now run it"),
        coded,
        Message("user", [ToolResultPart("toolu_1", "42", name="lookup")]),
    ]
    return messages_from_json(messages_to_json(history))  # as a stored conversation


async def test_after_a_json_round_trip_the_same_model_gets_all_of_it_back() -> None:
    sent = anthropic_body(Request(await _history()), model=MODEL)
    text = orjson.dumps(sent).decode()
    assert all(marker in text for marker in _ANTHROPIC_ONLY)
    assert sent["container"] == "container_1"
    coded = sent["messages"][3]["content"]
    assert [b["type"] for b in coded] == ["compaction", "server_tool_use", "tool_use"]
    assert coded[2]["caller"] == {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}


@pytest.mark.parametrize("target", ["claude-opus-4-6", "openai_chat", "openai_responses", "gemini"])
async def test_anthropic_objects_never_reach_another_model_or_provider(target: str) -> None:
    request = Request(await _history())
    if target == "openai_chat":
        sent = build_chat_body(request, "gpt-5")
    elif target == "openai_responses":
        sent = responses_body(request, model="gpt-5")
    elif target == "gemini":
        sent = gemini_body(request, "gemini-2.5-flash")
    else:
        sent = anthropic_body(request, model=target)
    text = orjson.dumps(sent).decode()
    leaked = [marker for marker in _ANTHROPIC_ONLY if marker in text and marker != "container_1"]
    assert leaked == []
    if target != "claude-opus-4-6":
        assert "container_1" not in text  # the container is the Anthropic account's


async def test_an_empty_compaction_summary_piece_is_not_sent_as_empty_content() -> None:
    # The API refuses `content: ""` on a compaction block (null means "no summary").
    stream = (
        message_start()
        + block_start(0, {"type": "compaction", "content": None})
        + block_delta(0, {"type": "compaction_delta", "content": ""})
        + block_delta(0, {"type": "compaction_delta", "encrypted_content": "ENC1"})
        + block_stop(0)
        + _message_end({"stop_reason": "compaction"})
    )
    answer = await _answer(stream)
    assert answer.content == [
        ProviderPart(
            {"type": "compaction", "content": None, "encrypted_content": "ENC1"}, origin=ORIGIN
        )
    ]
