"""A durable run with a session, SIGKILLed at its worst points, appends its turn exactly once.

The child processes (child.py) serve a DurableWorker whose Worker keeps its conversation in a
session (SQLite beside a SQLite system database, PostgreSQL beside a PostgreSQL one); the
test kills it at a named point — right after the session's append is written, or while a
request of the run is in flight (its load recorded) — and this process recovers the run (a
second process: DBOS recovers the dead executor's runs at launch; one child process less
keeps the test short). Meanwhile another run, in this process, uses the same session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from scenario import USAGE, child

from llm_worker import Message, RunResult, RunStatus, TextPart, ToolUsePart, Worker, tool
from llm_worker.durable import DurableWorker
from llm_worker.errors import SessionBusyError
from llm_worker.providers import AnthropicClient
from llm_worker.sessions import PostgresSession, SqliteSession
from llm_worker.sessions._sql import SqlSession
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from llm_worker.worker._history import repair
from support.postgres import fresh_database

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]  # real processes, a busy CI

BEFORE = [Message.user("hello"), Message.assistant("hi")]
"""The session's history before the durable run."""


@dataclass
class Turns:
    """Answers a run by its input (the last plain user message): a tool call, then `done`.

    `seen` keeps (run, step, where the run's input is in the request): that index is the
    length of the history the run loaded. The first request of `slow` streams slowly, long
    enough to kill the process while it is in flight.
    """

    slow: tuple[str, int] | None = None
    seen: list[tuple[str, int, int]] = field(default_factory=lambda: [])
    arrived: dict[tuple[str, int], anyio.Event] = field(default_factory=lambda: {})

    def event(self, run: str, step: int) -> anyio.Event:
        return self.arrived.setdefault((run, step), anyio.Event())

    def __call__(self, call: ScriptedRequest) -> ScriptedResponse:
        messages = call.request.messages
        start = max(i for i, m in enumerate(messages) if m.role == "user" and not m.tool_results)
        run = messages[start].text
        step = sum(len(m.tool_results) for m in messages[start:])
        first = (run, step) not in {(r, s) for r, s, _ in self.seen}
        self.seen.append((run, step, start))
        self.event(run, step).set()
        if step > 0:
            return ScriptedResponse.text(f"done {run}", usage=USAGE)
        part = ToolUsePart(f"{run}-a", "append_line", {"text": run})
        if first and self.slow == (run, step):
            return ScriptedResponse(
                [TextPart("x" * 400), part], usage=USAGE, chunk_size=4, delay=0.05
            )
        return ScriptedResponse([part], usage=USAGE)


