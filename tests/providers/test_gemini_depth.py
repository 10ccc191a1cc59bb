"""What Gemini sends and expects that the client used to drop (issue #20).

Grounding (citations from its supports, the search entry point kept), URL context, citation
sources, log probabilities, tool-call failures and `finishMessage`, function-call ids echoed
in their responses, the response id and model version, and the thinking levels per model
family. Recorded streams where one exists, otherwise chunks in the shape of the official
SDK's types.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_gemini_support import (
    TIMEOUT,
    assemble,
    check_invariants,
    recorded_chunks,
    recording_response,
    replay,
)

from llm_worker import RunResult, RunStatus, Worker, tool
from llm_worker.events import (
    BlockDelta,
    BlockStop,
    CitationDelta,
    Event,
    ResponseStatus,
    StatusEvent,
    StopReason,
    TextDelta,
    TokenLogprob,
)
from llm_worker.messages import (
    Citation,
    Message,
    Origin,
    Part,
    ProviderPart,
    Request,
    TextPart,
    ThinkingConfig,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers._gemini_request import build_body
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import ScriptedResponse, WireResponse, WireServer
from llm_worker.testing._wire_gemini import encode
from llm_worker.worker._turn import MALFORMED_CALL_RETRIES
from support.recorded import load

pytestmark = pytest.mark.anyio

API = "gemini"
MODEL = "gemini-2.5-flash"  # the model the support's client asks for
ORIGIN = Origin("gemini", MODEL)


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def _chunk(parts: list[dict[str, Any]], finish: str | None = None, **more: Any) -> Any:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    candidate.update(more)
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def _stop(events: list[Event]) -> BlockStop:
    return [e for e in events if isinstance(e, BlockStop)][-1]


def _grounding(name: str) -> dict[str, Any]:
    """The recording's final grounding metadata, read from its JSON."""
    found: dict[str, Any] = {}
    for chunk in recorded_chunks(load(API, name)["response"]["body"]):
        for candidate in chunk.get("candidates", []):
            found.update({k: v for k, v in candidate.get("groundingMetadata", {}).items() if v})
    return found


async def _answer(response: WireResponse) -> tuple[list[Event], Message]:
    events, error, _ = await replay(response)
    assert error is None, error
    check_invariants(events, error)
    return events, assemble(events, ORIGIN)


# -- grounding and URL context --------------------------------------------------------------
async def test_recorded_search_grounding_gives_citations_with_their_spans() -> None:
    _, message = await _answer(recording_response("google_search_grounding"))
    text = message.content[0]
    assert isinstance(text, TextPart)
    grounding = _grounding("google_search_grounding")
    supports = grounding["groundingSupports"]
    want = sum(len(s["groundingChunkIndices"]) for s in supports)
    assert len(text.citations) == want == 9
    for citation in text.citations:
        support = citation.data["groundingSupport"]
        assert citation.start_index is not None and citation.end_index is not None
        # A character span of the part's text: the supported sentence (° is two bytes).
        assert text.text[citation.start_index : citation.end_index] == support["segment"]["text"]
        assert citation.data["groundingChunk"] in grounding["groundingChunks"]
        assert citation.url == citation.data["groundingChunk"]["web"]["uri"]
        assert citation.origin == ORIGIN
    first = text.citations[0]
    assert first.url == grounding["groundingChunks"][0]["web"]["uri"]
    assert first.title == "Weather information for San Francisco, CA, US"


async def test_the_search_entry_point_is_kept_and_never_sent_back() -> None:
    _, message = await _answer(recording_response("google_search_grounding"))
    kept = message.content[-1]
    assert isinstance(kept, ProviderPart)
    assert kept.data == {"groundingMetadata": _grounding("google_search_grounding")}
    rendered = kept.data["groundingMetadata"]["searchEntryPoint"]["renderedContent"]
    assert rendered.startswith("<style>")
    history = [Message.user("weather?"), message, Message.user("and tomorrow?")]
    body = build_body(Request(history), MODEL)
    assert body["contents"][1]["parts"] == [{"text": message.text}]


