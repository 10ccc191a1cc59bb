"""What the Messages API sends and expects that the client used to drop (issue #20).

Citations (streamed and sent back), the code-execution container and a call's `caller`,
compaction blocks and their usage, the response's id and model, the matched stop sequence, a
refusal's details, the cache-write split and server-tool counts, strict tools, the parallel
tool-call switch and the effort levels per model family. Recorded streams where one exists,
otherwise streams in the shape of the official SDK's types.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_anthropic_support import (
    TIMEOUT,
    assemble,
    block_delta,
    block_start,
    block_stop,
    check_invariants,
    message_start,
    recorded_response,
    replay,
    sse,
    sse_payloads,
)

from llm_worker import RunResult, RunStatus, Worker, tool
from llm_worker.errors import ConfigurationError
from llm_worker.events import (
    BlockDelta,
    BlockStop,
    CitationDelta,
    Event,
    ResponseStatus,
    StatusEvent,
    StopReason,
    UsageEvent,
)
from llm_worker.messages import (
    Citation,
    Message,
    Origin,
    ProviderPart,
    Request,
    SpecificTool,
    TextPart,
    ThinkingConfig,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers import AnthropicClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import ScriptedResponse, WireResponse, WireServer
from llm_worker.testing._wire_anthropic import encode
from support.recorded import load
from support.sdk_types import mismatches

pytestmark = pytest.mark.anyio

API = "anthropic_messages"
MODEL = "claude-test"
ORIGIN = Origin("anthropic", MODEL)
FUTURE = "2999-01-01T00:00:00Z"


def _body(request: Request, model: str = MODEL) -> dict[str, Any]:
    return AnthropicClient(model=model, api_key="k").build_body(request)


def _stop(events: list[Event]) -> BlockStop:
    return [e for e in events if isinstance(e, BlockStop)][-1]


def _usage(events: list[Event]) -> UsageEvent:
    usage = UsageEvent()
    for event in events:
        if isinstance(event, UsageEvent):
            usage = usage.updated(event)
    return usage


def _message_end(delta: dict[str, Any], usage: dict[str, Any] | None = None) -> str:
    payload = {"type": "message_delta", "delta": delta, "usage": usage or {"output_tokens": 5}}
    return sse(payload) + sse({"type": "message_stop"})


def _recorded_citations(name: str) -> list[list[dict[str, Any]]]:
    """The citations of each cited text block, read from the recording's JSON."""
    cited: dict[int, list[dict[str, Any]]] = {}
    for payload in sse_payloads(load(API, name)["response"]["body"]):
        delta = payload.get("delta", {})
        if payload["type"] == "content_block_delta" and delta["type"] == "citations_delta":
            cited.setdefault(payload["index"], []).append(delta["citation"])
    return [cited[i] for i in sorted(cited)]


# -- citations ------------------------------------------------------------------------------
async def test_recorded_web_search_citations_reach_their_text_parts() -> None:
    events, error, _ = await replay(recorded_response("web_search_citations"))
    assert error is None
    check_invariants(events)
    want = _recorded_citations("web_search_citations")
    assert len(want) == 5
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    streamed = [d.citation.data for d in deltas if isinstance(d, CitationDelta)]
    assert streamed == [c for block in want for c in block]
    message = assemble(events, ORIGIN)
    cited = [p for p in message.content if isinstance(p, TextPart) and p.citations]
    assert [[c.data for c in p.citations] for p in cited] == want
    first = cited[0].citations[0]
    assert first.url == "https://www.wunderground.com/hourly/us/ca/san-francisco"
    assert first.title == want[0][0]["title"]
    assert first.cited_text == want[0][0]["cited_text"]
    assert first.origin == ORIGIN
    assert cited[0].text.startswith("Today (November 15, 2025)")


async def test_citations_go_back_on_their_text_blocks_to_the_same_model_only() -> None:
    events, _, _ = await replay(recorded_response("web_search_citations"))
    history = [Message.user("weather?"), assemble(events, ORIGIN), Message.user("thanks")]
    sent = _body(Request(history))["messages"][1]["content"]
    texts = [b for b in sent if b["type"] == "text"]
    assert [b["citations"] for b in texts if "citations" in b] == _recorded_citations(
        "web_search_citations"
    )
    # Another model has not got the search results the citations point into: text only.
    other = _body(Request(history), model="claude-opus-4-6")["messages"][1]["content"]
    assert all(set(b) == {"type", "text"} for b in other)


