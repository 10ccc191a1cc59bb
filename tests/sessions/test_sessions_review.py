"""Review probes for sessions (issue 34): Worker(session=), incremental loads, hostile rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Decision, Message, RunStatus, ToolUsePart, Worker, tool
from llm_worker.errors import PauseStateError, SessionError
from llm_worker.sessions import SqliteSession
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from sessions.conftest import Store

pytestmark = pytest.mark.anyio


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay."""
    return f"paid {amount}"


def _texts(*texts: str) -> ScriptedClient:
    return ScriptedClient([ScriptedResponse.text(t) for t in texts])


async def test_worker_session_loads_before_each_run_and_appends_after(
    store: Store,
) -> None:
    session = store.session("w")
    mine = _texts("one", "three")
    with anyio.fail_after(20):
        first = Worker(mine, session=session)
        assert (await first.run("a")).text == "one"
        client = _texts("two")
        second = Worker(client, session=store.session("w"))  # another Worker, another connection
        assert (await second.run("b")).text == "two"
        assert client.requests[0].messages[:2] == [Message.user("a"), first.history[1]]
        # The session, not the first Worker's memory, is the source of truth: its next run
        # carries the second Worker's turn too.
        assert (await first.run("c")).text == "three"
    assert [m.text for m in mine.requests[1].messages] == ["a", "one", "b", "two", "c"]
    assert [m.text for m in await session.messages()] == ["a", "one", "b", "two", "c", "three"]


async def test_worker_session_pause_then_resume_without_a_state_in_a_fresh_worker(
    store: Store,
) -> None:
    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 3})]),
        ScriptedResponse.text("paid"),
    ]
    with anyio.fail_after(20):
        paused = await Worker(
            ScriptedClient(script[:1]), tools=[pay], session=store.session("p")
        ).run("pay 3")
        assert paused.status is RunStatus.PAUSED
        fresh = Worker(ScriptedClient(script[1:]), tools=[pay], session=store.session("p"))
        with pytest.raises(PauseStateError, match="resume"):
            await fresh.run("something else")  # the session's pause comes first
        done = await fresh.resume(decisions={"p1": Decision.approve()})
    assert done.status is RunStatus.FINISHED and done.text == "paid"
    assert [m.role for m in await store.session("p").messages()] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_a_run_session_overrides_the_workers(tmp_path: Path) -> None:
    async with (
        SqliteSession("mine", tmp_path / "s.db") as mine,
        SqliteSession("other", tmp_path / "s.db") as other,
    ):
        worker = Worker(_texts("x", "y"), session=mine)
        with anyio.fail_after(20):
            await worker.run("to mine")
            await worker.run("to other", session=other)
        assert [m.text for m in await mine.messages()] == ["to mine", "x"]
        assert [m.text for m in await other.messages()] == ["to other", "y"]


async def test_worker_session_is_a_typed_option() -> None:
    from llm_worker.worker._options import WorkerOptions

    assert "session" in WorkerOptions.__annotations__


# -- incremental loads ---------------------------------------------------------------------


class _Counting:
    """Wraps a dialect: counts the queries that read message rows."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.message_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def execute(self, conn: Any, sql: str, params: Any = ()) -> Any:
        if sql.startswith("SELECT message FROM"):
            self.message_reads += 1
        return self.inner.execute(conn, sql, params)


async def test_a_long_session_reads_its_rows_once_and_another_writer_is_always_seen(
    store: Store,
) -> None:
    session = store.session("long")
    counting = _Counting(session._dialect)  # pyright: ignore[reportPrivateUsage]
    session._dialect = counting  # type: ignore[assignment]  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    turns = 1000 if store.kind == "sqlite" else 100  # PostgreSQL: ~30 ms a turn's round trips
    with anyio.fail_after(60):
        for i in range(turns):  # runs' worth of claim / load / append
            token = await session.claim()
            record = await session.load()
            assert len(record.messages) == i
            await session.append(token, record.version, [Message.user(f"m{i}")], None)
        assert counting.message_reads == 1  # the first load; every later one from memory
        other = store.session("long")  # another process's write bumps the version
        token = await other.claim()
        record = await other.load()
        await other.append(token, record.version, [Message.user("theirs")], None)
        loaded = await session.messages()
        assert [m.text for m in loaded[-2:]] == [f"m{turns - 1}", "theirs"]
        assert counting.message_reads == 2
        await other.clear()
        assert await session.messages() == []
        # A caller changing the list it got never changes the next load's.
        got = await other.messages()
        got.append(Message.user("local only"))
        assert await other.messages() == []


# -- hostile rows --------------------------------------------------------------------------


async def test_a_session_row_with_a_version_that_is_no_number_is_a_session_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SqliteSession("v", path) as session:
        token = await session.claim()
        await session.append(token, 0, [Message.user("x")], None)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE llm_worker_sessions SET version = 'abc'")
    async with SqliteSession("v", path) as session:
        with pytest.raises(SessionError, match="cannot read"):
            await session.load()


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_the_api_key_is_never_stored_in_a_session(provider: str, tmp_path: Path) -> None:
    canary = "sk-canary-3f1e9a7c5b"

    def answer(call: ScriptedRequest) -> ScriptedResponse:
        if call.index == 0:
            return ScriptedResponse([ToolUsePart("", "pay", {"amount": 1})])
        return ScriptedResponse.text("ok")

    path = tmp_path / "s.db"
    async with (
        SqliteSession("k", path) as session,
        ScriptedModelServer(provider, answer) as server,
        server.client(api_key=canary) as client,
    ):
        with anyio.fail_after(20):
            paused = await Worker(client, tools=[pay], session=session).run("pay")
            assert paused.status is RunStatus.PAUSED  # the pause is stored too
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(FULL)")
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # noqa: ASYNC240  (a test's files)
    assert b"pay" in stored
    assert canary.encode() not in stored