async def test_recorded_url_context_is_kept_with_its_grounding() -> None:
    _, message = await _answer(recording_response("url_context_tool"))
    text, kept = message.content
    assert isinstance(text, TextPart) and isinstance(kept, ProviderPart)
    assert kept.data["urlContextMetadata"] == {
        "urlMetadata": [
            {
                "retrievedUrl": "https://ai.pydantic.dev",
                "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
            }
        ]
    }
    [citation] = text.citations
    assert (citation.url, citation.title) == ("https://ai.pydantic.dev", "Pydantic AI")
    assert (citation.start_index, citation.end_index) == (0, 37)


async def test_recorded_file_search_quotes_the_retrieved_passage() -> None:
    _, message = await _answer(recording_response("file_search_tool"))
    text = next(p for p in message.content if isinstance(p, TextPart))
    first = text.citations[0]
    assert first.cited_text == (
        "Paris is the capital of France. The Eiffel Tower is a famous landmark in Paris."
    )
    assert text.text[first.start_index : first.end_index] == "The capital of France is Paris"


async def test_citation_sources_become_citations_with_character_spans() -> None:
    # Byte offsets: "Grüße " is 8 bytes (6 characters), "Köln." 6 bytes (5 characters).
    source = {"startIndex": 8, "endIndex": 14, "uri": "https://x.example", "license": "mit"}
    vertex = {"startIndex": 0, "endIndex": 6, "uri": "https://y.example", "title": "Y"}
    body = _sse(
        _chunk([{"text": "Grüße "}], citationMetadata={"citationSources": [source]}),
        _chunk(
            [{"text": "Köln."}],
            "STOP",
            citationMetadata={"citationSources": [source], "citations": [vertex]},
        ),
    )
    events, message = await _answer(WireResponse(body))
    [text] = message.content
    assert isinstance(text, TextPart)
    assert text.citations == [
        Citation(source, url="https://x.example", start_index=6, end_index=11, origin=ORIGIN),
        Citation(
            vertex, url="https://y.example", title="Y", start_index=0, end_index=4, origin=ORIGIN
        ),
    ]
    assert (text.text[6:11], text.text[0:4]) == ("Köln.", "Grüß")
    assert (
        sum(isinstance(e, BlockDelta) and isinstance(e.delta, CitationDelta) for e in events) == 2
    )


# -- log probabilities ----------------------------------------------------------------------
async def test_recorded_logprobs_ride_on_the_text() -> None:
    events, _ = await _answer(recording_response("nonstream_vertex_logprobs"))
    [delta] = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert isinstance(delta, TextDelta)
    assert delta.text == "2 + 2 = 4"
    assert delta.logprobs is not None
    assert [t.token for t in delta.logprobs] == ["2", " +", " ", "2", " =", " ", "4"]
    first = delta.logprobs[0]
    assert first.logprob == pytest.approx(-0.01972555)
    assert first.top[:2] == [("2", pytest.approx(-0.01972555)), ("4", pytest.approx(-4.1320033))]
    assert all(len(t.top) == 5 for t in delta.logprobs)


async def test_logprobs_go_with_the_answer_text_not_the_thoughts() -> None:
    result = {
        "chosenCandidates": [{"token": "Hi", "logProbability": -0.5}],
        "topCandidates": [{"candidates": [{"token": "Hi", "logProbability": -0.5}]}],
    }
    parts = [{"text": "thinking", "thought": True}, {"text": "Hi"}]
    events, _ = await _answer(WireResponse(_sse(_chunk(parts, "STOP", logprobsResult=result))))
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert [getattr(d, "logprobs", None) for d in deltas] == [
        None,
        [TokenLogprob("Hi", -0.5, [("Hi", -0.5)])],
    ]


# -- tool-call failures, finishMessage ------------------------------------------------------