def stores(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    """A system database and a session store of `kind` (as `database_url` and `where`)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite'}", str(tmp_path / "sessions.db")
    base: str = request.getfixturevalue("postgres_server")
    return fresh_database(base), fresh_database(base)


def spec(where: str) -> dict[str, str]:
    return {
        "store": "sqlite" if where.endswith(".db") else "postgres",
        "where": where,
        "id": "chat",
    }


def session_at(where: str) -> SqlSession:
    if where.endswith(".db"):
        return SqliteSession("chat", where)
    return PostgresSession("chat", where)


def config(
    url: str, server: ScriptedModelServer[Any], tmp_path: Path, where: str, **more: Any
) -> dict[str, Any]:
    return {
        "url": url,
        "model_url": server.base_url,
        "name": "chat",
        "log": str(tmp_path / "log"),
        "session": spec(where),
        **more,
    }


async def seeded(where: str) -> SqlSession:
    """The session, holding `BEFORE`."""
    session = session_at(where)
    token = await session.claim()
    await session.append(token, 0, BEFORE, None)
    return session


def valid(messages: list[Message]) -> bool:
    """Every tool call has its one result, in the next message (nothing to repair)."""
    return repair(messages)[1] == 0


@asynccontextmanager
async def recovering(config: dict[str, Any]) -> AsyncIterator[DurableWorker]:
    """This process, serving as the killed child's executor: DBOS recovers its runs here."""
    from child import session_of, tools

    session = session_of(config)
    client = AnthropicClient(model="scripted-model", base_url=config["model_url"], api_key="k")
    async with client:
        worker = Worker(client, tools=tools(config), session=session)
        durable = DurableWorker(
            worker,
            name=config["name"],
            database_url=config["url"],
            app_version="test",  # the child's: only the same version recovers its runs
            poll_interval=0.05,
            lease=1.0,
        )
        try:
            async with durable:
                yield durable
        finally:
            assert session is not None
            await session.aclose()  # pyright: ignore[reportAttributeAccessIssue]


async def recovered(config: dict[str, Any]) -> RunResult[Any]:
    async with recovering(config) as durable:
        return await durable.result("turn-1")


@pytest.mark.parametrize(
    ("kind", "meanwhile"),
    [("sqlite", "appended"), ("postgresql", "holding")],
    ids=["sqlite-another-appended", "pg-another-holds"],
)
async def test_a_run_killed_after_its_append_is_recovered_without_appending_it_again(
    kind: str, meanwhile: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Before it is recovered, another run appends its turn (sqlite) or holds the session."""
    database_url, where = stores(kind, tmp_path, request)
    session = await seeded(where)
    holding, go = anyio.Event(), anyio.Event()

    @tool
    async def wait_for_recovery() -> str:
        """Hold the session until the recovered run is done."""
        holding.set()
        await go.wait()
        return "waited"

    other_session = session_at(where)
    scripted = [
        ScriptedResponse([ToolUsePart("o1", "wait_for_recovery", {})]),
        ScriptedResponse.text("other answer"),
    ]
    other = Worker(ScriptedClient(scripted), tools=[wait_for_recovery], session=other_session)
    model = Turns()
    result: RunResult[Any] | None = None
    try:
        async with ScriptedModelServer("anthropic", model) as server:
            first = config(database_url, server, tmp_path, where, runs=["turn-1"])
            async with child({**first, "stop_after": "append"}) as one:
                await one.until("stopped")  # the turn is in the session; DBOS has no result
                one.kill()
            with anyio.fail_after(120):
                if meanwhile == "appended":  # the other run's whole turn, before the recovery
                    go.set()
                    await other.run("other")
                    result = await recovered(first)
                else:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(other.run, "other")
                        await holding.wait()  # it holds the session during the recovery
                        result = await recovered(first)
                        go.set()  # then it appends: the recovered run left its claim alone
        stored = await session.messages()
    finally:
        await session.aclose()
        await other_session.aclose()
    # Not refused by its own claim, nor by the other run's: its turn was written already.
    assert result is not None and result.status is RunStatus.FINISHED
    assert result.text == "done turn-1"
    texts = [m.text for m in stored]
    assert texts[:2] == ["hello", "hi"] and texts.count("turn-1") == 1
    assert [m.to_dict() for m in stored[:6]] == [m.to_dict() for m in result.messages]
    assert texts[6:] == ["other", "", "", "other answer"]  # the other run's turn, after it
    assert valid(stored)
    assert (tmp_path / "log").read_text() == "turn-1\n"
    assert model.seen == [("turn-1", 0, 2), ("turn-1", 1, 2)]  # nothing asked again


async def test_a_recovered_run_keeps_the_history_it_loaded_and_another_runs_turn_wins(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Killed between its load and its first step (the first answer streaming)."""
    database_url, where = stores("sqlite", tmp_path, request)
    session = await seeded(where)
    model = Turns(slow=("turn-1", 0))
    try:
        async with ScriptedModelServer("anthropic", model) as server:
            first = config(database_url, server, tmp_path, where, runs=["turn-1"])
            async with child(first) as one:
                await one.until("ready")
                with anyio.fail_after(60):
                    await model.event("turn-1", 0).wait()  # its load is recorded
                one.kill()  # while the request streams
            # The dead run's claim is over: another run appends its turn in the meantime.
            client = ScriptedClient([ScriptedResponse.text("other answer")])
            with anyio.fail_after(30):
                await Worker(client).run("other", session=session)
            with anyio.fail_after(120):
                async with recovering(first) as durable:
                    with pytest.raises(SessionBusyError):
                        await durable.result("turn-1")
        stored = await session.messages()
    finally:
        await session.aclose()
    # The recovered run went on from the history it had loaded, not the other run's...
    assert {start for run, _, start in model.seen if run == "turn-1"} == {2}
    assert [s for run, s, _ in model.seen if run == "turn-1"] == [0, 0, 1]  # 0 again: cut
    # ...so its turn cannot follow the other's: refused whole, never interleaved.
    assert [m.text for m in stored] == ["hello", "hi", "other", "other answer"]
    assert valid(stored)
