"""Review probes of the Responses depth items: hostile annotations, stored conversations in a
Worker tool loop, the unverified-organization refusal as `response.failed`, and the options
merge rule.

Streams go through the real client over HTTP; the Worker runs over a `ScriptedModelServer`
speaking the Responses wire format.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_openai_responses_support import (
    API,
    KEY,
    assemble,
    check_invariants,
    completed,
    created,
    message_added,
    replay,
    sse,
    text_delta,
)

from llm_worker import Worker
from llm_worker.errors import APIStatusError, ConfigurationError
from llm_worker.events import ErrorEvent
from llm_worker.messages import (
    Citation,
    Message,
    Origin,
    Request,
    TextPart,
    ThinkingConfig,
    ToolUsePart,
)
from llm_worker.providers import OpenAIResponsesClient
from llm_worker.providers._base import deep_merge
from llm_worker.testing import ScriptedResponse, WireResponse
from support.e2e import TIMEOUT, Desk, serve

pytestmark = pytest.mark.anyio

MODEL = "gpt-5"
OWN = Origin(API, MODEL)
URL = {
    "type": "url_citation",
    "url": "https://a.example",
    "title": "A",
    "start_index": 0,
    "end_index": 3,
}


def body_for(request: Request, model: str = MODEL) -> dict[str, Any]:
    return OpenAIResponsesClient(model=model, api_key=KEY).build_body(request)


def annotation_event(annotation: object, index: int = 0) -> str:
    return sse(
        {
            "type": "response.output_text.annotation.added",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "annotation_index": index,
            "annotation": annotation,
        }
    )


def sent_annotations(said: Message) -> list[Any]:
    body = body_for(Request([Message.user("q"), said, Message.user("more")]))
    (message,) = [i for i in body["input"] if i.get("role") == "assistant"]
    return [a for part in message["content"] for a in part["annotations"]]


# -- annotations ----------------------------------------------------------------------------


async def test_only_annotations_the_api_takes_back_are_sent_back() -> None:
    # The API validates each annotation of an output_text input part against its four kinds
    # (url_citation, file_citation, container_file_citation, file_path) and their fields;
    # a kind it streams later, or a broken one, must not make every later request fail.
    extra = {**URL, "start_index": 4, "end_index": 5, "favicon": "https://a.example/i.png"}
    odd = [
        URL,
        {"type": "new_kind_2027", "id": "x"},
        {"type": "url_citation", "url": "https://b.example"},  # no indexes, no title
        {"type": "file_path", "file_id": "file_1", "index": "7"},  # index is not a number
        "not an object",
        extra,
    ]
    stream = created() + message_added() + text_delta("abc def")
    stream += "".join(annotation_event(a, n) for n, a in enumerate(odd)) + completed()
    events, error, _ = await replay(WireResponse(stream))
    assert error is None
    check_invariants(events)
    said = assemble(events, OWN)
    (text,) = said.content
    assert isinstance(text, TextPart) and len(text.citations) == 6  # every one is kept
    assert sent_annotations(said) == [URL, {**URL, "start_index": 4, "end_index": 5}]


def test_a_container_file_citation_goes_back_whole() -> None:
    container = {
        "type": "container_file_citation",
        "container_id": "cntr_1",
        "file_id": "cfile_1",
        "filename": "plot.png",
        "start_index": 1,
        "end_index": 2,
    }
    cited = Citation(container, title="plot.png", start_index=1, end_index=2, origin=OWN)
    said = Message("assistant", [TextPart("abc", item_id="msg_1", origin=OWN, citations=[cited])])
    assert sent_annotations(said) == [container]


# -- a stored conversation in a tool loop ---------------------------------------------------


async def test_a_stored_tool_loop_chains_each_request_to_the_answer_before_it() -> None:
    desk = Desk()
    script = [
        ScriptedResponse([ToolUsePart("call_1", "lookup", {"city": "Kyoto"})]),
        ScriptedResponse.text("Clear."),
    ]
    async with serve(API, script, model=MODEL) as wire:
        options = {"previous_response_id": "resp_from_the_caller"}
        worker = Worker(wire.client(), tools=desk.tools(), options=options)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Weather in Kyoto?")
        first, second = wire.body(0), wire.body(1)
    assert first["previous_response_id"] == "resp_from_the_caller"
    assert [item["type"] for item in second["input"]] == ["function_call_output"]
    assert len(result.response_ids) == 2
    assert second["previous_response_id"] == result.response_ids[0]


def test_a_stored_conversation_with_no_answer_yet_sends_the_history() -> None:
    request = Request([Message.user("a"), Message.user("b")], options={"conversation": "c_1"})
    assert [item["role"] for item in body_for(request)["input"]] == ["user", "user"]


# -- unverified organization ----------------------------------------------------------------

UNVERIFIED = "Your organization must be verified to generate reasoning summaries."


async def test_an_unverified_organization_in_response_failed_is_a_configuration_error() -> None:
    response = {
        "id": "resp_1",
        "status": "failed",
        "error": {"code": "invalid_request_error", "message": UNVERIFIED},
    }
    stream = created() + sse({"type": "response.failed", "response": response})
    request = Request([Message.user("hi")], thinking=ThinkingConfig(include_thoughts=True))
    events, error, _ = await replay(WireResponse(stream), request=request)
    assert isinstance(error, ConfigurationError)
    assert isinstance(error.__cause__, APIStatusError)
    assert any(isinstance(e, ErrorEvent) and UNVERIFIED in e.message for e in events)
    check_invariants(events, failed=True)


# -- the options merge rule -----------------------------------------------------------------


def test_merging_a_list_adds_each_new_entry_once_in_order() -> None:
    body: dict[str, Any] = {"include": ["a"], "tools": [{"type": "function", "name": "f"}]}
    options = {"include": ["b", "a", "b", "c"], "tools": [{"type": "web_search"}] * 2}
    merged = deep_merge(body, options)
    assert merged["include"] == ["a", "b", "c"]
    assert merged["tools"] == [{"type": "function", "name": "f"}, {"type": "web_search"}]
    assert options["include"] == ["b", "a", "b", "c"]  # the caller's options are untouched


async def test_a_stored_conversation_goes_on_from_the_pause_and_from_the_last_run() -> None:
    from llm_worker.hooks import Pause, ToolCallContext
    from llm_worker.state import PauseState

    async def approval(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("approve?")

    desk = Desk()
    script = [
        ScriptedResponse([ToolUsePart("call_1", "lookup", {"city": "Kyoto"})]),
        ScriptedResponse.text("Clear."),
        ScriptedResponse.text("Again clear."),
    ]
    async with serve(API, script, model=MODEL) as wire:
        options = {"previous_response_id": "resp_from_the_caller"}
        worker = Worker(wire.client(), tools=desk.tools(), options=options)
        worker.add_before_tool_call_hook(approval)
        with anyio.fail_after(TIMEOUT):
            paused = await worker.run("Weather in Kyoto?")
            assert paused.state is not None
            state = PauseState.from_json(paused.state.to_json())
            assert state.response_id == paused.response_ids[-1]
            fresh = Worker(wire.client(), tools=desk.tools(), options=options)
            fresh.add_before_tool_call_hook(approval)
            resumed = await fresh.resume(state)
            later = await fresh.run("And tomorrow?")
        second, third = wire.body(1), wire.body(2)
    # The resume answers the calls of the paused answer; the next run goes on from the last.
    assert second["previous_response_id"] == state.response_id
    assert [item["type"] for item in second["input"]] == ["function_call_output"]
    assert third["previous_response_id"] == resumed.response_ids[-1]
    assert later.text == "Again clear."
