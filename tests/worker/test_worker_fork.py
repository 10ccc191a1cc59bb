"""Worker.fork: the same configuration, a history of its own, the client left to its owner."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import Message, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


@tool
def echo(text: str) -> str:
    """Echo a text."""
    return text


async def test_a_fork_shares_tools_and_handlers_but_not_the_history() -> None:
    client = ScriptedClient([ScriptedResponse.text("one"), ScriptedResponse.text("two")])
    worker = Worker(client, tools=[echo], system="Be brief.")
    texts: list[str] = []
    worker.on_text_complete(texts.append)
    await worker.run("first")
    fork = worker.fork([Message.user("earlier")])
    with anyio.fail_after(5):
        result = await fork.run("second")
    assert result.text == "two"
    assert texts == ["one", "two"]  # the handler registered on the original saw both runs
    assert fork.tools is worker.tools
    assert [m.text for m in fork.history] == ["earlier", "second", "two"]
    assert [m.text for m in worker.history] == ["first", "one"]


async def test_closing_a_fork_leaves_the_client_to_the_worker_that_made_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    worker = Worker("anthropic:claude-sonnet-4-5")  # the Worker made the client: it closes it
    closed: list[str] = []
    client: Any = worker.client
    real = client.aclose

    async def aclose() -> None:
        closed.append("closed")
        await real()

    monkeypatch.setattr(worker.client, "aclose", aclose)
    await worker.fork().aclose()
    assert closed == []
    await worker.aclose()
    assert closed == ["closed"]
