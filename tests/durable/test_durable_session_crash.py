"""A durable run with a session, stopped at its worst points, appends its turn exactly once.

On SQLite, one child process (child.py) serves a DurableWorker whose Worker keeps its
conversation in a session: its first run is stopped right after the session's append is
written, its second while a request is in flight (its load recorded); then the process is
SIGKILLed and this process recovers both (DBOS recovers the dead executor's runs at launch).
Meanwhile another run, in this process, appends its own turn. On PostgreSQL the run is stopped
after its append in this process and handed back (the session's state is the same as after a
kill: the append released the claim), then taken again while another run holds the session.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from scenario import CHILD, USAGE, child

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


def _child_module() -> Any:
    """tests/durable/child.py as a module of its own name (tests/sessions has a child.py too:
    a plain `import child` takes whichever directory pytest put first on the path)."""
    spec = importlib.util.spec_from_file_location("durable_child", CHILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHILD_MODULE = _child_module()

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
    session = CHILD_MODULE.session_of(config)
    client = AnthropicClient(model="scripted-model", base_url=config["model_url"], api_key="k")
    async with client:
        worker = Worker(client, tools=CHILD_MODULE.tools(config), session=session)
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


async def test_runs_killed_after_their_append_and_mid_request_are_recovered_exactly_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """turn-1 is killed after its append, turn-2 (next on the session) while it streams.

    Before the recovery, another run takes turn-2's dead claim and appends its own turn:
    turn-1 is recovered without appending again (nor being refused by its own claim, or by
    the other run's turn); turn-2 goes on from the history it loaded, not the other run's,
    so its turn cannot follow the other's and is refused whole.
    """
    database_url, where = stores("sqlite", tmp_path, request)
    session = await seeded(where)
    model = Turns(slow=("turn-2", 0))
    try:
        async with ScriptedModelServer("anthropic", model) as server:
            first = config(database_url, server, tmp_path, where, runs=["turn-1"])
            stopping = {**first, "stop_after": "append", "after_stop": ["turn-2"]}
            async with child(stopping) as one:
                await one.until("stopped")  # turn-1 is in the session; DBOS has no result
                with anyio.fail_after(60):
                    await model.event("turn-2", 0).wait()  # its load is recorded
                one.kill()  # while turn-2's request streams
            client = ScriptedClient([ScriptedResponse.text("other answer")])
            with anyio.fail_after(30):  # turn-2's claim died with its process
                await Worker(client).run("other", session=session)
            with anyio.fail_after(120):
                async with recovering(first) as durable:
                    result = await durable.result("turn-1")
                    with pytest.raises(SessionBusyError):
                        await durable.result("turn-2")
        stored = await session.messages()
    finally:
        await session.aclose()
    assert result.status is RunStatus.FINISHED and result.text == "done turn-1"
    texts = [m.text for m in stored]
    assert texts == ["hello", "hi", "turn-1", "", "", "done turn-1", "other", "other answer"]
    assert [m.to_dict() for m in stored[:6]] == [m.to_dict() for m in result.messages]
    assert valid(stored)
    assert [(s, at) for run, s, at in model.seen if run == "turn-1"] == [(0, 2), (1, 2)]
    # turn-2 asked again from the history it had loaded (6 messages), not the other run's.
    assert [(s, at) for run, s, at in model.seen if run == "turn-2"] == [(0, 6), (0, 6), (1, 6)]
    assert (tmp_path / "log").read_text() == "turn-1\nturn-2\n"


class _StopsAfterAppend(PostgresSession):
    """Sets `written` once its append is written, then blocks (until the run is handed back)."""

    written: anyio.Event

    async def append(self, *args: Any, **options: Any) -> None:
        await super().append(*args, **options)
        self.written.set()
        await anyio.sleep_forever()


async def test_a_run_stopped_after_its_append_is_taken_again_while_another_holds_the_session(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """On PostgreSQL, taken again from its start while another run holds the session."""
    database_url, where = stores("postgresql", tmp_path, request)
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
    stopping = _StopsAfterAppend("chat", where)
    stopping.written = anyio.Event()
    result: RunResult[Any] | None = None
    try:
        async with ScriptedModelServer("anthropic", model) as server:
            first = config(database_url, server, tmp_path, where)
            async with server.client() as client:
                worker = Worker(client, tools=CHILD_MODULE.tools(first), session=stopping)
                with anyio.fail_after(60):
                    async with DurableWorker(
                        worker,
                        name="chat",
                        database_url=database_url,
                        app_version="test",
                        poll_interval=0.05,
                        lease=1.0,
                    ) as durable:
                        await durable.start("turn-1", run_id="turn-1")
                        await stopping.written.wait()
                    # Left: the run, its turn in the session, goes back to its queue.
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(other.run, "other")
                    await holding.wait()  # it holds the session while turn-1 is taken again
                    async with recovering(first) as durable:
                        result = await durable.result("turn-1")
                    go.set()  # then it appends: the recovered run left its claim alone
        stored = await session.messages()
    finally:
        for closing in (session, other_session, stopping):
            await closing.aclose()
    assert result is not None and result.status is RunStatus.FINISHED
    assert result.text == "done turn-1"
    texts = [m.text for m in stored]
    assert texts[:2] == ["hello", "hi"] and texts.count("turn-1") == 1
    assert [m.to_dict() for m in stored[:6]] == [m.to_dict() for m in result.messages]
    assert texts[6:] == ["other", "", "", "other answer"]  # the other run's turn, after it
    assert valid(stored)
    assert (tmp_path / "log").read_text() == "turn-1\n"
    assert model.seen == [("turn-1", 0, 2), ("turn-1", 1, 2)]  # nothing asked again
