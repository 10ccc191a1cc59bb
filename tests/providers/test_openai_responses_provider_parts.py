"""Responses output items of no neutral kind (hosted tools): kept whole, sent back in place.

The recorded answers are replayed over HTTP through `OpenAIResponsesClient` and assembled as
the Worker keeps them; the expected items are read from the recording's JSON (the items of
`response.output_item.done`, in output order), not through the client. The next request to
the same model must hold them exactly, where they were, with the reasoning items they pair
with; items a client must answer (a client-run tool search) stay out; another model and every
other client drop them.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_openai_responses_support import (
    API,
    TIMEOUT,
    assemble,
    check_invariants,
    client_for,
    data_events,
    recorded,
    replay,
    text_stream,
)

from llm_worker import Worker
from llm_worker.messages import (
    Message,
    Origin,
    Part,
    ProviderPart,
    Request,
    TextPart,
    ThinkingPart,
    messages_from_json,
    messages_to_json,
)
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.testing import WireResponse, WireServer
from support.recorded import load

pytestmark = pytest.mark.anyio

_NEUTRAL = {"message", "reasoning", "function_call"}
SENT_BACK = [
    "web_search_call_cached_tokens",
    "web_search_annotations",
    "mcp_list_tools_and_call",
    "code_interpreter_with_reasoning_summary",
    "file_search_call",
]


def _output(name: str) -> list[dict[str, Any]]:
    """The recorded answer's items as they were done, in output order."""
    events = data_events(load(API, name)["response"]["body"])
    done = [e for e in events if e["type"] == "response.output_item.done"]
    return [e["item"] for e in sorted(done, key=lambda e: e["output_index"])]


def _hosted(name: str) -> list[dict[str, Any]]:
    return [item for item in _output(name) if item["type"] not in _NEUTRAL]


def _model(name: str) -> str:
    return load(API, name)["request"]["body"]["model"]


async def _answer(name: str) -> tuple[Message, Origin]:
    events, error, _ = await replay(recorded(name))
    assert error is None, error
    check_invariants(events)
    origin = Origin(API, _model(name))
    return assemble(events, origin), origin


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("web_search_call_cached_tokens", ["web_search_call"]),
        ("web_search_annotations", ["web_search_call"] * 2),
        ("mcp_list_tools_and_call", ["mcp_list_tools", "mcp_call"]),
        ("code_interpreter_with_reasoning_summary", ["code_interpreter_call"] * 3),
        ("file_search_call", ["file_search_call"]),
        ("tool_search_call", ["tool_search_call"]),
    ],
)
async def test_recorded_hosted_items_are_kept_whole_in_order(name: str, kinds: list[str]) -> None:
    message, origin = await _answer(name)
    kept = [p for p in message.content if isinstance(p, ProviderPart)]
    want = _hosted(name)
    assert [item["type"] for item in want] == kinds
    assert [p.data for p in kept] == want
    assert all(p.origin == origin for p in kept)


def _kind_and_id(part: Part) -> tuple[str, str | None]:
    if isinstance(part, ProviderPart):
        return part.data["type"], part.data["id"]
    if isinstance(part, ThinkingPart):
        return "reasoning", part.item_id
    assert isinstance(part, TextPart)
    return "message", part.item_id


@pytest.mark.parametrize("name", SENT_BACK)
async def test_the_next_request_sends_them_back_in_place(name: str) -> None:
    message, origin = await _answer(name)
    history = [Message.user("go"), message, Message.user("thanks; and then?")]
    client = OpenAIResponsesClient(model=origin.model, api_key="k")
    body = client.build_body(Request(history))
    sent = body["input"][1:-1]
    # Every output item goes back, in output order, with its id (reasoning pairs intact).
    assert [(i["type"], i.get("id")) for i in sent] == [(i["type"], i["id"]) for i in _output(name)]
    assert [i for i in sent if i["type"] not in _NEUTRAL] == _hosted(name)
    # The same after a trip through JSON (a paused run, a saved session).
    again = client.build_body(Request(messages_from_json(messages_to_json(history))))
    assert again == body


async def test_the_body_holds_copies_of_the_kept_items() -> None:
    message, origin = await _answer("web_search_annotations")
    body = OpenAIResponsesClient(model=origin.model, api_key="k").build_body(
        Request([Message.user("go"), message])
    )
    body["input"][1]["status"] = "changed"
    first = message.content[0]
    assert isinstance(first, ProviderPart)
    assert first.data["status"] == "completed"


async def test_a_client_run_tool_search_stays_out_of_the_request() -> None:
    # `execution: "client"` waits for a tool_search_output this library cannot give; sent
    # back unanswered, the call would be rejected.
    message, origin = await _answer("tool_search_call")
    assert _hosted("tool_search_call")[0]["execution"] == "client"
    body = OpenAIResponsesClient(model=origin.model, api_key="k").build_body(
        Request([Message.user("go"), message, Message.user("go on")])
    )
    assert b"tool_search_call" not in orjson.dumps(body)
    assert [i["type"] for i in body["input"]] == ["message", "message"]


