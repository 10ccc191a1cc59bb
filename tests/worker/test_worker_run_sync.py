"""Worker.run_sync: a run from synchronous code, refused inside a running event loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from llm_worker import (
    ConfigurationError,
    HookError,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.testing._model_server import ScriptStep

TIMEOUT = 10.0


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def leaked_sockets() -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


@contextmanager
def model_in_a_thread(provider: str, script: list[ScriptStep]) -> Iterator[ScriptedModelServer]:
    """A scripted model served from its own thread and loop, for callers without a loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: list[ScriptedModelServer] = []
    stop = asyncio.Event()

    async def serve() -> None:
        async with ScriptedModelServer(provider, script) as server:
            holder.append(server)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    try:
        assert started.wait(TIMEOUT), "the model server did not start"
        yield holder[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(TIMEOUT)
        loop.close()
    assert not thread.is_alive()


def test_run_sync_runs_the_loop_with_tools_and_returns_the_result() -> None:
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "add", {"a": 2, "b": 3})]), ScriptedResponse.text("5")]
    )
    result = Worker(client, tools=[add]).run_sync("2 + 3?")
    assert result.status is RunStatus.FINISHED
    assert result.text == "5"
    assert result.messages[2].tool_results[0].content == "5"


def test_run_sync_twice_over_http_leaks_nothing_and_reconnects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script: list[ScriptStep] = [ScriptedResponse.text("one"), ScriptedResponse.text("two")]
    with model_in_a_thread("anthropic", script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        worker = Worker("anthropic:claude-sonnet-4-5")  # a script's usual start, no `async with`
        first = worker.run_sync("hi")
        second = worker.run_sync("again")  # a new loop: the first one's connections are gone
        assert (first.text, second.text) == ("one", "two")
        assert [m.text for m in worker.history] == ["hi", "one", "again", "two"]
        del worker
        assert leaked_sockets() == []


def test_run_sync_raises_the_runs_errors_and_returns_a_pause() -> None:
    async def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook bug")

    def ask(ctx: ToolCallContext) -> Pause:
        return Pause("ask a person")

    calls = [ScriptedResponse([ToolUsePart("c1", "add", {"a": 1, "b": 1})])]
    failing = Worker(ScriptedClient(calls), tools=[add])
    failing.add_before_tool_call_hook(broken)
    with pytest.raises(HookError, match="hook bug"):
        failing.run_sync("go")
    pausing = Worker(ScriptedClient(calls), tools=[add])
    pausing.add_before_tool_call_hook(ask)
    paused = pausing.run_sync("go")
    assert paused.status is RunStatus.PAUSED
    assert paused.state is not None and paused.state.pending[0].status == "pending"


@pytest.mark.anyio
async def test_run_sync_inside_a_running_loop_is_refused_clearly() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("never")]))
    with pytest.raises(ConfigurationError, match=r"await worker\.run"):
        worker.run_sync("hi")
    assert worker.history == []
