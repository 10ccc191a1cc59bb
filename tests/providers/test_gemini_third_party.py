"""Gemini shapes no public recording holds (tests/fixtures/third_party/gemini).

- `finishReason: CONTINUATION` with a `continuationToken`: the client goes on in a follow-up
  request, as google-genai does, so the Worker gets one whole answer;
- `modelStatus` (a model's deprecation or retirement) is logged once per model;
- `partMetadata` stays on the parts kept whole and is dropped from text parts.

Each goes over HTTP on 127.0.0.1 through the real `GeminiClient`, the continuation also
through a Worker whose next body's contents are checked against google-genai's types.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import orjson
import pytest
from test_gemini_support import KEY

from llm_worker import Message, Worker, tool
from llm_worker.errors import ServerError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    Event,
    StatusEvent,
    StopReason,
    TextDelta,
    UsageEvent,
)
from llm_worker.messages import Origin, ProviderPart, Request, TextPart, ToolUsePart
from llm_worker.providers._gemini_continuation import MAX_HOPS
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import streams
from support.third_party import load, response

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

API = "gemini"
MODEL = "gemini-3.5-pro"


def _client(server: WireServer, model: str = MODEL) -> GeminiClient:
    base = server.base_url + "/v1beta"
    return GeminiClient(model=model, api_key=KEY, base_url=base, retry=RetryPolicy.disabled())


async def _stream(
    *answers: WireResponse, model: str = MODEL
) -> tuple[list[Event], Exception | None, list[dict[str, Any]]]:
    async with WireServer(answers) as server:
        client = _client(server, model)
        try:
            events, error = await streams.collect(client, Request([Message.user("Go.")]))
        finally:
            await client.aclose()
        return events, error, [r.json() for r in server.requests]


def _text(events: list[Event]) -> str:
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    return "".join(d.text for d in deltas if isinstance(d, TextDelta))


def _last_stop(events: list[Event]) -> BlockStop:
    return [e for e in events if isinstance(e, BlockStop)][-1]


def _usage(events: list[Event]) -> UsageEvent:
    total = UsageEvent()
    for event in events:
        if isinstance(event, UsageEvent):
            total = total.updated(event)
    return total


def _sse(*chunks: dict[str, Any]) -> WireResponse:
    return WireResponse(b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks))


def _continuing(text: str, token: object) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": "CONTINUATION",
    }
    if token is not None:
        candidate["continuationToken"] = token
    return {"candidates": [candidate]}


def _stop(text: str) -> dict[str, Any]:
    parts = [{"text": text}]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}


# -- 3. CONTINUATION ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunking", [Chunking.whole(), Chunking.random(3, max_size=17)])
async def test_a_continuation_goes_on_in_a_follow_up_request(chunking: Chunking) -> None:
    events, error, bodies = await _stream(
        response(API, "continuation_step1", chunking), response(API, "continuation_step2", chunking)
    )
    streams.check_invariants(events, failed=False, allowed=streams.deltas())
    assert error is None
    assert (
        _text(events)
        == "Once upon a time, a fox lived by the river and watched the boats. The end."
    )
    assert len([e for e in events if isinstance(e, BlockStart)]) == 1  # one text block
    stop = _last_stop(events)
    assert (stop.stop_reason, stop.raw_stop_reason) == (StopReason.END_TURN, "STOP")
    first, second = bodies
    assert second == {**first, "continuationToken": "Q1QtMDAwMS1yaXZlcg=="}
    assert (
        load(API, "continuation_step2")["request"]["body"]["continuationToken"]
        == (second["continuationToken"])
    )
    # The requests' usage is summed: 8 + 8 prompt tokens, 12 + 9 answer tokens.
    assert _usage(events) == UsageEvent(input_tokens=16, output_tokens=21, total_tokens=37)
    closing = events[-1]
    assert isinstance(closing, StatusEvent) and closing.response_id == "resp-c1"


class Lookups:
    def __init__(self) -> None:
        self.cities: list[str] = []

    @tool
    async def lookup(self, city: str) -> str:
        """Look up the weather of a city."""
        self.cities.append(city)
        return f"{city}: clear"


def _contents_mismatches(body: dict[str, Any]) -> list[str]:
    from google.genai import types
    from pydantic import ValidationError

    found: list[str] = []
    for n, content in enumerate(body["contents"]):
        try:
            types.Content.model_validate(content)
        except ValidationError as exc:
            found.append(f"contents[{n}]: {exc}")
    return found


async def test_the_worker_gets_the_whole_continued_answer_and_its_call() -> None:
    desk = Lookups()
    answers = [
        response(API, "continuation_tool_call_step1"),
        response(API, "continuation_tool_call_step2"),
        _sse(_stop("It is clear in Kyoto.")),
    ]
    async with WireServer(answers) as server:
        client = _client(server)
        try:
            worker = Worker(client, tools=[desk.lookup])
            with anyio.fail_after(streams.TIMEOUT):
                result = await worker.run("Weather in Kyoto?")
        finally:
            await client.aclose()
        bodies = [r.json() for r in server.requests]
    assert result.text == "It is clear in Kyoto."
    assert desk.cities == ["Kyoto"]
    answer = worker.history[1]
    assert [p.text for p in answer.content if isinstance(p, TextPart)] == [
        "Let me check the weather in Kyoto."
    ]
    assert [p.name for p in answer.content if isinstance(p, ToolUsePart)] == ["lookup"]
    assert len(bodies) == 3
    assert bodies[1]["continuationToken"] == "Q1QtMDAwMi10b29s"
    assert "continuationToken" not in bodies[2]  # the next turn is a request of its own
    assert bodies[2]["contents"][1]["parts"][0] == {"text": "Let me check the weather in Kyoto."}
    assert _contents_mismatches(bodies[2]) == []


@pytest.mark.parametrize("token", [None, "", 42, {"t": 1}])
async def test_a_continuation_without_a_usable_token_ends_as_cut_by_a_limit(token: object) -> None:
    events, error, bodies = await _stream(_sse(_continuing("Half an answ", token)))
    assert error is None and len(bodies) == 1
    stop = _last_stop(events)
    assert (stop.stop_reason, stop.raw_stop_reason) == (StopReason.MAX_TOKENS, "CONTINUATION")


async def test_a_repeated_token_is_not_followed_twice() -> None:
    events, error, bodies = await _stream(
        _sse(_continuing("one ", "T1")), _sse(_continuing("two ", "T1")), _sse(_stop("never"))
    )
    assert error is None and len(bodies) == 2
    assert _text(events) == "one two "
    assert _last_stop(events).stop_reason is StopReason.MAX_TOKENS


async def test_an_endless_continuation_stops_after_max_hops() -> None:
    answers = [_sse(_continuing(f"{n} ", f"T{n}")) for n in range(MAX_HOPS + 2)]
    events, error, bodies = await _stream(*answers)
    assert error is None and len(bodies) == MAX_HOPS
    assert _last_stop(events).raw_stop_reason == "CONTINUATION"


async def test_a_failed_follow_up_fails_the_answer_as_streamed() -> None:
    failure = WireResponse(
        {"error": {"code": 500, "message": "internal", "status": "INTERNAL"}},
        status=500,
        content_type="application/json",
    )
    events, error, bodies = await _stream(_sse(_continuing("Begun ", "T1")), failure)
    streams.check_invariants(events, failed=True, allowed=streams.deltas())
    assert isinstance(error, ServerError) and error.streamed
    assert _text(events) == "Begun " and len(bodies) == 2


async def test_closing_the_stream_in_the_follow_up_releases_it() -> None:
    async with WireServer(
        [_sse(_continuing("Begun ", "T1")), response(API, "continuation_step2")]
    ) as server:
        client = _client(server)
        try:
            stream = client.stream(Request([Message.user("Go.")]))
            seen: list[str] = []
            with anyio.fail_after(streams.TIMEOUT):
                async for event in stream:
                    if not isinstance(event, BlockDelta):
                        continue
                    seen.append(_text([event]))
                    if len(seen) == 2:
                        break
                await stream.aclose()  # type: ignore[attr-defined]
        finally:
            await client.aclose()
    assert seen == ["Begun ", " and watched the boats."]


# -- 6. modelStatus and partMetadata ----------------------------------------------------------


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model status logged yet (the record is per process)."""
    from llm_worker.providers import _gemini_metadata

    monkeypatch.setattr(_gemini_metadata, "_warned", set())


