"""Review of resumable runs under a hostile client (issue 39's web path: memory per run)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

from llm_worker.ui import ResumableStreams
from llm_worker.ui._auth import chat_key

pytestmark = pytest.mark.anyio


def _live(streams: ResumableStreams, owner: str) -> list[str]:
    return [
        key
        for key in (chat_key(owner, f"c{n}") for n in range(50))
        if (log := streams.get(key)) is not None and not log.done
    ]


async def _forever() -> AsyncGenerator[str, None]:
    yield "data: 1\n\n"
    await anyio.sleep_forever()  # a run going on after its browser hung up


async def test_an_owners_live_resumable_runs_are_bounded() -> None:
    # A resumable run outlives its connection: one owner POSTing runs of new chat ids and
    # hanging up at once would keep every one going (a Worker, a model stream, a log each).
    streams = ResumableStreams(max_live_per_owner=4)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            alice = streams.open(chat_key("alice", "c0"), "r0")
            group.start_soon(streams.produce, alice, _forever(), ["data: stopped\n\n"])
            for n in range(50):
                log = streams.open(chat_key("mallory", f"c{n}"), f"r{n}")
                group.start_soon(streams.produce, log, _forever(), ["data: stopped\n\n"])
                await anyio.wait_all_tasks_blocked()
                assert len(_live(streams, "mallory")) <= 4
            # The newest four go on; the older ones were stopped and told so.
            assert _live(streams, "mallory") == [
                chat_key("mallory", f"c{n}") for n in range(46, 50)
            ]
            first = streams.get(chat_key("mallory", "c0"))
            assert first is not None and first.texts()[-1] == "data: stopped\n\n"
            # Another owner's run is never touched.
            assert not alice.done
            group.cancel_scope.cancel()


async def test_the_bound_counts_runs_going_not_runs_kept() -> None:
    streams = ResumableStreams(max_live_per_owner=2)

    async def short() -> AsyncGenerator[str, None]:
        yield "data: done\n\n"

    with anyio.fail_after(10):
        for n in range(5):  # each ends before the next starts: none is stopped
            log = streams.open(chat_key("bob", f"c{n}"), f"r{n}")
            await streams.produce(log, short(), ["data: stopped\n\n"])
            assert log.texts() == ["data: done\n\n"]


def test_the_live_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_live_per_owner"):
        ResumableStreams(max_live_per_owner=0)