async def test_another_model_gets_none_of_them() -> None:
    message, _ = await _answer("web_search_call_cached_tokens")
    body = OpenAIResponsesClient(model="gpt-4.1", api_key="k").build_body(
        Request([Message.user("go"), message, Message.user("thanks")])
    )
    dumped = orjson.dumps(body)
    assert b"web_search_call" not in dumped
    assert b"rs_" not in dumped  # the reasoning is bound to its model too
    assert [i["type"] for i in body["input"]] == ["message"] * 3


def _other_clients() -> list[HttpClient]:
    return [
        AnthropicClient(model="claude-sonnet-4-5", api_key="k"),
        OpenAIChatClient(model="gpt-5", api_key="k"),
        GeminiClient(model="gemini-2.5-flash", api_key="k"),
    ]


@pytest.mark.parametrize("client", _other_clients(), ids=lambda c: c.provider)
async def test_other_providers_drop_them(client: HttpClient) -> None:
    message, _ = await _answer("mcp_list_tools_and_call")
    body = client.build_body(Request([Message.user("go"), message, Message.user("thanks")]))
    dumped = orjson.dumps(body)
    assert b"mcp_list_tools" not in dumped
    assert b"mcp_call" not in dumped
    assert b"deepwiki" not in dumped
    assert message.text.encode()[:40] in dumped  # the answer's text goes everywhere


MODEL = "gpt-5"
OURS = Origin(API, MODEL)
SEARCH = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {}}


def _body(parts: list[Part], **options: Any) -> dict[str, Any]:
    request = Request([Message.user("go"), Message("assistant", parts)], options=options)
    return OpenAIResponsesClient(model=MODEL, api_key="k").build_body(request)


def _types(body: dict[str, Any]) -> list[str]:
    return [i["type"] for i in body["input"][1:]]


def test_a_dropped_reasoning_item_takes_the_hosted_item_after_it() -> None:
    # With store false and no encrypted content the reasoning cannot go; the search's id
    # would name it, so the search stays out too; the text still goes, without its id.
    parts: list[Part] = [
        ThinkingPart("", item_id="rs_1", origin=OURS),
        ProviderPart(SEARCH, origin=OURS),
        TextPart("Sunny.", item_id="msg_1", origin=OURS),
    ]
    assert _types(_body(parts)) == ["reasoning", "web_search_call", "message"]
    body = _body(parts, store=False)
    assert _types(body) == ["message"]
    assert "id" not in body["input"][1]


def test_reasoning_before_an_item_kept_out_is_dropped_with_it() -> None:
    client_search = {"id": "tsc_1", "type": "tool_search_call", "execution": "client"}
    server_search = {**client_search, "id": "tsc_2", "execution": "server"}
    parts: list[Part] = [
        ThinkingPart("", item_id="rs_1", origin=OURS),
        ProviderPart(client_search, origin=OURS),
        ThinkingPart("", item_id="rs_2", origin=OURS),
        ProviderPart(server_search, origin=OURS),
        ProviderPart({"id": "x_1", "type": "some_future_call"}, origin=OURS),
    ]
    sent = _body(parts)["input"][1:]
    assert sent == [{"type": "reasoning", "id": "rs_2", "summary": []}, server_search]


def test_hosted_items_split_the_assistant_messages_around_them() -> None:
    parts: list[Part] = [
        TextPart("Searching.", origin=OURS),
        ProviderPart(SEARCH, origin=OURS),
        TextPart("Found it.", origin=OURS),
    ]
    sent = _body(parts)["input"][1:]
    assert [i["type"] for i in sent] == ["message", "web_search_call", "message"]
    assert sent[1] == SEARCH
    # In a user message a kept item goes nowhere (items belong to the model's turns).
    user = Message("user", [TextPart("hi"), ProviderPart(SEARCH, origin=OURS)])
    body = OpenAIResponsesClient(model=MODEL, api_key="k").build_body(Request([user]))
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]


async def test_the_worker_sends_the_searches_back_on_the_next_run() -> None:
    name = "web_search_annotations"
    answers = [recorded(name), WireResponse(text_stream("It is Mount Columbia."))]
    async with WireServer(answers) as server:
        client = client_for(server, model=_model(name))
        worker = Worker(client)
        try:
            with anyio.fail_after(TIMEOUT):
                await worker.run("What is the tallest mountain in Alberta?")
                result = await worker.run("Say it again.")
        finally:
            await client.aclose()
    assert result.text == "It is Mount Columbia."
    second = server.requests[1].json()["input"]
    assert [i for i in second if i["type"] == "web_search_call"] == _hosted(name)
    assert [i["type"] for i in second] == [
        "message",
        "web_search_call",
        "web_search_call",
        "message",
        "message",
    ]