@pytest.mark.parametrize("raw", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
async def test_a_failed_tool_call_is_not_an_answer_and_says_why(raw: str) -> None:
    message = "Malformed function call: print(default_api.lookup(city=Paris))"
    body = _sse({"candidates": [{"finishReason": raw, "index": 0, "finishMessage": message}]})
    events, answer = await _answer(WireResponse(body))
    stop = _stop(events)
    assert (stop.stop_reason, stop.raw_stop_reason) == (StopReason.MALFORMED_TOOL_CALL, raw)
    assert stop.stop_message == message
    assert answer.content == []


async def test_the_recorded_finish_message_is_kept() -> None:
    events, _ = await _answer(recording_response("parallel_function_calls_run_step1"))
    assert _stop(events).stop_message == "Model generated function call(s)."


# -- function-call ids ----------------------------------------------------------------------


async def test_a_call_id_gemini_gave_is_echoed_in_the_function_response() -> None:
    call = {"functionCall": {"id": "fc-7", "name": "lookup", "args": {"q": "x"}}}
    _, answer = await _answer(WireResponse(_sse(_chunk([call], "STOP"))))
    [part] = answer.tool_uses
    assert (part.id, part.item_id) == ("fc-7", "fc-7")
    result = Message("user", [ToolResultPart("fc-7", "42", name="lookup")])
    contents = build_body(Request([Message.user("go"), answer, result]), MODEL)["contents"]
    assert contents[1]["parts"][0]["functionCall"] == {
        "name": "lookup",
        "args": {"q": "x"},
        "id": "fc-7",
    }
    assert contents[2]["parts"][0]["functionResponse"]["id"] == "fc-7"


def test_ids_gemini_did_not_give_are_not_sent() -> None:
    made_up = ToolUsePart("gemini_call_0", "f", {})
    foreign = ToolUsePart("call_1", "g", {}, item_id="fc_9", origin=Origin("openai_responses", "m"))
    results: list[Part] = [ToolResultPart("gemini_call_0", "1"), ToolResultPart("call_1", "2")]
    history = [
        Message.user("go"),
        Message("assistant", [made_up, foreign]),
        Message("user", results),
    ]
    contents = build_body(Request(history), MODEL)["contents"]
    assert [p["functionCall"] for p in contents[1]["parts"]] == [
        {"name": "f", "args": {}},
        {"name": "g", "args": {}},
    ]
    assert all("id" not in p["functionResponse"] for p in contents[2]["parts"])


# -- the response ---------------------------------------------------------------------------
async def test_response_id_and_model_version_close_the_stream() -> None:
    events, _ = await _answer(recording_response("plain_text"))
    assert events[-1] == StatusEvent(
        ResponseStatus.COMPLETED, "w1peaMz6INOvnvgPgYfPiQY", "gemini-2.0-flash-exp"
    )


# -- request settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "effort", "config"),
    [
        # Gemini 3 Pro: low / high only; later Pro models add medium; no Pro turns thinking off.
        ("gemini-3-pro-preview", "medium", {"thinkingLevel": "low"}),
        ("gemini-3-pro-preview", "minimal", {"thinkingLevel": "low"}),
        ("gemini-3-pro-preview", "max", {"thinkingLevel": "high"}),
        ("gemini-3.1-pro-preview", "medium", {"thinkingLevel": "medium"}),
        ("gemini-3.1-pro-preview", "none", {"thinkingLevel": "low"}),
        # Flash: minimal to high.
        ("gemini-3-flash-preview", "none", {"thinkingLevel": "minimal"}),
        ("gemini-3.5-flash", "xhigh", {"thinkingLevel": "high"}),
        # The -latest aliases name Gemini 3+ models: a level, not a budget.
        ("gemini-flash-latest", "minimal", {"thinkingLevel": "minimal"}),
        ("gemini-pro-latest", "medium", {"thinkingLevel": "medium"}),
        ("gemini-flash-lite-latest", "low", {"thinkingLevel": "low"}),
        # Gemini 2.x budgets.
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}),
        ("gemini-2.5-pro", "none", {"thinkingBudget": 128}),
        ("gemini-2.5-pro", "max", {"thinkingBudget": 32768}),
        ("gemini-2.5-flash-lite", "xhigh", {"thinkingBudget": 24576}),
    ],
)
def test_effort_levels_per_model_family(model: str, effort: Any, config: dict[str, Any]) -> None:
    request = Request([Message.user("x")], thinking=ThinkingConfig(effort=effort))
    thinking = build_body(request, model)["generationConfig"]["thinkingConfig"]
    assert thinking == {"includeThoughts": True, **config}


