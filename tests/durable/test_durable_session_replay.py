"""A durable run's session, replayed in this process: each turn appended once, others refused.

A serving DurableWorker that leaves hands its runs back to their queue; the next one to enter
runs each again from its start (as a recovery would), its recorded steps replayed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from llm_worker import Decision, Message, RunStatus, TextPart, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker, RecordError
from llm_worker.errors import ConfigurationError, SessionBusyError
from llm_worker.sessions import SqliteSession
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse
from llm_worker.worker._history import repair

pytestmark = pytest.mark.anyio


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def answer(call: ScriptedRequest) -> ScriptedResponse:
    """A run's input (the request ends with a text) is answered by a call to pay, else a text.

    The wire merges a run's input into the message holding the previous run's last results:
    the request's last part tells them apart.
    """
    messages = call.request.messages
    if isinstance(messages[-1].content[-1], TextPart):
        calls = sum(len(m.tool_uses) for m in messages)
        return ScriptedResponse([ToolUsePart(f"p{calls}", "pay", {"amount": 5})])
    return ScriptedResponse.text(f"paid, after {len(messages)} messages")


async def test_a_paused_run_run_again_from_its_start_appends_each_of_its_turns_once(
    tmp_path: Path,
) -> None:
    """Beside it (one DBOS launch for both), a run whose recorded load was tampered with
    fails when it is run again, naming the step."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        SqliteSession("tampered", tmp_path / "sessions.db") as tampered,
        ScriptedModelServer("anthropic", answer) as server,
        server.client() as client,
    ):
        token = await session.claim()
        await session.append(token, 0, [Message.user("hello"), Message.assistant("hi")], None)
        worker = Worker(client, tools=[pay], session=session)
        other = Worker(client, tools=[pay], session=tampered)

        def durables() -> tuple[DurableWorker, DurableWorker]:
            return (
                DurableWorker(worker, name="s", database_url=url, lease=1.0),
                DurableWorker(other, name="t", database_url=url, lease=1.0),
            )

        with anyio.fail_after(90):
            durable, spoilt = durables()
            async with durable, spoilt:
                await durable.start("pay 5", run_id="one")
                await spoilt.start("pay 5", run_id="two")
                assert await durable.paused("one") is not None
                assert await spoilt.paused("two") is not None
            rows = await anyio.to_thread.run_sync(_tamper_load, tmp_path / "runs.sqlite", "two")
            assert rows == 1
            # Left: the runs go back to their queue. Taken again, each runs from its start:
            # its first turn (appended, with the pause) loads and appends nothing new.
            durable, spoilt = durables()
            async with durable, spoilt:
                state = await durable.paused("one")
                assert state is not None and [p.call.id for p in state.pending] == ["p0"]
                await durable.decide("one", {"p0": Decision.approve()})
                result = await durable.result("one")
                with pytest.raises(RecordError, match="session load 0") as caught:
                    await spoilt.result("two")
        stored = await session.messages()
        assert await session.pause_state() is None
    assert caught.value.run_id == "two"
    assert result.status is RunStatus.FINISHED and result.text == "paid, after 5 messages"
    assert [m.text for m in stored] == ["hello", "hi", "pay 5", "", "", "paid, after 5 messages"]
    assert stored[4].tool_results[0].content == "paid 5"
    assert [m.to_dict() for m in stored] == [m.to_dict() for m in result.messages]
    assert repair(stored)[1] == 0
    assert len(server.requests) == 3  # the first answers were replayed, not asked again


async def test_another_durable_run_on_a_held_session_is_refused(tmp_path: Path) -> None:
    holding, go = anyio.Event(), anyio.Event()

    @tool
    async def hold() -> str:
        """Hold the session."""
        holding.set()
        await go.wait()
        return "held"

    def scripted(call: ScriptedRequest) -> ScriptedResponse:
        if call.request.messages[-1].tool_results:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart("h", "hold", {})])

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        ScriptedModelServer("anthropic", scripted) as server,
        server.client() as client,
    ):
        worker = Worker(client, tools=[hold], session=session)
        with anyio.fail_after(90):
            async with DurableWorker(worker, name="s", database_url=url) as durable:
                await durable.start("first", run_id="a")
                await holding.wait()
                with pytest.raises(SessionBusyError):  # its own claim is no other run's
                    await durable.run("second", run_id="b")
                go.set()
                assert (await durable.result("a")).text == "done"
        assert [m.text for m in await session.messages()] == ["first", "", "", "done"]