async def test_a_citation_goes_back_with_the_fields_the_api_takes() -> None:
    recorded = {
        "type": "char_location",
        "cited_text": "The grass is green.",
        "document_index": 0,
        "document_title": "Facts",
        "start_char_index": 0,
        "end_char_index": 19,
        "file_id": "file_011",  # in the response type, not in the request type
    }
    body = (
        message_start()
        + block_start(0, {"type": "text", "text": "", "citations": [recorded]})
        + block_delta(0, {"type": "text_delta", "text": "Grass is green."})
        + block_stop(0)
        + _message_end({"stop_reason": "end_turn"})
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events)
    part = assemble(events, ORIGIN).content[0]
    assert isinstance(part, TextPart)
    assert part.citations == [
        Citation(recorded, title="Facts", cited_text="The grass is green.", origin=ORIGIN)
    ]
    sent = _body(Request([Message.user("q"), Message("assistant", [part])]))
    block = sent["messages"][1]["content"][0]
    assert block["citations"] == [{k: v for k, v in recorded.items() if k != "file_id"}]


def test_a_citation_without_its_nullable_title_gets_null() -> None:
    data = {"type": "web_search_result_location", "cited_text": "x", "url": "u"}
    data["encrypted_index"] = "E1"
    part = TextPart("y", citations=[Citation(data, origin=ORIGIN)])
    sent = _body(Request([Message.user("q"), Message("assistant", [part])]))
    assert sent["messages"][1]["content"][0]["citations"] == [{**data, "title": None}]


# -- code execution: the container and the caller ------------------------------------------
async def test_the_recorded_container_is_kept_for_the_next_request() -> None:
    events, error, _ = await replay(recorded_response("code_execution_server_tool"))
    assert error is None
    check_invariants(events)
    kept = assemble(events, ORIGIN).content[-1]
    assert kept == ProviderPart(
        {
            "id": "container_011CaNRFAbjdPf4rmBarZzqQ",
            "expires_at": "2026-04-24T11:13:36.730129Z",
            "type": "container",
        },
        origin=ORIGIN,
    )
    assert _stop(events).stop_reason is StopReason.END_TURN


def _code_call_stream() -> str:
    """Programmatic tool calling: code execution calls a client tool from its code."""
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution"}
    call = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": {},
        "caller": {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"},
    }
    container = {"id": "container_1", "expires_at": FUTURE}
    return (
        message_start()
        + block_start(0, {**server, "input": {}})
        + block_delta(0, {"type": "input_json_delta", "partial_json": '{"code": "run()"}'})
        + block_stop(0)
        + block_start(1, call)
        + block_delta(1, {"type": "input_json_delta", "partial_json": '{"key": "a"}'})
        + block_stop(1)
        + _message_end({"stop_reason": "tool_use", "container": container})
    )


