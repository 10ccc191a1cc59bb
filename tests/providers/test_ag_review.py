"""Adversarial probes of the Anthropic and Gemini depth work (issue #20).

Citation offsets over multi-byte text, spans outside the answer, hostile grounding indices,
ids that collide, grounding never sent anywhere, Anthropic citations / callers / compaction
blocks to other models and providers after a JSON round trip, and efforts for unknown models.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_gemini_support import TIMEOUT, assemble, check_invariants, replay

from llm_worker import RunStatus, Worker, tool
from llm_worker.events import Event, StopReason
from llm_worker.messages import (
    Message,
    Origin,
    Request,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import WireResponse, WireServer
from llm_worker.worker._turn import MALFORMED_CALL_RETRIES

pytestmark = pytest.mark.anyio

MODEL = "gemini-2.5-flash"
ORIGIN = Origin("gemini", MODEL)


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def _chunk(parts: list[dict[str, Any]], finish: str | None = None, **more: Any) -> Any:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    candidate.update(more)
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


async def _answer(body: bytes) -> tuple[list[Event], Message]:
    events, error, _ = await replay(WireResponse(body))
    assert error is None, error
    check_invariants(events, error)
    return events, assemble(events, ORIGIN)


def _byte_span(text: str, piece: str) -> dict[str, int]:
    start = len(text[: text.index(piece)].encode())
    return {"startIndex": start, "endIndex": start + len(piece.encode())}


async def _cited(text: str, *sources: dict[str, Any]) -> TextPart:
    body = _sse(_chunk([{"text": text}], "STOP", citationMetadata={"citationSources": sources}))
    _, message = await _answer(body)
    [part] = message.content
    assert isinstance(part, TextPart)
    return part


# -- Gemini: byte offsets over multi-byte text ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "piece"),
    [
        ("東京は日本の首都です。大阪も大きい。", "大阪も大きい"),
        ("Hi 👋🏽 there 😀, the 🇫🇷 flag.", "the 🇫🇷 flag"),
        ("Cafe\u0301 and nai\u0308ve words.", "nai\u0308ve"),
    ],
)
async def test_a_byte_span_over_multi_byte_text_is_the_right_characters(
    text: str, piece: str
) -> None:
    part = await _cited(text, {**_byte_span(text, piece), "uri": "https://s.example"})
    [citation] = part.citations
    assert citation.start_index is not None and citation.end_index is not None
    assert part.text[citation.start_index : citation.end_index] == piece


@pytest.mark.parametrize(
    "span",
    [
        {"startIndex": 4, "endIndex": 10_000},  # the end past the answer
        {"startIndex": 9_000, "endIndex": 10_000},  # all of it past the answer
        {"startIndex": -5, "endIndex": 3},  # a negative start
        {"startIndex": 2, "endIndex": -1},  # a negative end
    ],
)
async def test_a_span_outside_the_answer_is_left_unset(span: dict[str, int]) -> None:
    part = await _cited("短い答え。", {**span, "uri": "https://s.example"})
    [citation] = part.citations
    assert (citation.start_index, citation.end_index) == (None, None)


async def test_a_negative_grounding_chunk_index_names_no_chunk() -> None:
    text = "Paris is in France."
    grounding = {
        "groundingChunks": [{"web": {"uri": "https://last.example", "title": "Last"}}],
        "groundingSupports": [
            {"segment": _byte_span(text, "Paris"), "groundingChunkIndices": [-1, 0]}
        ],
    }
    _, message = await _answer(_sse(_chunk([{"text": text}], "STOP", groundingMetadata=grounding)))
    part = message.content[0]
    assert isinstance(part, TextPart)
    assert [c.url for c in part.citations] == [None, "https://last.example"]


# -- Gemini: ids and grounding on replay ----------------------------------------------------


async def test_a_call_id_gemini_repeats_is_kept_apart_and_still_echoed() -> None:
    # Gemini gave the id `c1` to an earlier call of the conversation, and gives it again.
    first = ToolUsePart("c1", "lookup", {"city": "Paris"}, origin=ORIGIN, item_id="c1")
    history = [
        Message.user("Weather?"),
        Message("assistant", [first]),
        Message("user", [ToolResultPart("c1", "sunny", name="lookup")]),
    ]
    call = {"functionCall": {"id": "c1", "name": "lookup", "args": {"city": "Rome"}}}
    events, error, _ = await replay(
        WireResponse(_sse(_chunk([call], "STOP"))), request=Request(history)
    )
    assert error is None, error
    [again] = assemble(events, ORIGIN).content
    assert isinstance(again, ToolUsePart)
    assert again.id != "c1" and again.item_id == "c1"
    history += [Message("assistant", [again]), Message("user", [ToolResultPart(again.id, "rain")])]
    contents = gemini_body(Request(history), MODEL)["contents"]
    responses = [
        p["functionResponse"] for c in contents for p in c["parts"] if "functionResponse" in p
    ]
    assert [(r["id"], r["name"]) for r in responses] == [("c1", "lookup"), ("c1", "lookup")]


# -- Gemini: refused tool calls and the Worker ----------------------------------------------


def _refused() -> WireResponse:
    refused = {"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0, "finishMessage": "bad"}
    return WireResponse(_sse({"candidates": [refused]}))


def _called(city: str) -> WireResponse:
    call = {"functionCall": {"name": "lookup", "args": {"city": city}}}
    return WireResponse(_sse(_chunk([call], "STOP")))


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


async def test_refused_calls_between_good_calls_are_not_in_a_row() -> None:
    # Each refusal is followed by a call that ran: the retry bound counts refusals in a row.
    answers = [_refused(), _called("Paris")] * (MALFORMED_CALL_RETRIES + 1)
    done = WireResponse(_sse(_chunk([{"text": "All sunny."}], "STOP")))
    async with WireServer([*answers, _refused(), done]) as server:
        client = GeminiClient(
            model=MODEL,
            api_key="gemini-test-key-0123456789",
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        try:
            with anyio.fail_after(TIMEOUT):
                result = await Worker(client, tools=[lookup]).run("Weather?")
        finally:
            await client.aclose()
    assert (result.status, result.stop_reason, result.text) == (
        RunStatus.FINISHED,
        StopReason.END_TURN,
        "All sunny.",
    )
