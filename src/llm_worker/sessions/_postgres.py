"""PostgresSession: a session in PostgreSQL, on psycopg 3 (the `postgres` extra).

The same PostgreSQL a fleet's durable runs use can hold the sessions (their own tables).
psycopg is imported at the first use, never by `import llm_worker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from llm_worker._extras import require_extra
from llm_worker.sessions._sql import SqlSession

__all__ = ("PostgresSession",)

_SCHEMA_LOCK = 0x6C6C6D77  # "llmw": one advisory lock id for every migrating process


class _Postgres:
    """PostgreSQL's side of the SQL: row locks (FOR UPDATE), an advisory lock to migrate."""

    begin_write = "BEGIN"
    for_update = " FOR UPDATE"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.psycopg: Any = require_extra("psycopg", "postgres", feature="PostgresSession")
        self.errors: tuple[type[BaseException], ...] = (self.psycopg.Error,)

    def connect(self) -> Any:
        return self.psycopg.connect(self.dsn, autocommit=True)

    def execute(self, conn: Any, sql: str, params: Sequence[object] = ()) -> Any:
        return conn.execute(sql.replace("?", "%s"), tuple(params))

    def lock_schema(self, conn: Any) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))


class PostgresSession(SqlSession):
    """A conversation kept in PostgreSQL: `Worker(..., session=PostgresSession(id, dsn))`.

    Like `SqliteSession` (see it for the arguments), for a fleet of processes on several
    machines: a claim is a row lock's compare-and-set, appends are transactions. Needs the
    `llm-worker[postgres]` extra (psycopg 3). The DSN's password never appears in an error.

    Raises:
        MissingExtraError: psycopg is not installed.
        SessionError: An empty id or a negative `wait`.
    """

    def __init__(
        self, session_id: str, dsn: str, *, wait: float = 0.0, lease_s: float = 600.0
    ) -> None:
        self._dsn = dsn
        super().__init__(session_id, _Postgres(dsn), wait=wait, lease_s=lease_s)

    def __repr__(self) -> str:
        return f"PostgresSession({self.session_id!r})"  # never the DSN: it may hold a password

    def _sibling(self, session_id: str) -> Self:
        return type(self)(session_id, self._dsn, wait=self._wait, lease_s=self._lease)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
