"""A hostile second client against a run tree served by the web adapters (issue 33 review)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

from .conftest import scripted, serve

pytestmark = pytest.mark.anyio

SECRET = "Child-secret-7731"
USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Research x"}]}
AG_USER = {"id": "u1", "role": "user", "content": "Research x"}


def by_header(request: Any, chat_id: str) -> str | None:
    del chat_id
    return request.headers.get("x-user")


class TreeFactory:
    """Workers whose sub-agent says a secret, then waits for approval of a write."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __call__(self) -> Worker:
        @tool(requires_approval=True)
        async def write(line: str) -> str:
            """Write a line."""
            return f"wrote {line}"

        child = Worker(
            ScriptedClient(
                lambda r: (
                    ScriptedResponse.text("child done")
                    if r.tool_results
                    else ScriptedResponse(
                        [TextPart(SECRET), ToolUsePart("", "write", {"line": "x"})], chunk_size=4
                    )
                )
            ),
            tools=[write],
        )
        kid = child.as_tool(name="research", description="Researches.")
        return Worker(self.client, tools=[kid])


SCRIPT = [
    ScriptedResponse([ToolUsePart("call_r", "research", {"input": "x"})]),
    ScriptedResponse.text("Your own chat."),
]


async def start(adapter: Any, http: httpx.AsyncClient, url: str, user: str) -> httpx.Response:
    if adapter is VercelAIAdapter:
        body: dict[str, Any] = {"id": "c1", "messages": [USER], "trigger": "submit-message"}
    else:
        body = {"threadId": "c1", "runId": "r1", "messages": [AG_USER], "tools": []}
    with anyio.fail_after(10):
        return await http.post(url, json=body, headers={"x-user": user})


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_another_owner_never_sees_a_sub_agents_events(adapter: Any) -> None:
    options = {"authorize": by_header, "resumable": True}
    async with (
        scripted("anthropic", SCRIPT) as (_, plain),
        serve(adapter(TreeFactory(plain.client), **options)) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        mine = await start(adapter, http, url, "victim")
        assert SECRET in mine.text.replace('"', "")  # the child's progress, keyed by its path
        other = {"x-user": "mallory"}
        read = await http.get(f"{url}/c1/stream", headers=other)
        stop = await http.delete(f"{url}/c1/stream", headers=other)
        theirs = await start(adapter, http, url, "mallory")  # the same chat id: their own
        own = await http.get(f"{url}/c1/stream", headers={"x-user": "victim"})
    for response in (read, stop, theirs):
        assert SECRET not in response.text and "call_r" not in response.text
    assert read.status_code == 204 and stop.status_code == 404
    assert "Your own chat." in theirs.text
    assert own.status_code == 200