async def test_a_call_from_code_goes_back_with_its_caller_and_the_container() -> None:
    events, error, _ = await replay(WireResponse(_code_call_stream()))
    assert error is None
    check_invariants(events)
    answer = assemble(events, ORIGIN)
    call = answer.tool_uses[0]
    assert call.caller == {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}
    result = Message("user", [ToolResultPart("toolu_1", "42")])
    sent = _body(Request([Message.user("go"), answer, result]))
    assert sent["container"] == "container_1"
    blocks = sent["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["server_tool_use", "tool_use"]  # not the container
    assert blocks[1]["caller"] == call.caller
    # Another model gets neither the code-execution call nor a caller naming it.
    other = _body(Request([Message.user("go"), answer, result]), model="claude-opus-4-6")
    assert "caller" not in other["messages"][1]["content"][0]
    assert other["container"] == "container_1"  # the container is the account's


def test_a_direct_call_and_an_expired_container_add_nothing() -> None:
    expired = ProviderPart(
        {"type": "container", "id": "c_old", "expires_at": "2001-01-01T00:00:00Z"},
        origin=ORIGIN,
    )
    answer = Message("assistant", [ToolUsePart("t1", "f", {}), expired])
    sent = _body(Request([Message.user("go"), answer, Message.user("next")]))
    assert "container" not in sent
    assert sent["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    ]


def test_only_the_newest_container_goes() -> None:
    def container(name: str) -> Message:
        data = {"type": "container", "id": name, "expires_at": FUTURE}
        return Message("assistant", [TextPart("ok"), ProviderPart(data, origin=ORIGIN)])

    history = [Message.user("a"), container("c1"), Message.user("b"), container("c2")]
    assert _body(Request([*history, Message.user("c")]))["container"] == "c2"


# -- compaction -----------------------------------------------------------------------------


def _compaction_stream(stop_reason: str) -> str:
    return (
        message_start()
        + block_start(0, {"type": "compaction", "content": None})
        + block_delta(0, {"type": "compaction_delta", "content": None})
        + block_delta(0, {"type": "compaction_delta", "encrypted_content": "ENC1"})
        + block_delta(0, {"type": "signature_delta", "signature": "SIG1"})
        + block_stop(0)
        + _message_end({"stop_reason": stop_reason})
    )


async def test_a_compaction_without_summary_is_kept_and_sent_back_verbatim() -> None:
    events, error, _ = await replay(WireResponse(_compaction_stream("compaction")))
    assert error is None  # a null compaction_delta used to fail the answer as malformed
    check_invariants(events)
    stop = _stop(events)
    assert (stop.stop_reason, stop.raw_stop_reason) == (StopReason.COMPACTION, "compaction")
    block = {"type": "compaction", "content": None, "encrypted_content": "ENC1"}
    block["signature"] = "SIG1"
    answer = assemble(events, ORIGIN)
    assert answer.content == [ProviderPart(block, origin=ORIGIN)]
    sent = _body(Request([Message.user("long"), answer]))
    assert sent["messages"][1]["content"] == [block]


async def test_recorded_compaction_usage_counts_the_compaction_iteration() -> None:
    events, error, _ = await replay(recorded_response("compaction_block"))
    assert error is None
    usage = _usage(events)
    # Top level: 181 in, 8 out; the compaction iteration: 100 + 55,096 read, 83 out.
    assert usage.input_tokens == 181 + 100 + 55_096
    assert usage.cache_read_input_tokens == 55_096
    assert usage.output_tokens == 8 + 83
    assert usage.total_tokens == 181 + 100 + 55_096 + 8 + 83
    assert (usage.cache_creation_5m_input_tokens, usage.cache_creation_1h_input_tokens) == (0, 0)


# -- the response, the stop, the usage details ---------------------------------------------
async def test_response_id_model_and_tier_close_the_stream() -> None:
    events, error, _ = await replay(recorded_response("web_search_citations"))
    assert error is None
    assert events[-1] == StatusEvent(
        ResponseStatus.COMPLETED,
        "msg_01TRpkkgb2QsnyjsGSVdRtGr",
        "claude-opus-4-1-20250805",
        "standard",
    )


@pytest.mark.parametrize(
    ("name", "searches"), [("web_search_citations", 1), ("pause_turn_web_search", 10)]
)
async def test_server_tool_requests_are_counted(name: str, searches: int) -> None:
    events, error, _ = await replay(recorded_response(name))
    assert error is None
    usage = _usage(events)
    assert (usage.web_search_requests, usage.web_fetch_requests) == (
        searches,
        0 if name == "pause_turn_web_search" else None,
    )


async def test_the_matched_stop_sequence_is_on_the_last_stop() -> None:
    events, error, _ = await replay(recorded_response("stop_sequence_with_prefill"))
    assert error is None
    stop = _stop(events)
    assert (stop.stop_reason, stop.stop_sequence) == (StopReason.STOP_SEQUENCE, "```")


async def test_a_refusal_keeps_its_explanation_and_category() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Exploit code."}
    body = (
        message_start()
        + block_start(0, {"type": "text", "text": ""})
        + block_stop(0)
        + _message_end({"stop_reason": "refusal", "stop_sequence": None, "stop_details": details})
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    stop = _stop(events)
    assert stop.stop_reason is StopReason.REFUSAL
    assert stop.stop_message == "Exploit code. (category: cyber)"


async def test_cache_writes_are_split_by_lifetime() -> None:
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 700,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 500},
        "output_tokens": 1,
    }
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": usage}}
    body = (
        sse(start)
        + block_start(0, {"type": "text", "text": "hi"})
        + block_stop(0)
        + _message_end({"stop_reason": "end_turn"}, {"output_tokens": 4})
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    got = _usage(events)
    assert (got.cache_creation_5m_input_tokens, got.cache_creation_1h_input_tokens) == (200, 500)
    assert (got.input_tokens, got.output_tokens) == (703, 4)


# -- request settings -----------------------------------------------------------------------

_SPEC = ToolSpec("get", "Get it.", {"type": "object", "properties": {}})


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        (None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("auto", {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", {"type": "any", "disable_parallel_tool_use": True}),
        (SpecificTool("get"), {"type": "tool", "name": "get", "disable_parallel_tool_use": True}),
        ("none", {"type": "none"}),  # takes no other field
    ],
)
def test_no_parallel_tool_calls_disables_parallel_tool_use(choice: Any, sent: Any) -> None:
    request = Request([Message.user("q")], tools=[_SPEC], tool_choice=choice)
    request.parallel_tool_calls = False
    assert _body(request)["tool_choice"] == sent


def test_parallel_tool_calls_allowed_leaves_the_default() -> None:
    request = Request([Message.user("q")], tools=[_SPEC], parallel_tool_calls=True)
    assert "tool_choice" not in _body(request)


def test_a_tool_choice_from_options_without_type_gets_auto() -> None:
    options = {"tool_choice": {"disable_parallel_tool_use": True}}
    request = Request([Message.user("q")], tools=[_SPEC], options=options)
    assert _body(request)["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("model", "effort", "thinking", "sent_effort"),
    [
        # Claude 5 and Opus 4.7+: adaptive only, every level; `none` is the lowest.
        ("claude-opus-5", "xhigh", "adaptive", "xhigh"),
        ("claude-sonnet-5-20260101", "max", "adaptive", "max"),
        ("claude-opus-4-7", "none", "adaptive", "low"),
        ("claude-mythos-preview", "xhigh", "adaptive", "high"),  # no xhigh there
        # 4.6: adaptive, max but no xhigh; `none` turns thinking off.
        ("claude-opus-4-6", "xhigh", "adaptive", "high"),
        ("claude-sonnet-4-6", "max", "adaptive", "max"),
        ("claude-sonnet-4-6", "none", None, None),
        ("claude-sonnet-4-6", "minimal", "adaptive", "low"),
        # Opus 4.5: a budget, and low / medium / high.
        ("claude-opus-4-5-20251101", "max", "enabled", "high"),
        # No effort at all: a budget only.
        ("claude-sonnet-4-5-20250929", "high", "enabled", None),
        ("claude-haiku-4-5", "low", "enabled", None),
        ("claude-3-7-sonnet-20250219", "medium", "enabled", None),
        # A name this library cannot read: as asked.
        ("claude-test", "max", "adaptive", "max"),
        ("claude-test", "none", None, None),
    ],
)
def test_effort_levels_per_model_family(
    model: str, effort: Any, thinking: str | None, sent_effort: str | None
) -> None:
    sent = _body(Request([Message.user("q")], thinking=ThinkingConfig(effort=effort)), model)
    assert sent.get("thinking", {}).get("type") == thinking
    assert sent.get("output_config") == ({"effort": sent_effort} if sent_effort else None)


@pytest.mark.parametrize(("effort", "budget"), [("low", 1024), ("high", 16384), ("max", 32768)])
def test_an_effort_becomes_a_budget_on_a_model_without_effort(effort: Any, budget: int) -> None:
    request = Request([Message.user("q")], thinking=ThinkingConfig(effort=effort))
    sent = _body(request, "claude-sonnet-4-5")
    assert sent["thinking"]["budget_tokens"] == budget
    assert sent["max_tokens"] > budget


def test_a_budget_on_a_model_that_only_thinks_adaptively_becomes_adaptive() -> None:
    request = Request([Message.user("q")], thinking=ThinkingConfig(budget_tokens=2048))
    sent = _body(request, "claude-opus-5")
    assert sent["thinking"] == {"type": "adaptive", "display": "summarized"}


def test_a_refused_budget_is_still_refused_before_sending() -> None:
    request = Request([Message.user("q")], thinking=ThinkingConfig(budget_tokens=100))
    with pytest.raises(ConfigurationError, match="budget_tokens=100"):
        _body(request, "claude-sonnet-4-5")


# -- the Worker -----------------------------------------------------------------------------


def _text_answer(text: str) -> str:
    return (
        message_start()
        + block_start(0, {"type": "text", "text": ""})
        + block_delta(0, {"type": "text_delta", "text": text})
        + block_stop(0)
        + _message_end({"stop_reason": "end_turn"})
    )


async def _run(worker_options: dict[str, Any], *bodies: str) -> tuple[RunResult, WireServer]:
    async with WireServer([WireResponse(b) for b in bodies]) as server:
        client = AnthropicClient(
            model=MODEL, api_key="k", base_url=server.base_url, retry=RetryPolicy.disabled()
        )
        worker = Worker(client, **worker_options)
        try:
            with anyio.fail_after(TIMEOUT):
                result = await worker.run("go")
        finally:
            await client.aclose()
    return result, server


async def test_the_worker_sends_a_compacted_answer_back_and_goes_on() -> None:
    result, server = await _run(  # caching off: the block as sent back, without a breakpoint
        {"prompt_cache": False}, _compaction_stream("compaction"), _text_answer("Hello!")
    )
    assert (result.status, result.text, result.requests) == (RunStatus.FINISHED, "Hello!", 2)
    second = server.requests[1].json()["messages"]
    # The compaction goes back last, as it came: the answer continues from it.
    assert second[-1] == {
        "role": "assistant",
        "content": [
            {
                "type": "compaction",
                "content": None,
                "encrypted_content": "ENC1",
                "signature": "SIG1",
            }
        ],
    }


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_a_call_made_from_code_runs_and_goes_back_with_caller_and_container() -> None:
    result, server = await _run(
        {"tools": [lookup], "parallel_tool_calls": False},
        _code_call_stream(),
        _text_answer("The value is known."),
    )
    assert result.text == "The value is known."
    first, second = (r.json() for r in server.requests)
    assert first["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert "container" not in first
    assert second["container"] == "container_1"  # without it: 400 "container_id is required"
    call = second["messages"][1]["content"][1]
    assert call["caller"] == {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}
    assert second["messages"][2]["content"][0]["content"] == "value of a"


async def test_a_scripted_compaction_stop_goes_over_the_wire() -> None:
    script = ScriptedResponse([TextPart("Summary so far.")], stop_reason=StopReason.COMPACTION)
    events, error, _ = await replay(WireResponse(encode(script, model=MODEL)))
    assert error is None
    assert _stop(events).stop_reason is StopReason.COMPACTION


# -- the request types of the official SDK --------------------------------------------------


def _full_history() -> list[Message]:
    web = {"type": "web_search_result_location", "cited_text": "x", "url": "https://u"}
    web.update(title="T", encrypted_index="E")
    char = {"type": "char_location", "cited_text": "g", "document_index": 0}
    char.update(document_title=None, start_char_index=0, end_char_index=1, file_id="f")
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution"}
    container = {"type": "container", "id": "container_1", "expires_at": FUTURE}
    caller = {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}
    answer = Message(
        "assistant",
        [
            TextPart("a", citations=[Citation(web, origin=ORIGIN), Citation(char, origin=ORIGIN)]),
            ProviderPart({**server, "input": {"code": "x"}}, origin=ORIGIN),
            ToolUsePart("toolu_1", "lookup", {"k": 1}, origin=ORIGIN, caller=caller),
            ProviderPart(container, origin=ORIGIN),
        ],
    )
    return [Message.user("q"), answer, Message("user", [ToolResultPart("toolu_1", "r")])]


@pytest.mark.parametrize(
    ("model", "settings"),
    [
        (MODEL, {"parallel_tool_calls": False, "thinking": ThinkingConfig(effort="max")}),
        (MODEL, {"tool_choice": "required", "parallel_tool_calls": False}),
        (MODEL, {"options": {"tool_choice": {"disable_parallel_tool_use": True}}}),
        ("claude-opus-5", {"thinking": ThinkingConfig(effort="xhigh")}),
        ("claude-sonnet-4-5", {"thinking": ThinkingConfig(effort="high")}),
        ("claude-sonnet-4-6", {"thinking": ThinkingConfig(effort="none")}),
    ],
)
def test_bodies_fit_the_sdk_request_types(model: str, settings: dict[str, Any]) -> None:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    schema = {"type": "object", "properties": {"k": {"type": "integer"}}}
    tools = [ToolSpec("lookup", "Look up.", schema, strict=True)]
    body = _body(Request(_full_history(), tools=tools, **settings), model)
    assert mismatches(body, MessageCreateParamsStreaming) == []
    assert body["container"] == "container_1"


def test_a_compaction_body_fits_the_sdk_beta_request_types() -> None:
    from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming

    block = {"type": "compaction", "content": None, "encrypted_content": "E", "signature": "S"}
    answer = Message("assistant", [ProviderPart(block, origin=ORIGIN)])
    body = _body(Request([Message.user("q"), answer, Message.user("go")]))
    assert mismatches(body, MessageCreateParamsStreaming) == []


def test_the_type_check_sees_what_the_api_refuses() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    body = _body(Request(_full_history()))
    body["tool_choice"] = {"disable_parallel_tool_use": True}
    body["messages"][1]["content"][0]["citations"][1]["file_id"] = "f"
    assert mismatches(body, MessageCreateParamsStreaming) == [
        "$.messages[1].content: not str",  # no content type takes that citation
        "$.tool_choice.type: required by ToolChoiceAutoParam",
    ]