@pytest.mark.usefixtures("fresh_process")
async def test_a_deprecated_model_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    model = "gemini-deprecated-for-this-test"
    with caplog.at_level(logging.DEBUG, logger="llm_worker"):
        for _ in range(2):
            _, error, _ = await _stream(response(API, "model_status_deprecated"), model=model)
            assert error is None
    notes = [r for r in caplog.records if "is DEPRECATED" in r.getMessage()]
    assert len(notes) == 1
    assert notes[0].levelno == logging.WARNING
    assert notes[0].getMessage() == (
        f"Gemini model {model} is DEPRECATED, to be retired at 2026-12-15T00:00:00Z: "
        "Use gemini-3.5-pro-002."
    )


@pytest.mark.usefixtures("fresh_process")
async def test_a_stable_model_status_is_only_debug(caplog: pytest.LogCaptureFixture) -> None:
    status = {"modelStatus": {"modelStage": "STABLE"}}
    with caplog.at_level(logging.DEBUG, logger="llm_worker"):
        _, error, _ = await _stream(_sse({**_stop("Hi."), **status}), model="gemini-stable-test")
    assert error is None
    notes = [r for r in caplog.records if "gemini-stable-test" in r.getMessage()]
    assert [r.levelno for r in notes] == [logging.DEBUG]


async def test_a_model_status_of_the_wrong_shape_is_ignored() -> None:
    events, error, _ = await _stream(_sse({**_stop("Hi."), "modelStatus": [1, 2]}))
    assert error is None and _text(events) == "Hi."


async def test_part_metadata_goes_back_on_parts_kept_whole() -> None:
    events, error, _ = await _stream(response(API, "part_metadata"))
    assert error is None
    message = streams.assemble(events, Origin(API, MODEL))
    kept = [p.data for p in message.content if isinstance(p, ProviderPart)]
    assert kept[0]["partMetadata"] == {"stream": "code-1"}
    assert kept[1]["partMetadata"] == {"stream": "code-1"}
    assert [p.text for p in message.content if isinstance(p, TextPart)] == ["It is 42."]
    body = _client_body(Request([Message.user("Go."), message, Message.user("Thanks.")]))
    parts = body["contents"][1]["parts"]
    assert parts[0]["partMetadata"] == {"stream": "code-1"}
    assert parts[2] == {"text": "It is 42."}  # dropped from text: see docs/guarantees.md
    assert _contents_mismatches(body) == []


def _client_body(request: Request) -> dict[str, Any]:
    from llm_worker.providers._gemini_request import build_body

    return build_body(request, MODEL)
