"""Gemini parts of no neutral kind (`executableCode`, `codeExecutionResult`, …): kept whole.

The recorded answers are replayed over HTTP through `GeminiClient` and assembled as the Worker
keeps them; the expected parts are read from the recording's JSON (not through the client).
The next request to the same model must hold them exactly, in place, signature included;
another model and every other client drop them.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_gemini_support import (
    API,
    TIMEOUT,
    assemble,
    check_invariants,
    client_for,
    recorded_chunks,
    recorded_model,
    recording_response,
    replay,
)

from llm_worker import Worker
from llm_worker.messages import (
    Message,
    Origin,
    ProviderPart,
    Request,
    TextPart,
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

CODE = "code_execution_parts"
_NEUTRAL = {"text", "functionCall"}


def _recorded_parts(name: str) -> list[dict[str, Any]]:
    """Every part of the recorded answer, in order (candidate 0)."""
    parts: list[dict[str, Any]] = []
    for chunk in recorded_chunks(load(API, name)["response"]["body"]):
        for candidate in chunk.get("candidates", []):
            parts.extend(candidate.get("content", {}).get("parts", []))
    return parts


def _native(name: str) -> list[dict[str, Any]]:
    return [p for p in _recorded_parts(name) if not _NEUTRAL & set(p)]


async def _answer(name: str) -> tuple[Message, Origin]:
    model = recorded_model(name)
    events, error, _ = await replay(recording_response(name))
    assert error is None, error
    check_invariants(events, error)
    origin = Origin("gemini", model)
    return assemble(events, origin), origin


@pytest.mark.parametrize(
    ("name", "kinds"),
    [(CODE, ["executableCode", "codeExecutionResult"]), ("file_search_tool", ["executableCode"])],
)
async def test_recorded_native_parts_are_kept_whole_in_order(name: str, kinds: list[str]) -> None:
    message, origin = await _answer(name)
    kept = [
        p
        for p in message.content
        if isinstance(p, ProviderPart) and "groundingMetadata" not in p.data
    ]
    want = _native(name)
    assert [next(iter(set(d) - {"thoughtSignature"})) for d in want] == kinds
    assert [p.data for p in kept] == want
    assert all(p.origin == origin for p in kept)
    # The native parts come first, before the answer's text, as in the recording (file
    # search's grounding metadata is kept last: it is about the answer, not part of it).
    grounding = [ProviderPart] if name == "file_search_tool" else []
    assert [type(p) for p in message.content] == [
        *[ProviderPart] * len(kinds),
        TextPart,
        *grounding,
    ]


async def test_the_signature_stays_on_the_code_part() -> None:
    message, _ = await _answer(CODE)
    code = message.content[0]
    assert isinstance(code, ProviderPart)
    assert code.data["thoughtSignature"] == _recorded_parts(CODE)[0]["thoughtSignature"]
    text = message.content[-1]
    assert isinstance(text, TextPart)
    # The closing empty part's signature rides on the text, not on a native part.
    assert text.signature == _recorded_parts(CODE)[-1]["thoughtSignature"]


def _expected_model_turn(name: str) -> dict[str, Any]:
    parts = _recorded_parts(name)
    texts = "".join(p.get("text", "") for p in parts)
    return {
        "role": "model",
        "parts": [
            *_native(name),
            {"text": texts, "thoughtSignature": parts[-1]["thoughtSignature"]},
        ],
    }


async def test_the_next_request_sends_them_back_exactly() -> None:
    message, origin = await _answer(CODE)
    history = [Message.user("calculate"), message, Message.user("and doubled?")]
    client = GeminiClient(model=origin.model, api_key="k")
    body = client.build_body(Request(history))
    assert body["contents"][1] == _expected_model_turn(CODE)
    # The same after a trip through JSON (a paused run, a saved session).
    again = client.build_body(Request(messages_from_json(messages_to_json(history))))
    assert again == body
    # The body holds copies: changing it leaves the history as it was.
    body["contents"][1]["parts"][0]["extra"] = 1
    first = message.content[0]
    assert isinstance(first, ProviderPart)
    assert "extra" not in first.data


async def test_another_gemini_model_gets_none_of_them() -> None:
    message, _ = await _answer(CODE)
    body = GeminiClient(model="gemini-2.5-flash", api_key="k").build_body(
        Request([Message.user("calculate"), message, Message.user("and doubled?")])
    )
    dumped = orjson.dumps(body)
    assert b"executableCode" not in dumped
    assert b"codeExecutionResult" not in dumped
    # The text goes, without its signature (bound to the other model).
    assert body["contents"][1]["parts"] == [{"text": message.text}]


def _other_clients() -> list[HttpClient]:
    return [
        AnthropicClient(model="claude-sonnet-4-5", api_key="k"),
        OpenAIChatClient(model="gpt-4o", api_key="k"),
        OpenAIResponsesClient(model="gpt-5", api_key="k"),
    ]


@pytest.mark.parametrize("client", _other_clients(), ids=lambda c: c.provider)
async def test_other_providers_drop_them(client: HttpClient) -> None:
    message, _ = await _answer(CODE)
    body = client.build_body(Request([Message.user("calculate"), message, Message.user("more")]))
    dumped = orjson.dumps(body)
    assert b"executableCode" not in dumped
    assert b"codeExecutionResult" not in dumped
    assert b"-428,330" in dumped  # the answer's text goes everywhere


def _sse(*parts: dict[str, Any], finish: str | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return f"data: {orjson.dumps({'candidates': [candidate]}).decode()}\n\n"


async def test_unknown_parts_are_kept_and_a_bare_signature_part_is_passed_over() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    future = {"someFuturePart": {"x": [1, 2]}, "thought": True}
    body = (
        _sse({"text": "See: "}, image)
        + _sse({"thoughtSignature": "c2ln"}, future)
        + _sse({"text": "done"}, finish="STOP")
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events, error)
    message = assemble(events, Origin("gemini", "gemini-2.5-flash"))
    assert message.content == [
        TextPart("See: "),
        ProviderPart(image, origin=Origin("gemini", "gemini-2.5-flash")),
        ProviderPart(future, origin=Origin("gemini", "gemini-2.5-flash")),
        TextPart("done"),
    ]


async def test_the_worker_sends_the_code_execution_back_on_the_next_run() -> None:
    final = _sse({"text": "Doubled: -856,661,911.9549."}, finish="STOP")
    async with WireServer([recording_response(CODE), WireResponse(final)]) as server:
        client = client_for(server, model=recorded_model(CODE))
        worker = Worker(client)
        try:
            with anyio.fail_after(TIMEOUT):
                await worker.run("calculate")
                result = await worker.run("and doubled?")
        finally:
            await client.aclose()
    assert result.text == "Doubled: -856,661,911.9549."
    second = server.requests[1].json()
    assert second["contents"][1] == _expected_model_turn(CODE)
    assert second["contents"][2] == {"role": "user", "parts": [{"text": "and doubled?"}]}
