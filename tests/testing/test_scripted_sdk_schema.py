"""Every event the scripted model server streams parses strictly with the official SDKs.

The SDKs' own event models are the schema of record: `openai` (`ChatCompletionChunk`, the
Responses `ResponseStreamEvent` union), `anthropic` (`RawMessageStreamEvent`, and its
`ErrorResponse` for an `error` event) and `google-genai` (`GenerateContentResponse`). Each data
line is validated from its JSON text in strict mode (no coercion: a number sent as a string
fails), every required field must be there, and no field may be one the SDK does not know
(google-genai forbids them itself; for the others the models' extras are checked to be empty).
The SDKs are a dev dependency only.

Not validated: Anthropic's `ping` (the SDK's stream skips it; it has no model), Chat's
`[DONE]` sentinel, and the error chunk of Chat and Gemini (the SDKs raise on them: no model
either). Anthropic has no `content_filter` stop: that answer is refused before it streams.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import BaseModel, TypeAdapter

from llm_worker.errors import OverloadedError
from llm_worker.events import StopReason, UsageEvent
from llm_worker.messages import TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse

anthropic_types = pytest.importorskip("anthropic.types", reason="the anthropic SDK (dev group)")
openai_chat = pytest.importorskip("openai.types.chat", reason="the openai SDK (dev group)")
openai_responses = pytest.importorskip("openai.types.responses", reason="the openai SDK")
genai_types = pytest.importorskip("google.genai.types", reason="the google-genai SDK (dev group)")

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(
    input_tokens=40,
    output_tokens=12,
    total_tokens=52,
    cache_read_input_tokens=8,
    cache_creation_input_tokens=4,
    reasoning_tokens=3,
)

ANSWERS = {
    "text": ScriptedResponse.text("Hello, wörld — 👋!", chunk_size=4),
    "text-usage-unknown-total": ScriptedResponse.text(
        "Hi", usage=UsageEvent(input_tokens=3, output_tokens=1)
    ),
    "thinking-text-calls": ScriptedResponse(
        [
            ThinkingPart("Plan one.", signature="c2lnbmF0dXJlLTE="),  # base64, as real ones
            TextPart("Checking."),
            ToolUsePart("", "get_weather", {"city": "Oslo"}),
            ToolUsePart("", "get_time", {}),
        ],
        usage=USAGE,
        chunk_size=5,
    ),
    "structured": ScriptedResponse.output({"number": "A-1", "total": 12.5}, chunk_size=3),
    "structured-tool": ScriptedResponse.output({"number": "A-1"}, tool="final_result"),
    "max-tokens": ScriptedResponse.text("1, 2, 3", stop_reason=StopReason.MAX_TOKENS),
    "refusal": ScriptedResponse.text("I can't help.", stop_reason=StopReason.REFUSAL),
    "content-filter": ScriptedResponse.text("x", stop_reason=StopReason.CONTENT_FILTER),
    "overloaded": ScriptedResponse.text(
        "Partial", fail_with=OverloadedError("Overloaded.", error_type="overloaded_error")
    ),
}


def _adapter(provider: str, data: dict[str, Any]) -> TypeAdapter[Any] | None:
    """The SDK model of one data line, or `None` for the lines no SDK model describes."""
    kind = data.get("type")
    if kind == "ping" or ("error" in data and provider in ("openai_chat", "gemini")):
        return None
    if provider == "anthropic":
        model: Any = (
            anthropic_types.ErrorResponse
            if kind == "error"
            else anthropic_types.RawMessageStreamEvent
        )
    else:
        model = {
            "openai_chat": openai_chat.ChatCompletionChunk,
            "openai_responses": openai_responses.ResponseStreamEvent,
            "gemini": genai_types.GenerateContentResponse,
        }[provider]
    return TypeAdapter(model)


# Fields the scripted server sends beyond the official API on purpose: compatible servers'
# extensions its clients read (DeepSeek / vLLM `reasoning_content` in Chat deltas).
EXTENSIONS = {"reasoning_content"}


def _extras(value: Any, path: str = "") -> list[str]:
    """Fields of a validated model (at any depth) that its SDK does not declare."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        extra = set(value.__pydantic_extra__ or {}) - EXTENSIONS
        found.extend(f"{path}.{name}" for name in sorted(extra))
        for name in type(value).model_fields:
            found.extend(_extras(getattr(value, name), f"{path}.{name}"))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found.extend(_extras(item, f"{path}[{i}]"))
    elif isinstance(value, dict):
        for key, item in value.items():
            found.extend(_extras(item, f"{path}.{key}"))
    return found


def _data_lines(body: bytes) -> list[bytes]:
    lines = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    return [line for line in lines if line != b"[DONE]"]


async def _streamed(provider: str, answer: ScriptedResponse) -> bytes:
    """The body the server streams for `answer`, as a real client receives it over HTTP."""
    import httpx

    async with ScriptedModelServer(provider, [answer], model="m") as server:
        path = {
            "openai_chat": "/v1/chat/completions",
            "openai_responses": "/v1/responses",
            "anthropic": "/v1/messages",
            "gemini": "/v1beta/models/m:streamGenerateContent?alt=sse",
        }[provider]
        body = {"model": "m", "messages": [], "input": [], "contents": [], "stream": True}
        async with httpx.AsyncClient() as http:
            response = await http.post(server.base_url + path, json=body)
            return response.content


CASES = [
    pytest.param(provider, answer, id=f"{provider}-{answer}")
    for provider in sorted(WIRE_PROVIDERS)
    for answer in ANSWERS
    if (provider, answer) != ("anthropic", "content-filter")
]


@pytest.mark.parametrize(("provider", "answer"), CASES)
async def test_every_scripted_event_parses_strictly_with_the_official_sdk(
    provider: str, answer: str
) -> None:
    body = await _streamed(provider, ANSWERS[answer])
    lines = _data_lines(body)
    assert lines
    checked = 0
    for line in lines:
        adapter = _adapter(provider, orjson.loads(line))
        if adapter is None:
            continue
        event = adapter.validate_json(line, strict=True)
        assert _extras(event) == [], line
        checked += 1
    assert checked >= len(lines) - 2  # at most a ping and a Chat error chunk are left out


async def test_chat_usage_always_has_total_tokens() -> None:
    body = await _streamed("openai_chat", ANSWERS["text-usage-unknown-total"])
    usage = [orjson.loads(line)["usage"] for line in _data_lines(body)]
    assert {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4} in usage


async def test_the_responses_response_object_has_every_required_field() -> None:
    body = await _streamed("openai_responses", ANSWERS["text"])
    responses = [
        orjson.loads(line)["response"] for line in _data_lines(body) if b'"response"' in line
    ]
    assert responses
    required = {
        name
        for name, field in openai_responses.Response.model_fields.items()
        if field.is_required()
    }
    for response in responses:
        assert required <= set(response)
        openai_responses.Response.model_validate_json(orjson.dumps(response), strict=True)
