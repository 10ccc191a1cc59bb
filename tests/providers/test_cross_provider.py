"""One conversation across all four providers: the history each client builds stays valid.

The history is made for real: four recorded answers (Anthropic thinking with its signature
and a tool call; Gemini calls with a `thoughtSignature`; OpenAI Responses reasoning with its
encrypted content and a call; OpenAI Chat parallel calls) streamed through their own clients
over HTTP and assembled by the Worker's `Assembler`, each followed by the tool results. That
history then goes to every client's `build_body`, with the model of the turn it produced (its
own opaque data must go back) and with another model (nothing opaque may go back).

Checked for every body: foreign opaque data (signatures, encrypted reasoning, item ids) is
absent, the client's own is present where its module says it goes back, every tool call is
answered by its result in the place the provider requires, and the body has the provider's
shape (roles alternating where the API demands it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from llm_worker.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Origin,
    Part,
    ProviderPart,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
    RetryPolicy,
)
from llm_worker.testing import WireResponse, WireServer
from llm_worker.worker._assembler import Assembler
from support.recorded import load

KEY = "cross-provider-test-key-0123"


@dataclass(frozen=True)
class Turn:
    """A recorded answer and the client that produced it."""

    client: type[HttpClient]
    api: str
    name: str
    model: str


TURNS = [
    Turn(
        AnthropicClient,
        "anthropic_messages",
        "thinking_tool_run_step1",
        "claude-haiku-4-5-20251001",
    ),
    Turn(GeminiClient, "gemini", "parallel_function_calls_run_step1", "gemini-2.5-flash"),
    Turn(
        OpenAIResponsesClient, "openai_responses", "reasoning_encrypted_then_function_call", "gpt-5"
    ),
    Turn(OpenAIChatClient, "openai_chat", "parallel_tools_run_step1", "gpt-4o"),
]


async def produce(turn: Turn) -> Message:
    """Stream the recorded answer through its own client and assemble the assistant message."""
    response = load(turn.api, turn.name)["response"]
    wire = WireResponse(response["body"], content_type=response["content_type"])
    async with WireServer([wire]) as server:
        client = turn.client(
            model=turn.model,
            api_key=KEY,
            base_url=server.base_url,
            retry=RetryPolicy.disabled(),
        )
        assembler = Assembler(Origin(client.provider, turn.model))
        async for event in client.stream(Request([Message.user("go")])):
            assembler.feed(event)
        await client.aclose()
    return assembler.message


async def conversation() -> list[Message]:
    history = [Message.user("Use the tools, then answer.")]
    for n, turn in enumerate(TURNS):
        assistant = await produce(turn)
        assert assistant.tool_uses, f"{turn.name} made no tool call"
        history.append(assistant)
        results: list[Part] = [
            ToolResultPart(call.id, f"result {n}.{i}", name=call.name)
            for i, call in enumerate(assistant.tool_uses)
        ]
        history.append(Message("user", results))
    history[-1].content.append(TextPart("Now answer."))
    return history


def opaque(history: list[Message]) -> dict[str, Origin]:
    """Every provider-opaque string of the history, with who produced it."""
    found: dict[str, Origin] = {}
    for message in history:
        for part in message.content:
            if isinstance(part, ToolResultPart | ProviderPart | ImagePart | DocumentPart):
                continue  # no opaque field; a ProviderPart is dropped whole: tested on its own
            if part.origin is None:
                continue
            values = [part.signature, part.item_id]
            if isinstance(part, ThinkingPart):
                values.append(part.redacted)
            for value in values:
                if value:
                    found[value] = part.origin
    return found


# -- the shape each provider demands --------------------------------------------------------


def anthropic_pairs(body: dict[str, Any]) -> None:
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), "roles must alternate"
    for i, message in enumerate(messages):
        calls = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if calls:
            results = messages[i + 1]["content"]
            answered = [b["tool_use_id"] for b in results if b["type"] == "tool_result"]
            assert answered == calls
            # Tool results come first in their user message.
            assert [b["type"] for b in results[: len(calls)]] == ["tool_result"] * len(calls)
    assert body["max_tokens"] > 0


def gemini_pairs(body: dict[str, Any]) -> None:
    contents = body["contents"]
    roles = [c["role"] for c in contents]
    assert set(roles) <= {"user", "model"}
    assert all(a != b for a, b in itertools.pairwise(roles)), "roles must alternate"
    for i, content in enumerate(contents):
        calls = [p["functionCall"]["name"] for p in content["parts"] if "functionCall" in p]
        if calls:
            after = contents[i + 1]["parts"]
            answered = [p["functionResponse"]["name"] for p in after if "functionResponse" in p]
            assert answered == calls


def chat_pairs(body: dict[str, Any]) -> None:
    messages = body["messages"]
    for i, message in enumerate(messages):
        calls = [c["id"] for c in message.get("tool_calls") or []]
        if calls:
            following = messages[i + 1 : i + 1 + len(calls)]
            assert [m["role"] for m in following] == ["tool"] * len(calls)
            assert [m["tool_call_id"] for m in following] == calls
    assert all("reasoning_content" not in m for m in messages)


def responses_pairs(body: dict[str, Any]) -> None:
    items = body["input"]
    for i, item in enumerate(items):
        if item["type"] == "function_call":
            later = [o["call_id"] for o in items[i + 1 :] if o["type"] == "function_call_output"]
            assert item["call_id"] in later
            assert isinstance(orjson.loads(item["arguments"]), dict)
        if item["type"] == "reasoning":
            follower = items[i + 1]
            assert follower["type"] in ("function_call", "message")
            assert "id" in follower, "a replayed reasoning item needs its follower's id"


CHECKS: dict[type[HttpClient], Callable[[dict[str, Any]], None]] = {
    AnthropicClient: anthropic_pairs,
    GeminiClient: gemini_pairs,
    OpenAIChatClient: chat_pairs,
    OpenAIResponsesClient: responses_pairs,
}

# Opaque data that goes back to the model that made it (per each request module's docstring).
# Chat Completions has no request field for any of it.
GOES_BACK = {
    AnthropicClient: True,
    GeminiClient: True,
    OpenAIResponsesClient: True,
    OpenAIChatClient: False,
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def history() -> list[Message]:
    return await conversation()


@pytest.mark.anyio
@pytest.mark.parametrize("own_model", [True, False], ids=["same-model", "other-model"])
@pytest.mark.parametrize("turn", TURNS, ids=[t.client.__name__ for t in TURNS])
async def test_the_history_goes_to_every_provider(
    history: list[Message], turn: Turn, own_model: bool
) -> None:
    model = turn.model if own_model else "some-other-model"
    client = turn.client(model=model, api_key=KEY)
    body = client.build_body(Request(history))
    sent = orjson.dumps(body).decode()
    for value, origin in opaque(history).items():
        ours = origin == Origin(client.provider, model)
        if not ours:
            assert value not in sent, f"{origin.provider} data sent to {client.provider}"
        elif GOES_BACK[turn.client]:
            assert value in sent, f"{client.provider} dropped its own {value[:12]}…"
    CHECKS[turn.client](body)
    # Every call of the history is in the body, with its result.
    for message in history:
        for call in message.tool_uses:
            assert call.name in sent
    for result in (p for m in history for p in m.tool_results):
        assert result.content in sent
    assert "Now answer." in sent


@pytest.mark.anyio
async def test_the_history_holds_every_kind_of_opaque_data(history: list[Message]) -> None:
    providers = {origin.provider for origin in opaque(history).values()}
    assert providers == {"anthropic", "gemini", "openai_responses"}
    parts = [p for m in history for p in m.content]
    assert any(isinstance(p, ThinkingPart) and p.signature for p in parts)
    assert any(isinstance(p, ToolUsePart) and p.signature for p in parts)  # Gemini
    assert any(isinstance(p, ThinkingPart) and p.item_id for p in parts)  # Responses
    assert sum(len(m.tool_uses) for m in history) == 1 + 2 + 1 + 2


# -- the same rules on every client ---------------------------------------------------------

CLIENTS: list[type[HttpClient]] = [
    AnthropicClient,
    GeminiClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
]


@pytest.mark.parametrize("client_class", CLIENTS, ids=lambda c: c.__name__)
def test_every_client_takes_the_same_constructor_arguments(client_class: type[HttpClient]) -> None:
    # SPEC 4: one constructor shape; AnthropicClient once refused `max_concurrency`.
    client = client_class(
        model="m",
        api_key=KEY,
        base_url="http://127.0.0.1:9",
        timeout=5.0,
        retry=RetryPolicy.disabled(),
        headers={"x-extra": "1"},
        max_concurrency=3,
    )
    assert client.transport.max_concurrency == 3
    assert client.transport.retry.max_attempts == 1


_UNSUPPORTED: list[Any] = [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
    "plain text where a part belongs",
]


@pytest.mark.parametrize("part", _UNSUPPORTED, ids=["image-dict", "str"])
@pytest.mark.parametrize("role", ["user", "assistant"])
@pytest.mark.parametrize("client_class", CLIENTS, ids=lambda c: c.__name__)
def test_a_part_of_no_known_kind_is_refused_clearly(
    client_class: type[HttpClient], role: Any, part: Any
) -> None:
    # A raw provider block (an image as a dict, not an ImagePart) or a bare string is no part:
    # it must fail with a clear error, never be dropped silently (Chat did) or end in an
    # AttributeError (the others did).
    from llm_worker.errors import InvalidMessagesError

    message = Message(role, [TextPart("look"), part])
    client = client_class(model="m", api_key=KEY)
    with pytest.raises(InvalidMessagesError, match="not supported") as caught:
        client.build_body(Request([Message.user("q"), message]))
    assert ("image" if isinstance(part, dict) else "str") in str(caught.value)


@pytest.mark.parametrize("choice", ["any", "get_weather", "tool"])
@pytest.mark.parametrize("client_class", CLIENTS, ids=lambda c: c.__name__)
def test_an_unknown_tool_choice_is_a_clear_configuration_error(
    client_class: type[HttpClient], choice: Any
) -> None:
    # A tool's name or another provider's spelling ("any") where SpecificTool belongs: Gemini
    # raised a bare KeyError, the others sent it on to an HTTP 400 (or, Anthropic, took "any").
    from llm_worker.errors import ConfigurationError
    from llm_worker.messages import ToolSpec

    spec = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}})
    request = Request([Message.user("q")], tools=[spec], tool_choice=choice)
    with pytest.raises(ConfigurationError, match="SpecificTool"):
        client_class(model="m", api_key=KEY).build_body(request)
