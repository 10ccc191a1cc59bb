"""Review probes of `POST {path}/{chat id}/steer`: hostile bodies and a hostile second client."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.messages import Part
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import VercelAIAdapter
from llm_worker.ui._steer import MAX_STEER_CHARS

from .conftest import scripted, serve

pytestmark = pytest.mark.anyio
USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Book Kyoto."}]}
BODY = {"id": "chat-1", "messages": [USER], "trigger": "submit-message"}


def owner(request: Any, chat_id: str) -> str | None:
    return request.headers.get("x-user") or None


async def test_hostile_steers_are_refused_and_never_reach_the_run() -> None:
    booked: list[str] = []

    @tool
    def book_hotel(city: str) -> str:
        """Book a hotel."""
        booked.append(city)
        return "booked"

    parts: list[Part] = [
        TextPart("Let me book that for you. " * 4),
        ToolUsePart("call_1", "book_hotel", {"city": "Kyoto"}),
    ]
    answers = [ScriptedResponse(parts, chunk_size=4, delay=0.01), ScriptedResponse.text("ok")]
    async with scripted("anthropic", answers) as (server, factory):

        def make() -> Worker:
            worker = Worker(factory.client, tools=[book_hotel])
            factory.workers.append(worker)
            return worker

        adapter = VercelAIAdapter(make, authorize=owner)
        got: dict[str, int] = {}
        async with serve(adapter) as url, httpx.AsyncClient(timeout=10) as http:
            ana = {"x-user": "ana"}
            raw = {**ana, "content-type": "application/json"}
            probes: list[tuple[str, str, dict[str, Any]]] = [
                ("huge", "chat-1", {"json": {"message": "x" * (MAX_STEER_CHARS + 1)}}),
                ("bytes", "chat-1", {"content": b'{"message": "' + b"y" * 200_000 + b'"}'}),
                ("surrogate", "chat-1", {"content": b'{"message": "\\ud800 hi"}'}),
                ("array", "chat-1", {"json": ["steer"]}),
                ("mode", "chat-1", {"json": {"message": "hi", "mode": "take_over"}}),
                ("not_json", "chat-1", {"content": b"\xff\xfe{"}),
                ("blank", "chat-1", {"json": {"message": " \n\t"}}),
                ("forged", "chat-1%2F..%2Fchat-2", {"json": {"message": "hi"}}),
                ("other_chat", "chat-2", {"json": {"message": "hi"}}),
            ]
            with anyio.fail_after(20):
                async with http.stream("POST", url, json=BODY, headers=ana) as response:
                    async for line in response.aiter_lines():
                        if got or not line.startswith("data:"):
                            continue
                        for name, chat, kwargs in probes:
                            headers = raw if "content" in kwargs else ana
                            answer = await http.post(
                                f"{url}/{chat}/steer", headers=headers, **kwargs
                            )
                            got[name] = answer.status_code
                        eve = await http.post(
                            f"{url}/chat-1/steer",
                            json={"message": "Eve was here."},
                            headers={"x-user": "eve"},
                        )
                        got["eve"] = eve.status_code
        sent = str(server.requests[1].json()) if len(server.requests) > 1 else ""
    assert got["huge"] == 413 and got["bytes"] == 413
    for name in ("surrogate", "array", "mode", "not_json", "blank"):
        assert got[name] == 400, (name, got[name])
    assert got["forged"] in (400, 404) and got["other_chat"] == 404 and got["eve"] == 404
    assert booked == ["Kyoto"]  # nothing was steered: the call ran
    assert "Book Kyoto." in sent  # the second request went, carrying none of the probes
    assert "Eve was here." not in sent and "'hi'" not in sent and "take_over" not in sent
