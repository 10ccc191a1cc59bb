"""Review probe: cancelling an `inspect` while a worker thread pages a streamed JSON array.

The thread pulls each chunk from the event loop (`from_thread.run`) inside the host task's
cancel scope; once that scope is cancelled, the loop and the thread must not wait on each
other: the call ends promptly with the cancellation.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio

from llm_worker import Content, FsBlobStore
from llm_worker.blobs import InspectTool, OutputPolicy


class _Signalling(FsBlobStore):
    """An FsBlobStore whose JSON streams say when their second chunk is asked for."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reading = anyio.Event()
        self.cancelled = anyio.Event()

    async def stream_json(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        stream = await super().stream_json(blob_id)
        return None if stream is None else self._signal(stream)

    async def _signal(self, stream: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
        async with contextlib.aclosing(stream):
            async for number, chunk in _numbered(stream):
                if number == 1:
                    self.reading.set()
                    with anyio.CancelScope(shield=True):  # the next chunk is asked for later
                        await self.cancelled.wait()  # the test cancels the inspect meanwhile
                yield chunk


async def _numbered(stream: AsyncGenerator[bytes, None]) -> AsyncGenerator[tuple[int, bytes]]:
    number = 0
    async for chunk in stream:
        yield number, chunk
        number += 1


async def _cancel_mid_inspect(root: Path) -> bool:
    store = _Signalling(root)
    rows = [{"k": i, "v": "x" * 40} for i in range(60_000)]  # over one 1 MiB chunk
    blob_id = await store.store(Content.Structured(rows))
    args = json.dumps({"blob_id": blob_id, "selector": "slice:0..1"})
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(InspectTool(store, OutputPolicy()).execute, args)
            await store.reading.wait()
            scope.cancel()
            store.cancelled.set()
    return scope.cancelled_caught


def test_cancel_while_the_thread_pages_a_streamed_array_ends_promptly(tmp_path: Path) -> None:
    # A deadlock stalls the event loop itself, so the run gets its own thread to time out.
    result: list[bool] = []
    runner = threading.Thread(
        target=lambda: result.append(anyio.run(_cancel_mid_inspect, tmp_path)), daemon=True
    )
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the event loop and the paging thread wait on each other"
    assert result == [True]
