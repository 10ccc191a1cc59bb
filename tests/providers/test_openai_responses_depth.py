"""What the Responses API sends beyond text, calls and reasoning, and what goes back.

Citations (`annotations`), the message `phase`, token log probabilities, the response's id,
model and tier, server-side `compaction` items, a stored conversation (`previous_response_id`),
and the 400 an unverified organization gets for a reasoning summary. Streams are recordings
where one exists (web_search_annotations, file_search_call, message_phase_…,
output_text_logprobs), else built in the recorded shape; each goes through the real client over
HTTP, and what it gives is fed to the next request's builder.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_openai_responses_support import (
    API,
    KEY,
    assemble,
    check_invariants,
    completed,
    created,
    data_events,
    message_added,
    recorded,
    replay,
    sse,
    text_delta,
)

from llm_worker.errors import APIStatusError, ConfigurationError, InvalidRequestError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    CitationDelta,
    ErrorEvent,
    Event,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    TextMetadata,
    TokenLogprob,
)
from llm_worker.messages import (
    Citation,
    Message,
    Origin,
    ProviderPart,
    Request,
    TextPart,
    ThinkingConfig,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers import OpenAIResponsesClient
from llm_worker.testing import WireResponse
from support.recorded import load

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def body_for(request: Request, model: str) -> dict[str, Any]:
    return OpenAIResponsesClient(model=model, api_key=KEY).build_body(request)


def citations(events: list[Event]) -> list[Citation]:
    return [
        e.delta.citation
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, CitationDelta)
    ]


def recorded_message(name: str) -> dict[str, Any]:
    """The recording's assistant message item, whole."""
    done = [
        e["item"]
        for e in data_events(load(API, name)["response"]["body"])
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "message"
    ]
    return done[-1]


async def answer_of(name: str, model: str) -> tuple[list[Event], Message]:
    events, error, _ = await replay(recorded(name))
    assert error is None
    check_invariants(events)
    return events, assemble(events, Origin(API, model))


# -- citations ------------------------------------------------------------------------------


async def test_url_citations_are_kept_and_sent_back() -> None:
    model = "gpt-5.2"
    events, answer = await answer_of("web_search_annotations", model)
    (annotation,) = recorded_message("web_search_annotations")["content"][0]["annotations"]
    (citation,) = citations(events)
    assert citation == Citation(
        annotation,
        url="https://www.britannica.com/place/Mount-Columbia?utm_source=openai",
        title="Mount Columbia | mountain, Alberta, Canada | Britannica",
        start_index=77,
        end_index=162,
        origin=Origin(API, "m"),  # the client the test streamed through
    )
    text = answer.content[-1]
    assert isinstance(text, TextPart)
    assert text.text[77:162].startswith("([britannica.com]")
    history = [Message.user("Tallest mountain in Alberta?"), answer, Message.user("Thanks!")]
    sent = body_for(Request(history), model)["input"][-2]
    assert sent["content"][0]["annotations"] == [annotation]


async def test_file_citations_mark_their_position() -> None:
    events, _ = await answer_of("file_search_call", "gpt-4o")
    (citation,) = citations(events)
    assert (citation.title, citation.start_index, citation.end_index) == (
        "tmp8l5_2pzy.txt",
        30,
        None,
    )
    assert citation.data["file_id"] == "file-9RhPAs9YqVajpGXRfcgavJ"


def delta(text: str, content_index: int = 0, logprobs: list[Any] | None = None) -> str:
    event = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0}
    event |= {"content_index": content_index, "delta": text, "logprobs": logprobs or []}
    return sse(event)


def content_part_done(index: int, text: str) -> str:
    return sse(
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": index,
            "text": text,
        }
    )


def annotation_added(content_index: int, start: int, end: int) -> str:
    annotation = {"type": "url_citation", "start_index": start, "end_index": end}
    annotation |= {"url": "https://example.com/", "title": "Example"}
    return sse(
        {
            "type": "response.output_text.annotation.added",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": content_index,
            "annotation_index": 0,
            "annotation": annotation,
        }
    )


def message_item_done(*parts: tuple[str, list[dict[str, Any]]]) -> str:
    content = [{"type": "output_text", "text": t, "annotations": a} for t, a in parts]
    item = {"id": "msg_1", "type": "message", "status": "completed", "content": content}
    return sse({"type": "response.output_item.done", "output_index": 0, "item": item})