async def test_a_session_that_cannot_append_exactly_once_is_refused(tmp_path: Path) -> None:
    class Plain:
        """A Session, but not a ReplaySafeSession: no keyed append."""

        session_id = "plain"

        async def claim(self) -> str: ...
        async def load(self) -> object: ...
        async def append(self, *args: object) -> None: ...
        async def release(self, token: str) -> None: ...

    async with ScriptedModelServer("anthropic", answer) as server, server.client() as client:
        worker = Worker(client, session=Plain())  # pyright: ignore[reportArgumentType]
        with pytest.raises(ConfigurationError, match="ReplaySafeSession"):
            DurableWorker(worker, name="s", database_url=f"sqlite:///{tmp_path / 'r.db'}")


async def test_the_same_run_id_from_another_system_database_appends_its_own_turn(
    tmp_path: Path,
) -> None:
    """Run ids are one system database's: on a shared session store they never collide."""
    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        ScriptedModelServer("anthropic", lambda call: ScriptedResponse.text("ok")) as server,
        server.client() as client,
    ):
        worker = Worker(client, session=session)
        for database in ("a", "b"):  # one DBOS per process: one after the other
            url = f"sqlite:///{tmp_path / database}.sqlite"
            with anyio.fail_after(60):
                async with DurableWorker(worker, name="s", database_url=url) as durable:
                    await durable.run(f"from {database}", run_id="chat-1")
        assert [m.text for m in await session.messages()] == ["from a", "ok", "from b", "ok"]


def _tamper_load(path: Path, run_id: str) -> int:
    """Make run `run_id`'s recorded session load's count a word; the number of rows changed."""
    where = "workflow_uuid = ? AND function_name = 'llm-worker session load 0'"
    with sqlite3.connect(path) as db:
        found = db.execute(
            f"SELECT function_id, output FROM operation_outputs WHERE {where}", (run_id,)
        ).fetchall()
        for function_id, output in found:
            envelope = json.loads(output)
            envelope["json"]["count"] = "many"
            db.execute(
                f"UPDATE operation_outputs SET output = ? WHERE function_id = ? AND {where}",
                (json.dumps(envelope), function_id, run_id),
            )
    return len(found)


async def test_a_temporal_worker_refuses_a_session_rather_than_hang(tmp_path: Path) -> None:
    """Its workflow cannot do a session's I/O (Temporal's sandbox): the run would never end."""
    from llm_worker.durable.temporal import TemporalWorker

    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        ScriptedModelServer("anthropic", answer) as server,
        server.client() as client,
    ):
        worker = Worker(client, session=session)
        with pytest.raises(ConfigurationError, match="does not keep runs in a session"):
            TemporalWorker(worker, name="t", client=cast("Any", None))


async def test_a_paused_run_cancelled_leaves_its_session_unpaused_and_whole(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with (
        SqliteSession("chat", tmp_path / "sessions.db") as session,
        ScriptedModelServer("anthropic", answer) as server,
        server.client() as client,
    ):
        worker = Worker(client, tools=[pay], session=session)
        with anyio.fail_after(90):
            async with DurableWorker(worker, name="s", database_url=url) as durable:
                await durable.start("pay 5", run_id="one")
                assert await durable.paused("one") is not None
                await durable.cancel("one", "the user left")
                cancelled = await durable.result("one")
                # The session goes on: its pause was the cancelled run's.
                await durable.start("pay 6", run_id="two")
                assert await durable.paused("two", wait=30) is not None
        stored = await session.messages()
        kept = await session.pause_state()
    assert cancelled.status is RunStatus.CANCELLED
    assert [m.to_dict() for m in stored[:3]] == [m.to_dict() for m in cancelled.messages]
    [result] = stored[2].tool_results
    assert result.is_error and "the user left" in result.content
    assert [m.text for m in stored[3:]] == ["pay 6", ""]
    assert kept is not None and [p.call.id for p in kept.pending] == ["p1"]
    assert repair(stored[:3])[1] == 0
