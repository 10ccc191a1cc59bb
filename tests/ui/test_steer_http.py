"""A steer sent over HTTP while a run streams (`POST {path}/{chat id}/steer`), only by its owner."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.messages import Part
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

from .conftest import PROVIDERS, scripted, serve

pytestmark = pytest.mark.anyio
USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Book Kyoto."}]}
AG_USER = {"id": "u1", "role": "user", "content": "Book Kyoto."}


def owner(request: Any, chat_id: str) -> str | None:
    return request.headers.get("x-user") or None


def script() -> list[ScriptedResponse]:
    parts: list[Part] = [
        TextPart("Let me book that for you. " * 4),
        ToolUsePart("call_1", "book_hotel", {"city": "Kyoto"}),
    ]
    slow = ScriptedResponse(parts, chunk_size=4, delay=0.01)
    return [slow, ScriptedResponse.text("Osaka it is.")]


async def steered_run(adapter_type: Any, provider: str, body: dict[str, Any]) -> dict[str, Any]:
    booked: list[str] = []

    @tool
    def book_hotel(city: str) -> str:
        """Book a hotel."""
        booked.append(city)
        return "booked"

    async with scripted(provider, script()) as (server, factory):

        def make() -> Worker:
            worker = Worker(factory.client, tools=[book_hotel])
            factory.workers.append(worker)
            return worker

        adapter = adapter_type(make, authorize=owner)
        async with serve(adapter) as url, httpx.AsyncClient(timeout=10) as http:
            chat = body.get("id") or body.get("threadId")
            answers: dict[str, int] = {}
            lines: list[str] = []
            with anyio.fail_after(10):
                async with http.stream(
                    "POST", url, json=body, headers={"x-user": "ana"}
                ) as response:
                    async for line in response.aiter_lines():
                        lines.append(line)
                        if not answers and line.startswith("data:"):
                            for who, headers in (("eve", {"x-user": "eve"}), ("anon", {})):
                                other = await http.post(
                                    f"{url}/{chat}/steer",
                                    json={"message": "Eve was here."},
                                    headers=headers,
                                )
                                answers[who] = other.status_code
                            mine = await http.post(
                                f"{url}/{chat}/steer",
                                json={"message": "Osaka instead."},
                                headers={"x-user": "ana"},
                            )
                            answers["ana"] = mine.status_code
                after = await http.post(
                    f"{url}/{chat}/steer", json={"message": "late"}, headers={"x-user": "ana"}
                )
                bad = await http.post(
                    f"{url}/{chat}/steer", json={"message": ""}, headers={"x-user": "ana"}
                )
        second = server.requests[1].json() if len(server.requests) > 1 else {}
    return {
        "answers": answers,
        "after": after.status_code,
        "bad": bad.status_code,
        "booked": booked,
        "second": str(second),
        "text": "\n".join(lines),
    }


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_owner_steers_a_streaming_vercel_run(provider: str) -> None:
    body = {"id": "chat-1", "messages": [USER], "trigger": "submit-message"}
    out = await steered_run(VercelAIAdapter, provider, body)
    assert out["answers"] == {"eve": 404, "anon": 403, "ana": 202}
    assert out["booked"] == []  # the call had not started: skipped for the new instruction
    assert "Osaka instead." in out["second"] and "Eve was here." not in out["second"]
    assert "Osaka it is." in out["text"]
    assert out["after"] == 404 and out["bad"] == 400  # no run streams any more; an empty text


async def test_the_owner_steers_a_streaming_agui_run() -> None:
    body = {"threadId": "t1", "runId": "r1", "messages": [AG_USER], "tools": []}
    out = await steered_run(AGUIAdapter, "anthropic", body)
    assert out["answers"] == {"eve": 404, "anon": 403, "ana": 202}
    assert out["booked"] == []
    assert "Osaka instead." in out["second"]
    assert "Osaka it is." in out["text"]