async def test_citations_in_a_later_content_part_count_from_the_joined_text() -> None:
    # The parts of one message become one text block: an index in part 1 counts from the
    # start of that part, so it moves by the length of part 0.
    body = (
        created()
        + message_added()
        + delta("First part. ")
        + content_part_done(0, "First part. ")
        + delta("See example.", 1)
        + annotation_added(1, 4, 11)
        + content_part_done(1, "See example.")
        + message_item_done(("First part. ", []), ("See example.", []))
        + completed()
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    (citation,) = citations(events)
    text = "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )
    assert citation.start_index is not None and citation.end_index is not None
    assert text[citation.start_index : citation.end_index] == "example"


async def test_annotations_listed_only_on_the_item_are_kept() -> None:
    # A compatible server may send no annotation events: the finished item still lists them.
    annotation = {
        "type": "url_citation",
        "start_index": 0,
        "end_index": 2,
        "url": "u",
        "title": "t",
    }
    body = (
        created()
        + message_added()
        + text_delta("Hi")
        + message_item_done(("Hi", [annotation]))
        + completed()
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    assert [c.data for c in citations(events)] == [annotation]


def test_citations_of_other_providers_are_not_sent() -> None:
    foreign = Citation(
        {"type": "char_location", "cited_text": "x"}, origin=Origin("anthropic", "c")
    )
    part = TextPart("Cited.", citations=[foreign])
    body = body_for(Request([Message.user("q"), Message("assistant", [part])]), "gpt-5")
    assert body["input"][-1] == {"type": "message", "role": "assistant", "content": "Cited."}


# -- phase ----------------------------------------------------------------------------------


async def test_the_message_phase_is_kept_and_sent_back() -> None:
    model = "gpt-5.5"
    name = "message_phase_reasoning_function_call"
    events, answer = await answer_of(name, model)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert TextMetadata(recorded_message(name)["id"], "commentary") in [e.metadata for e in starts]
    (call,) = answer.tool_uses
    history = [Message.user("Capital of PotatoLand?"), answer, Message("user", [])]
    history[-1].content.append(ToolResultPart(call.id, "Spudville"))
    tools = [ToolSpec("get_capital", "", SCHEMA, strict=True)]
    items = body_for(Request(history, tools=tools), model)["input"]
    (message,) = [i for i in items if i.get("role") == "assistant"]
    assert message["phase"] == "commentary"
    assert message["id"] == recorded_message(name)["id"]


# -- log probabilities ----------------------------------------------------------------------


async def test_logprobs_ride_on_the_text_deltas() -> None:
    name = "output_text_logprobs"
    events, _ = await answer_of(name, "gpt-4o-mini")
    deltas = [
        e.delta for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]
    recorded_deltas = [
        e
        for e in data_events(load(API, name)["response"]["body"])
        if e["type"] == "response.output_text.delta"
    ]
    assert len(deltas) == len(recorded_deltas)
    for delta, raw in zip(deltas, recorded_deltas, strict=True):
        assert delta.logprobs == [
            TokenLogprob(t["token"], t["logprob"], []) for t in raw["logprobs"]
        ]


async def test_top_logprobs_are_kept_and_no_logprobs_means_none() -> None:
    top = [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105]}, {"token": "Yo", "logprob": -2.5}]
    logprobs = [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": top}]
    body = created() + message_added() + delta("Hi", 0, logprobs) + delta("!") + completed()
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert deltas == [
        TextDelta("Hi", [TokenLogprob("Hi", -0.1, [("Hi", -0.1), ("Yo", -2.5)])]),
        TextDelta("!"),
    ]


# -- the response itself --------------------------------------------------------------------


async def test_the_closing_status_names_the_response_model_and_tier() -> None:
    events, _ = await answer_of("plain_text", "gpt-4.1-nano")
    # `response.created` says "auto"; the tier that served it comes with `response.completed`.
    assert events[-1] == StatusEvent(
        ResponseStatus.COMPLETED,
        "resp_087a1bffb8180cc4006912065042e08196a1a6445d62480120",
        "gpt-4.1-nano-2025-04-14",
        "default",
    )


# -- compaction -----------------------------------------------------------------------------


def test_a_compaction_item_goes_back_to_its_model() -> None:
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"}
    answer = Message(
        "assistant",
        [ProviderPart(compaction, origin=Origin(API, "gpt-5")), TextPart("Done.")],
    )
    history = [Message.user("Go on."), answer, Message.user("And then?")]
    assert compaction in body_for(Request(history), "gpt-5")["input"]
    assert compaction not in body_for(Request(history), "gpt-5-mini")["input"]


# -- a stored conversation ------------------------------------------------------------------


def test_previous_response_id_sends_only_what_follows_the_last_answer() -> None:
    # The recorded second request of a stored conversation: only the tool result goes, the
    # server holds the rest ("Duplicate item found" otherwise). The caller keeps the whole
    # history, as the Worker does.
    want = load(API, "nonstream_previous_response_id_tool_output")["request"]["body"]
    output = want["input"][0]
    spec = want["tools"][0]
    call = ToolUsePart(output["call_id"], "get_weather", {"city": "Paris"}, item_id="fc_1")
    history = [
        Message.user("Weather in Paris?"),
        Message("assistant", [TextPart("Checking."), call]),
        Message("user", [ToolResultPart(output["call_id"], output["output"])]),
    ]
    options = {"previous_response_id": want["previous_response_id"], "store": True}
    tools = [ToolSpec(spec["name"], "", spec["parameters"], strict=True)]
    request = Request(history, tools=tools, tool_choice="auto", options=options)
    body = body_for(request, "gpt-4.1")
    assert body["input"] == want["input"]
    assert body["previous_response_id"] == want["previous_response_id"]
    # Without the option the whole history goes, as before.
    request.options = {}
    assert len(body_for(request, "gpt-4.1")["input"]) == 4


async def test_a_response_id_chains_the_next_request() -> None:
    body = created() + message_added() + text_delta("Hi.") + completed()
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    status = events[-1]
    assert isinstance(status, StatusEvent) and status.response_id == "resp_1"
    answer = assemble(events, Origin(API, "m"))
    history = [Message.user("Hello"), answer, Message.user("How are you?")]
    request = Request(history, options={"previous_response_id": status.response_id})
    assert body_for(request, "m")["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "How are you?"}],
        }
    ]


