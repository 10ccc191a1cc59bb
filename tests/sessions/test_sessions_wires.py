"""A thinking + tool history stored in a session, reloaded and continued on each wire."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import RunStatus, ThinkingPart, ToolUsePart, Worker, tool
from llm_worker.sessions import SqliteSession
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio


@tool
def note(text: str) -> str:
    """Note it."""
    return f"noted {text}"


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_a_thinking_and_tool_history_reloaded_goes_on_on_each_wire(
    provider: str, tmp_path: Path
) -> None:
    seen: list[ScriptedRequest] = []

    def answer(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(call)
        if call.index == 0:
            thinking = ThinkingPart("let me note", signature="sig-1")
            return ScriptedResponse([thinking, ToolUsePart("", "note", {"text": "a"})])
        return ScriptedResponse.text(f"answer {call.index}")

    async with SqliteSession("wire", tmp_path / "s.db") as session:
        async with ScriptedModelServer(provider, answer) as server:
            async with server.client() as client:
                with anyio.fail_after(20):
                    first = await Worker(client, tools=[note]).run("go", session=session)
            async with server.client() as client:  # a new client, as after a restart
                with anyio.fail_after(20):
                    second = await Worker(client, tools=[note]).run("more", session=session)
        stored = await session.messages()
    assert first.status is second.status is RunStatus.FINISHED
    assert len(stored) == 6
    sent = seen[-1].request.messages  # decoded from the body the real client sent: no 400
    assert [m.role for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[1].tool_uses and sent[2].tool_results
    if provider in ("anthropic", "gemini"):  # the signature went back from the stored history
        signed = [p for p in sent[1].content if isinstance(p, ThinkingPart) and p.signature]
        assert [p.signature for p in signed] == ["sig-1"]
