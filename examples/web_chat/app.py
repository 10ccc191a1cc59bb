"""The Worker behind examples/web_chat: `llm-worker serve app:make_worker --static .`

Run it from this folder:

    cd examples/web_chat
    uv run llm-worker serve app:make_worker --static . --resumable   # open http://127.0.0.1:8000

`--resumable` keeps a run going when the page reloads (the page reads it again) and makes
the page's Stop button stop it (`DELETE /api/chat/{id}/stream`).

Offline by default: a scripted model behind the Anthropic wire format on 127.0.0.1 thinks,
checks the weather and asks to book a trip (a tool that needs your approval); ask it for a
story and it tells a long one, slowly (to try Stop and a reload). With
`LLM_WORKER_MODEL=provider:model` (and its API key) a real model answers instead.
"""

from __future__ import annotations

import os

from llm_worker import TextPart, ThinkingPart, ToolUsePart, Worker, tool
from llm_worker.providers import AnthropicClient, LLMClient
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse


@tool(effect="read_only")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 24°C"


@tool(requires_approval=True)
def book_trip(city: str) -> str:
    """Book a trip to a city (a person approves each booking)."""
    return f"Trip to {city} booked, confirmation KY-2041."


STORY = (
    """## The traveller of Kyoto

Once upon a time a traveller came to **Kyoto** with a small bag and a long list:

- the temples at dawn,
- the *bamboo* grove at noon,
- and tea by the river at dusk.

"""
    + "She walked from one to the next, and each was better than she had hoped. " * 12
)


def scripted_answer(call: ScriptedRequest) -> ScriptedResponse:
    """The offline model: plan and call tools, then answer from their results."""
    results, messages = call.tool_results, call.request.messages
    asked = messages[-1].text.lower() if messages else ""
    if results and not asked:  # (a new message beside results: calls it left unanswered)
        said = " ".join(r.content for r in results)
        return ScriptedResponse([TextPart(f"Here is what happened: {said}")], chunk_size=6)
    if "story" in asked:
        return ScriptedResponse([TextPart(STORY)], chunk_size=8, delay=0.03)  # about 4 s
    return ScriptedResponse(
        [
            ThinkingPart("The user wants a trip. Check the weather, then book.", signature="s1"),
            TextPart("Let me check the weather in Kyoto and book your trip."),
            ToolUsePart("", "weather", {"city": "Kyoto"}),
            ToolUsePart("", "book_trip", {"city": "Kyoto"}),
        ],
        chunk_size=6,
    )


_server: ScriptedModelServer[AnthropicClient] | None = None
_client: LLMClient | None = None


async def _offline_client() -> LLMClient:
    # One scripted server for the process, started on the first request in uvicorn's loop.
    global _server, _client
    if _client is None:
        server = ScriptedModelServer("anthropic", [scripted_answer] * 10_000)
        await server.__aenter__()
        _server, _client = server, server.client()
    return _client


async def make_worker() -> Worker:
    """A fresh Worker per request: the adapter gives it the browser's history."""
    # A model string makes the Worker own its client: the adapter closes it after the request.
    client = os.environ.get("LLM_WORKER_MODEL") or await _offline_client()
    return Worker(client, tools=[weather, book_trip], system="You are a travel assistant.")