# -- reasoning summaries and unverified organizations --------------------------------------

UNVERIFIED = (
    "Your organization must be verified to generate reasoning summaries. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify "
    "Organization. If you just verified, it can take up to 15 minutes for access to propagate."
)


async def test_an_unverified_organization_gets_a_configuration_error() -> None:
    body = {
        "error": {
            "message": UNVERIFIED,
            "type": "invalid_request_error",
            "param": "reasoning.summary",
            "code": "unsupported_value",
        }
    }
    request = Request(
        [Message.user("hi")], thinking=ThinkingConfig(effort="low", include_thoughts=True)
    )
    response = WireResponse(body, status=400, content_type="application/json")
    events, error, server = await replay(response, request=request)
    assert isinstance(error, ConfigurationError)
    assert "include_thoughts" in str(error)
    assert "platform.openai.com/settings/organization/general" in str(error)
    assert isinstance(error.__cause__, InvalidRequestError)
    assert server.requests[0].json()["reasoning"] == {"effort": "low", "summary": "auto"}
    # The stream still closes as a failed one, with the provider's words.
    assert isinstance(events[-2], ErrorEvent) and UNVERIFIED in events[-2].message
    assert events[-1] == StatusEvent(ResponseStatus.FAILED)


async def test_the_same_refusal_inside_a_stream_is_a_configuration_error() -> None:
    event = {"type": "error", "code": "unsupported_value", "message": UNVERIFIED, "param": None}
    events, error, _ = await replay(WireResponse(created() + sse(event)))
    assert isinstance(error, ConfigurationError)
    assert isinstance(error.__cause__, APIStatusError)
    check_invariants(events, failed=True)


async def test_other_bad_requests_stay_provider_errors() -> None:
    body = {"error": {"message": "Invalid 'input'.", "type": "invalid_request_error"}}
    response = WireResponse(body, status=400, content_type="application/json")
    _, error, _ = await replay(response)
    assert type(error) is InvalidRequestError


# -- request settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effort", "sent"), [("none", "none"), ("xhigh", "xhigh"), ("max", "xhigh")]
)
def test_efforts_go_as_the_api_spells_them(effort: Any, sent: str) -> None:
    request = Request([Message.user("x")], thinking=ThinkingConfig(effort=effort))
    assert body_for(request, "gpt-5.2")["reasoning"] == {"effort": sent}


def test_parallel_tool_calls_go_with_tools_only() -> None:
    tools = [ToolSpec("get", "Get.", SCHEMA)]
    request = Request([Message.user("x")], tools=tools, parallel_tool_calls=False)
    assert body_for(request, "gpt-5")["parallel_tool_calls"] is False
    request.tools = []
    assert "parallel_tool_calls" not in body_for(request, "gpt-5")


def test_hosted_tools_in_options_join_the_function_tools() -> None:
    # Lists in options join the body's (the merge rule of every client).
    web = {"type": "web_search"}
    request = Request([Message.user("x")], tools=[ToolSpec("get", "Get.", SCHEMA)])
    request.options = {"tools": [web]}
    assert [t["type"] for t in body_for(request, "gpt-5")["tools"]] == ["function", "web_search"]
