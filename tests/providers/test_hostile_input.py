"""Hostile answers against all four clients: each ends in a typed error, bounded, in order.

Wrongly typed fields, duplicate tool-call ids, lines that never end, HTML served as an event
stream, and a `base_url` that carries a query string, over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from llm_worker import Worker, tool
from llm_worker.errors import APIStatusError, MalformedStreamError, ProviderError
from llm_worker.events import BlockDelta, ErrorEvent, Event, InputJsonDelta, TextDelta
from llm_worker.messages import Message, Part, Request, ToolUsePart
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import (
    Chunking,
    ScriptedModelServer,
    ScriptedResponse,
    WireResponse,
    WireServer,
)
from support import streams

PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
_CLIENTS: dict[str, tuple[type[HttpClient], str]] = {
    "anthropic": (AnthropicClient, ""),
    "openai_chat": (OpenAIChatClient, "/v1"),
    "openai_responses": (OpenAIResponsesClient, "/v1"),
    "gemini": (GeminiClient, "/v1beta"),
}
KEY = "sk-hostile-0123456789abcdef"


def client(provider: str, server: WireServer, *, query: str = "", **options: Any) -> HttpClient:
    cls, suffix = _CLIENTS[provider]
    options.setdefault("retry", RetryPolicy.disabled())
    return cls(model="m", api_key=KEY, base_url=server.base_url + suffix + query, **options)


async def run(
    provider: str, *responses: WireResponse, **options: Any
) -> tuple[list[Event], Exception | None, WireServer]:
    return await streams.replay(
        responses, lambda server: client(provider, server, **options), Request([Message.user("hi")])
    )


def sse(*payloads: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads)


def failed_in_order(events: list[Event], error: Exception | None) -> ProviderError:
    """The stream failed with a typed error, after its ErrorEvent and FAILED status."""
    assert isinstance(error, ProviderError), repr(error)
    assert isinstance(events[-2], ErrorEvent), events[-3:]
    for event in events:
        if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta | InputJsonDelta):
            text = event.delta.text if isinstance(event.delta, TextDelta) else None
            assert text is None or isinstance(text, str), event
    return error


# --- wrongly typed deltas (Responses passed them on unchecked) --------------------------------

RESPONSES_DELTAS = [
    "response.output_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
]
BAD_VALUES = [7, ["a", "b"], {"text": "a"}, None]


def responses_stream(kind: str, delta: Any) -> str:
    item: dict[str, Any] = {"id": "msg_1", "type": "message"}
    if "reasoning" in kind:
        item = {"id": "rs_1", "type": "reasoning"}
    elif "function_call" in kind:
        item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f"}
    return sse(
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": kind, "output_index": 0, "item_id": item["id"], "delta": delta},
        {"type": "response.completed", "response": {"status": "completed"}},
    )


@pytest.mark.anyio
@pytest.mark.parametrize("kind", RESPONSES_DELTAS)
@pytest.mark.parametrize("value", BAD_VALUES, ids=["number", "list", "object", "null"])
async def test_a_responses_delta_that_is_no_string_is_a_malformed_stream(
    kind: str, value: Any
) -> None:
    events, error, _ = await run("openai_responses", WireResponse(responses_stream(kind, value)))
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert kind in error.message
    assert "`delta`" in error.message


@tool
async def lookup(city: str) -> str:
    """Look up a city."""
    return city


@pytest.mark.anyio
async def test_the_worker_gets_the_typed_error_not_a_type_error() -> None:
    body = responses_stream("response.output_text.delta", [1, 2])
    async with WireServer([WireResponse(body)]) as server:
        worker = Worker(client("openai_responses", server), tools=[lookup])
        with anyio.fail_after(10), pytest.raises(MalformedStreamError, match="delta"):
            await worker.run("hi")


ANTHROPIC_START = {
    "type": "message_start",
    "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
}

WRONG_FIELDS: dict[str, tuple[str, str]] = {
    # provider: (a stream with a wrongly typed field, the field the error must name)
    "anthropic": (
        sse(
            ANTHROPIC_START,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": 5},
            },
        ),
        "delta.text",
    ),
    "openai_chat": (
        sse({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": 3}]}}]}),
        "id",
    ),
    "openai_responses": (responses_stream("response.output_text.delta", 5), "delta"),
    "gemini": (
        sse({"candidates": [{"content": {"parts": [{"text": ["x"]}]}, "index": 0}]}),
        "text",
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_client_names_the_wrongly_typed_field(provider: str) -> None:
    body, field = WRONG_FIELDS[provider]
    events, error, _ = await run(provider, WireResponse(body))
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert f"`{field}`" in error.message
    assert error.provider == provider


# --- one id per tool call ---------------------------------------------------------------------


def duplicate_ids(provider: str) -> WireResponse:
    if provider == "gemini":  # the wire encoder sends no ids; Gemini may send its own
        call = {"functionCall": {"id": "dup", "name": "lookup", "args": {"city": "Oslo"}}}
        return WireResponse(sse({"candidates": [{"content": {"parts": [call, call]}}]}))
    from llm_worker.testing._model_server import _encoder

    parts: list[Part] = [ToolUsePart("dup", "lookup", {"city": "Oslo"}) for _ in range(2)]
    return WireResponse(_encoder(provider)(ScriptedResponse(parts), model="m"))


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_two_tool_calls_with_one_id_fail_the_stream(provider: str) -> None:
    events, error, _ = await run(provider, duplicate_ids(provider))
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "'dup'" in error.message
    starts = [e for e in events if type(e).__name__ == "BlockStart"]
    assert len(starts) == 1  # the second call never became a block


@pytest.mark.anyio
async def test_the_worker_never_runs_a_call_twice() -> None:
    ran: list[str] = []

    @tool
    async def count(city: str) -> str:
        """Count a run."""
        ran.append(city)
        return city

    parts: list[Part] = [ToolUsePart("dup", "count", {"city": "Oslo"}) for _ in range(2)]
    async with ScriptedModelServer("anthropic", [ScriptedResponse(parts)]) as server:
        worker = Worker(server.client(retry=RetryPolicy.disabled()), tools=[count])
        with anyio.fail_after(10), pytest.raises(MalformedStreamError, match="'dup'"):
            await worker.run("hi")
    assert len(ran) <= 1  # the first call may have started; never a second with its id


# --- a line that never ends --------------------------------------------------------------------

LIMIT = 64 * 1024


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_line_without_end_fails_as_soon_as_it_passes_the_limit(provider: str) -> None:
    # 10 MB written slowly: at EOF this would take 30 s; the limit is passed after 5 writes.
    body = b"data: " + b"x" * 10_000_000
    slow = WireResponse(body, chunking=Chunking("sizes", sizes=(16 * 1024,)), chunk_delay=0.05)
    with anyio.fail_after(5):
        events, error, _ = await run(provider, slow, max_event_bytes=LIMIT)
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "max_event_bytes=65,536" in error.message


@pytest.mark.anyio
async def test_the_default_limit_is_16_mib() -> None:
    # 16 MiB + 1 KiB at once, then 3 more MiB 2 s apart: EOF would come after 6 s.
    mib = 1024 * 1024
    body = b"data: " + b"x" * (19 * mib)
    sizes = (16 * mib + 1024, mib, mib, mib)
    slow = WireResponse(body, chunking=Chunking("sizes", sizes=sizes), chunk_delay=2.0)
    with anyio.fail_after(4):
        events, error, _ = await run("openai_chat", slow)
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "max_event_bytes=16,777,216" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "body", "content_type"),
    [
        ("openai_chat", b'{"choices": "' + b"x" * 200_000, "application/json"),
        ("openai_chat", b'{"choices": "' + b"x" * 200_000, "text/event-stream"),
        ("gemini", b'[{"candidates": "' + b"x" * 200_000, "application/json"),
        ("anthropic", (b"data: " + b"y" * 999 + b"\n") * 100, "text/event-stream"),  # one event
    ],
    ids=["chat-json", "chat-json-as-sse", "gemini-array", "many-data-lines"],
)
async def test_every_other_unfinished_buffer_is_bounded_too(
    provider: str, body: bytes, content_type: str
) -> None:
    response = WireResponse(body, content_type=content_type, chunking=Chunking.random(3, 4096))
    events, error, _ = await run(provider, response, max_event_bytes=LIMIT)
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "max_event_bytes" in error.message


def test_max_event_bytes_must_be_a_positive_integer() -> None:
    from llm_worker.errors import ConfigurationError

    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigurationError, match="max_event_bytes"):
            OpenAIChatClient(model="m", api_key=KEY, max_event_bytes=bad)  # type: ignore[arg-type]


# --- HTML instead of an event stream ---------------------------------------------------------

HTML = b"\n  <!DOCTYPE html><html><head><title>Sign in - Proxy</title></head></html>"


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
async def test_an_html_page_served_as_a_stream_is_an_api_status_error(
    provider: str, content_type: str
) -> None:
    page = WireResponse(HTML, content_type=content_type, chunking=Chunking.bytewise())
    events, error, _ = await run(provider, page)
    error = failed_in_order(events, error)
    assert type(error) is APIStatusError
    assert error.status_code == 200
    assert error.message == "an HTML page instead of an API answer: Sign in - Proxy"


# --- a base_url with a query string ---------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_base_url_query_stays_the_query(provider: str) -> None:
    async with WireServer([WireResponse(HTML)]) as server:
        c = client(provider, server, query="?api-version=2024-10&tenant=a%20b")
        await streams.collect(c, Request([Message.user("hi")]))
        await c.aclose()
    [request] = server.requests
    suffix = _CLIENTS[provider][1]
    assert request.path.startswith(suffix + "/")
    assert "?" not in request.path
    assert request.query["api-version"] == "2024-10"
    assert request.query["tenant"] == "a b"
    if provider == "gemini":
        assert request.path == "/v1beta/models/m:streamGenerateContent"
        assert request.query["alt"] == "sse"
