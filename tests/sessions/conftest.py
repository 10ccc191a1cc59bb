"""A session store per test: a SQLite file, or a fresh database on the session's PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from llm_worker.sessions import PostgresSession, SqliteSession
from llm_worker.sessions._sql import SqlSession
from support.postgres import fresh_database


@dataclass
class Store:
    """Where sessions go, and the sessions a test opened (closed after it)."""

    kind: str
    where: str
    opened: list[SqlSession] = field(default_factory=lambda: [])

    def session(self, session_id: str, **options: float) -> SqlSession:
        made: SqlSession
        if self.kind == "sqlite":
            made = SqliteSession(session_id, self.where, **options)
        else:
            made = PostgresSession(session_id, self.where, **options)
        self.opened.append(made)
        return made

    def track(self, session: SqlSession) -> SqlSession:
        self.opened.append(session)
        return session


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        made = Store("sqlite", str(tmp_path / "sessions.db"))
    else:
        made = Store("postgres", fresh_database(request.getfixturevalue("postgres_server")))
    yield made
    for session in made.opened:
        await session.aclose()


StoreFactory = Callable[[str], SqlSession]
