"""Hostile answers against all four clients: each ends in a typed error, bounded, in order.

Wrongly typed fields, duplicate tool-call ids, lines that never end, HTML served as an event
stream, and a `base_url` that carries a query string, over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Worker, tool
from llm_worker.errors import (
    APIStatusError,
    APITimeoutError,
    MalformedStreamError,
    ProviderError,
)
from llm_worker.events import (
    USAGE_FIELDS,
    BlockDelta,
    BlockStart,
    ErrorEvent,
    Event,
    InputJsonDelta,
    TextDelta,
    ToolUseMetadata,
)
from llm_worker.messages import Message, Origin, Part, Request, TextPart, ToolUsePart
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

# Every test runs over both transports (httpx and aiohttp).
pytestmark = pytest.mark.usefixtures("http_transport")

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
    async with (
        WireServer([WireResponse(body)]) as server,
        client("openai_responses", server) as llm,  # closed: aiohttp warns of an open pool
    ):
        worker = Worker(llm, tools=[lookup])
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
    async with (
        ScriptedModelServer("anthropic", [ScriptedResponse(parts)]) as server,
        server.client(retry=RetryPolicy.disabled()) as llm,
    ):
        worker = Worker(llm, tools=[count])
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


# --- review probes: every field the mappers read, framing, cancellation -----------------------

TOOL_NAMELESS: dict[str, str] = {
    # provider: a complete answer whose one tool call has an empty name or id
    "anthropic": sse(
        ANTHROPIC_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "", "name": "f", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ),
    "openai_chat": sse(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": "{}"}}]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    + "data: [DONE]\n\n",
    "openai_responses": sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "name": "", "call_id": "c1"},
        },
        {"type": "response.completed", "response": {"status": "completed"}},
    ),
    "gemini": sse(
        {
            "candidates": [
                {
                    "content": {"parts": [{"functionCall": {"name": "", "args": {}}}]},
                    "finishReason": "STOP",
                }
            ]
        }
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_call_without_a_name_or_id_is_a_malformed_stream(provider: str) -> None:
    # Chat opened a nameless call as a call of the tool "" at the end of the answer, and an
    # empty id went back to the provider with its result.
    events, error, _ = await run(provider, WireResponse(TOOL_NAMELESS[provider]))
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "without a" in error.message or "without an id" in error.message


GEMINI_CALL = {"name": "lookup", "args": {"city": "Oslo"}}


@pytest.mark.anyio
async def test_a_gemini_call_id_is_never_synthesized_again() -> None:
    # The provider's own id came first: the id-less call after it must get another one.
    parts = [
        {"functionCall": {**GEMINI_CALL, "id": "gemini_call_0"}},
        {"functionCall": GEMINI_CALL},
    ]
    body = sse({"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]})
    events, error, _ = await run("gemini", WireResponse(body))
    assert error is None
    ids = [
        e.metadata.id
        for e in events
        if isinstance(e, BlockStart) and isinstance(e.metadata, ToolUseMetadata)
    ]
    assert ids == ["gemini_call_0", "gemini_call_1"]


MORE_WRONG_FIELDS = [
    (
        "gemini",
        sse({"candidates": [{"content": {"parts": [{"functionCall": {**GEMINI_CALL, "id": 7}}]}}]}),
        "functionCall.id",
    ),
    (
        "gemini",
        sse({"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": 1}]}),
        "finishReason",
    ),
    (
        "openai_chat",
        sse({"choices": [{"index": 0, "delta": {"reasoning_content": ["r"]}}]}),
        "reasoning_content",
    ),
    ("openai_chat", sse({"choices": [{"index": 0, "delta": {"refusal": {"a": 1}}}]}), "refusal"),
    (
        "openai_chat",
        sse({"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": 3}]}),
        "finish_reason",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "body", "field"), MORE_WRONG_FIELDS, ids=lambda v: str(v)[:20]
)
async def test_more_wrongly_typed_fields_are_named(provider: str, body: str, field: str) -> None:
    # These were dropped silently (a number as reasoning) or turned into text (str(3)).
    events, error, _ = await run(provider, WireResponse(body))
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert f"`{field}`" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "lead", [b"\xef\xbb\xbf", b"\xef\xbb\xbf \r\n\t", b"\r\r\r"], ids=["bom", "bom-blank", "cr"]
)
async def test_an_html_page_after_a_bom_or_blank_lines_is_an_api_status_error(
    provider: str, lead: bytes
) -> None:
    page = WireResponse(lead + HTML.lstrip(), chunking=Chunking.bytewise())
    events, error, _ = await run(provider, page)
    error = failed_in_order(events, error)
    assert type(error) is APIStatusError
    assert error.message == "an HTML page instead of an API answer: Sign in - Proxy"


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "body",
    [
        b"data: " + b"x" * (LIMIT + 10) + b"\r",  # CR-only line ends
        (b"data: " + b"x" * (LIMIT - 10) + b"\r") * 3,  # lines just under the cap, one event
        b": keep-alive\r" * 10 + b"data: " + b"y" * (LIMIT * 2),  # comments, then no end
    ],
    ids=["cr-line", "cr-lines-one-event", "comments-then-endless"],
)
async def test_the_cap_holds_with_cr_line_ends(provider: str, body: bytes) -> None:
    response = WireResponse(body, chunking=Chunking.random(5, 8192))
    events, error, _ = await run(provider, response, max_event_bytes=LIMIT)
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "max_event_bytes=65,536" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p != "openai_responses"])
async def test_many_events_just_under_the_cap_pass(provider: str) -> None:
    # The cap is per event, not per stream: 40 events of 60 KiB each (2.4 MiB) are fine.
    # (Responses repeats the whole output in its closing event, which the cap then bounds.)
    from llm_worker.testing._model_server import _encoder

    text = "z" * (60 * 1024)
    body = _encoder(provider)(ScriptedResponse([TextPart(text) for _ in range(40)]), model="m")
    events, error, _ = await run(
        provider, WireResponse(body, chunking=Chunking.random(6, 4096)), max_event_bytes=LIMIT
    )
    assert error is None, error
    texts = [
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]
    assert "".join(texts) == text * 40


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_base_url_with_query_fragment_and_trailing_slash(provider: str) -> None:
    async with WireServer([WireResponse(HTML)]) as server:
        cls, suffix = _CLIENTS[provider]
        c = cls(
            model="m",
            api_key=KEY,
            base_url=f"{server.base_url}{suffix}/?v=1&w=a%2Fb#frag",
            retry=RetryPolicy.disabled(),
        )
        assert "frag" not in repr(c.transport.url("/x"))
        await streams.collect(c, Request([Message.user("hi")]))
        await c.aclose()
    [request] = server.requests
    assert request.path.startswith(suffix + "/") and "//" not in request.path
    assert "#" not in request.path and "frag" not in request.path
    assert request.query["v"] == "1" and request.query["w"] == "a/b"


def _hostile_answers(provider: str) -> list[WireResponse]:
    """Answers of each kind probed above, for the cancellation campaign."""
    from llm_worker.testing._model_server import _encoder

    calls: list[Part] = [TextPart("t" * 300), ToolUsePart("c1", "lookup", {"city": "Oslo" * 50})]
    normal = _encoder(provider)(ScriptedResponse(calls), model="m")
    answers = [
        WireResponse(normal, chunking=Chunking.random(7, 40)),
        WireResponse(duplicate_ids(provider).body_bytes(), chunking=Chunking.random(8, 40)),
        WireResponse(WRONG_FIELDS[provider][0], chunking=Chunking.bytewise()),
        WireResponse(b"data: " + b"x" * 200_000, chunking=Chunking.random(9, 4096)),
        WireResponse(HTML, chunking=Chunking.bytewise()),
    ]
    if provider == "gemini":
        from test_gemini_partial_args import STREAMED

        answers.append(WireResponse(STREAMED, chunking=Chunking.random(10, 30)))
    return answers


def _open_fds() -> int | None:
    import os

    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancelling_at_random_points_leaks_no_task_or_socket(provider: str) -> None:
    import asyncio
    import random

    rng = random.Random(f"cancel-{provider}")
    answers = _hostile_answers(provider)
    cases = [(answer, rng.randint(0, 12)) for answer in answers for _ in range(6)]
    fds = _open_fds()
    tasks = len(asyncio.all_tasks())
    # One connection, and a short wait for it: a stream that kept its connection after
    # being cancelled makes the next request fail with a pool timeout.
    limits = httpx.Limits(max_connections=1)
    http = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(5.0, pool=0.5))
    async with WireServer([answer for answer, _ in cases]) as server, http:
        c = client(provider, server, max_event_bytes=LIMIT, http_client=http, max_concurrency=None)
        for _, at in cases:
            stream = c.stream(Request([Message.user("hi")]))
            with anyio.fail_after(10), anyio.CancelScope() as scope:
                seen = 0
                try:
                    async for _event in stream:
                        seen += 1
                        if seen >= at:
                            # Cancelled where the stream awaits next: inside the transport,
                            # the decoder or a mapper's generator, wherever that is.
                            scope.cancel()
                except APITimeoutError:
                    raise
                except ProviderError:
                    pass  # the hostile answers end in typed errors; a pool timeout is a leak
            await stream.aclose()  # type: ignore[attr-defined]
        await c.aclose()
    assert len(asyncio.all_tasks()) == tasks
    if fds is not None:
        assert _open_fds() == fds


@pytest.mark.anyio
async def test_message_start_blocks_then_streamed_blocks_share_one_id_space() -> None:
    # A resumed turn whose message_start holds a tool_use, then streamed blocks: the second
    # call reuses its id. Both are blocks of one answer; the duplicate fails the stream.
    start = {
        **ANTHROPIC_START,
        "message": {
            **ANTHROPIC_START["message"],
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Oslo"}}
            ],
        },
    }
    again = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    body = sse(
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "x"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": again},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    )
    events, error, _ = await run("anthropic", WireResponse(body))
    error = failed_in_order(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "'toolu_1'" in error.message
    starts = [e.index for e in events if isinstance(e, BlockStart)]
    assert starts == [0, 1]  # the carried call, then the streamed text; never the duplicate


# Every JSON value of a small answer (text, then a tool call) replaced by each of these.
_HOSTILE_VALUES: list[Any] = [7, 1.5, True, None, "", [1], {"a": 1}, 2**63 - 1, -1]


def _every_field_mutated(provider: str) -> list[bytes]:
    from llm_worker.testing._model_server import _encoder

    parts: list[Part] = [TextPart("Hi"), ToolUsePart("c1", "lookup", {"city": "Oslo"})]
    body = _encoder(provider)(ScriptedResponse(parts), model="m")
    text = body.decode() if isinstance(body, bytes) else body
    lines = text.splitlines(keepends=True)
    out: list[bytes] = []
    for n, line in enumerate(lines):
        if not line.startswith("data:") or "{" not in line:
            continue
        doc = json.loads(line[5:])
        for path in _paths(doc, ()):
            for value in _HOSTILE_VALUES:
                mutated = json.loads(line[5:])
                node = mutated
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = value
                new = [*lines[:n], f"data: {json.dumps(mutated)}\n", *lines[n + 1 :]]
                out.append("".join(new).encode())
    return out


def _paths(node: Any, at: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:  # pyright: ignore[reportUnknownVariableType]
        found.append((*at, key))
        found.extend(_paths(value, (*at, key)))
    return found


def _typed_events(events: list[Event]) -> None:
    """Every field of every event has its declared type: the wrong type never gets through."""
    from llm_worker.events import BlockStop, UsageEvent

    for event in events:
        if isinstance(event, BlockDelta):
            for name in ("text", "partial_json", "signature"):
                value = getattr(event.delta, name, "")
                assert type(value) is str, event
        elif isinstance(event, BlockStart) and isinstance(event.metadata, ToolUseMetadata):
            assert type(event.metadata.id) is str and event.metadata.id, event
            assert type(event.metadata.name) is str and event.metadata.name, event
        elif isinstance(event, BlockStop):
            assert event.raw_stop_reason is None or type(event.raw_stop_reason) is str, event
        elif isinstance(event, UsageEvent):
            for name in USAGE_FIELDS:  # the counters (`path` says where it came from)
                value = getattr(event, name)
                assert value is None or type(value) is int, event


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_field_of_an_answer_wrongly_typed(provider: str) -> None:
    from llm_worker.errors import LLMWorkerError

    bodies = iter(_every_field_mutated(provider))
    count = 0
    async with WireServer(handler=lambda _: WireResponse(next(bodies))) as server:
        c = client(provider, server)
        for _ in range(len(_every_field_mutated(provider))):
            events, error = await streams.collect(c, Request([Message.user("hi")]))
            assert error is None or isinstance(error, LLMWorkerError), repr(error)
            _typed_events(events)
            streams.assemble(events, Origin(provider, "m"))
            count += 1
        await c.aclose()
    assert count > 100
