"""Cancellation: worker.cancel(), task cancellation, and what is left behind."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.hooks import AbortContext
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


def make_blocking_tool() -> tuple[Any, anyio.Event, list[str]]:
    started = anyio.Event()
    log: list[str] = []

    @tool
    async def block_forever() -> str:
        """Never returns by itself."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            log.append("tool cancelled")
        return "unreachable"

    @tool
    async def quick() -> str:
        """Returns at once."""
        return "quick result"

    return (block_forever, quick), started, log


async def test_worker_cancel_during_tools_cancels_them_and_leaves_a_sendable_history() -> None:
    (block_forever, quick), started, log = make_blocking_tool()
    aborted: list[str] = []

    async def on_abort(ctx: AbortContext) -> None:
        aborted.append(ctx.kind)

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("a", "quick", {}), ToolUsePart("b", "block_forever", {})])]
    )
    worker = Worker(client, tools=[block_forever, quick])
    worker.add_on_abort_hook(on_abort)
    tasks_before = len(asyncio.all_tasks())

    async def cancel_when_started() -> None:
        await started.wait()
        worker.cancel()

    result = None
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_started)
            result = await worker.run("go")
    assert result is not None
    assert result.status is RunStatus.CANCELLED
    assert log == ["tool cancelled"]
    assert aborted == ["cancelled"]
    assert len(asyncio.all_tasks()) == tasks_before  # no orphaned tool task
    results = worker.history[-1].tool_results
    assert [r.tool_use_id for r in results] == ["a", "b"]
    assert results[0].content == "quick result"
    assert results[1].is_error and "cancelled" in results[1].content


async def test_cancelling_the_task_reraises_after_cleanup() -> None:
    aborted: list[str] = []

    async def on_abort(ctx: AbortContext) -> None:
        aborted.append(ctx.kind)

    seen: list[str] = []
    streaming = anyio.Event()

    def on_text(event: object) -> None:
        seen.append(type(event).__name__)
        if seen[-1] == "TextDelta":
            streaming.set()

    client = ScriptedClient([ScriptedResponse([TextPart("x" * 400)], chunk_size=1, delay=0.01)])
    worker = Worker(client)
    worker.add_on_abort_hook(on_abort)
    worker.timeline.on_text_block(on_text)

    async def runner() -> None:
        await worker.run("go")

    task = asyncio.ensure_future(runner())
    with anyio.fail_after(5):
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert aborted == ["cancelled"]
    assert seen[-1] == "TextBlockAbort"  # the open block was aborted for the handlers
    assert [m.role for m in worker.history] == ["user"]  # no half message


async def test_stream_closed_early_cancels_the_run() -> None:
    client = ScriptedClient([ScriptedResponse([TextPart("y" * 200)], chunk_size=1, delay=0.01)])
    worker = Worker(client)
    with anyio.fail_after(5):
        async with worker.stream("go") as events:
            async for _event in events:
                break
    assert [m.role for m in worker.history] == ["user"]


async def test_stream_readers_see_the_abort_of_the_open_block_on_cancel() -> None:
    from llm_worker.events import BlockAbort, BlockDelta

    client = ScriptedClient([ScriptedResponse([TextPart("z" * 300)], chunk_size=1, delay=0.005)])
    worker = Worker(client)
    seen: list[object] = []
    with anyio.fail_after(5):
        async for event in worker.stream("go"):
            seen.append(event)
            if sum(isinstance(e, BlockDelta) for e in seen) == 3:
                worker.cancel()
    aborts = [e for e in seen if isinstance(e, BlockAbort)]
    assert len(aborts) == 1
    assert aborts[0].index == 0
    assert seen[-1].result.status is RunStatus.CANCELLED  # type: ignore[attr-defined]