def test_an_alias_gets_the_signature_placeholder_of_gemini_3() -> None:
    history = [Message.user("go"), Message("assistant", [ToolUsePart("c1", "f", {})])]
    history.append(Message("user", [ToolResultPart("c1", "ok")]))
    contents = build_body(Request(history), "gemini-flash-latest")["contents"]
    assert contents[1]["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"


def test_parallel_tool_calls_has_no_gemini_field() -> None:
    tools = [ToolSpec("f", "", {"type": "object", "properties": {"a": {"type": "string"}}})]
    plain = build_body(Request([Message.user("x")], tools=tools), MODEL)
    serial = build_body(Request([Message.user("x")], tools=tools, parallel_tool_calls=False), MODEL)
    assert serial == plain


# -- the Worker -----------------------------------------------------------------------------

_MALFORMED = "Malformed function call: print(default_api.lookup(city=Paris))"


def _malformed() -> WireResponse:
    refused = {"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0, "finishMessage": _MALFORMED}
    return WireResponse(_sse({"candidates": [refused]}))


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


async def _run(*responses: WireResponse) -> tuple[RunResult, WireServer]:
    async with WireServer(list(responses)) as server:
        client = GeminiClient(
            model=MODEL,
            api_key="gemini-test-key-0123456789",
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        worker = Worker(client, tools=[lookup])
        try:
            with anyio.fail_after(TIMEOUT):
                result = await worker.run("Weather in Paris?")
        finally:
            await client.aclose()
    return result, server


async def test_the_worker_tells_the_model_its_call_was_refused_and_goes_on() -> None:
    call = {"functionCall": {"name": "lookup", "args": {"city": "Paris"}}}
    result, server = await _run(
        _malformed(),
        WireResponse(_sse(_chunk([call], "STOP"))),
        WireResponse(_sse(_chunk([{"text": "Sunny in Paris."}], "STOP"))),
    )
    assert (result.status, result.text, result.requests) == (
        RunStatus.FINISHED,
        "Sunny in Paris.",
        3,
    )
    # The refused answer had no content: the feedback follows the question in one user turn.
    [turn] = server.requests[1].json()["contents"]
    assert turn["role"] == "user"
    question, said = turn["parts"]
    assert question == {"text": "Weather in Paris?"}
    assert "MALFORMED_FUNCTION_CALL" in said["text"] and _MALFORMED in said["text"]
    assert result.stop_reason is StopReason.END_TURN


async def test_refused_calls_in_a_row_end_the_turn_after_bounded_retries() -> None:
    result, server = await _run(*[_malformed() for _ in range(MALFORMED_CALL_RETRIES + 2)])
    assert result.status is RunStatus.FINISHED
    assert result.requests == len(server.requests) == MALFORMED_CALL_RETRIES + 1
    assert result.stop_reason is StopReason.MALFORMED_TOOL_CALL
    assert result.text == ""


async def test_a_scripted_refused_call_goes_over_the_wire() -> None:
    script = ScriptedResponse([], stop_reason=StopReason.MALFORMED_TOOL_CALL)
    events, _ = await _answer(WireResponse(encode(script, model=MODEL)))
    stop = _stop(events)
    assert (stop.stop_reason, stop.raw_stop_reason) == (
        StopReason.MALFORMED_TOOL_CALL,
        "MALFORMED_FUNCTION_CALL",
    )


async def test_spans_count_in_the_text_part_the_citations_are_on() -> None:
    # Gemini's offsets run over the whole answer's text; the citations go on the last text
    # part, so their spans are counted from its start ("Intro. " is 7 bytes, "Grüße " 8).
    segment = {"startIndex": 15, "endIndex": 25}  # no quoted text: the offsets alone
    grounding = {
        "groundingChunks": [{"web": {"uri": "https://k.example", "title": "K"}}],
        "groundingSupports": [{"segment": segment, "groundingChunkIndices": [0]}],
    }
    body = _sse(
        _chunk([{"text": "Intro. "}, {"text": "hmm", "thought": True}]),
        _chunk([{"text": "Grüße aus Köln."}], "STOP", groundingMetadata=grounding),
    )
    _, message = await _answer(WireResponse(body))
    first, _, last, kept = message.content
    assert isinstance(first, TextPart) and isinstance(last, TextPart)
    assert (first.citations, last.text) == ([], "Grüße aus Köln.")
    [citation] = last.citations
    assert (citation.start_index, citation.end_index) == (6, 15)
    assert isinstance(kept, ProviderPart)
