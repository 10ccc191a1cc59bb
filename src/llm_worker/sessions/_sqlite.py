"""SqliteSession: a session in a SQLite file (stdlib `sqlite3`, no extra)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any, Self

from llm_worker.sessions._sql import SqlSession

__all__ = ("SqliteSession",)


class _Sqlite:
    """SQLite's side of the SQL: WAL (readers never block the writer), a write lock at BEGIN."""

    begin_write = "BEGIN IMMEDIATE"
    for_update = ""  # BEGIN IMMEDIATE already holds the database's write lock
    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, path: str) -> None:
        self.path = path

    def connect(self) -> Any:
        # isolation_level=None: transactions are the explicit BEGIN / COMMIT below, not the
        # module's implicit ones. check_same_thread=False: each call runs in a worker thread
        # (one at a time, under the session's lock).
        conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never torn
        except BaseException:
            conn.close()
            raise
        return conn

    def execute(self, conn: Any, sql: str, params: Sequence[object] = ()) -> Any:
        return conn.execute(sql, tuple(params))

    def lock_schema(self, conn: Any) -> None:
        """BEGIN IMMEDIATE has the lock already."""


class SqliteSession(SqlSession):
    """A conversation kept in a SQLite file: `Worker(..., session=SqliteSession(id, path))`.

    ```python
    async with SqliteSession("user-42/chat-7", "sessions.db") as session:
        worker = Worker("anthropic:claude-sonnet-4-5", session=session)
        await worker.run("Hello!")  # loads the history first, appends the new messages after
    ```

    Many sessions share one file (and one file may be shared by processes on one machine:
    WAL mode, a write lock per append). Close it (`async with`, `aclose()`, `close()`).

    Args:
        session_id: The conversation's id (any non-empty string; `list_ids(prefix)` lists
            by prefix, so `"user-42/…"` ids list one user's).
        path: The SQLite file (made with its tables on first use).
        wait: Seconds a run waits for a session another run holds before
            `SessionBusyError` (0: fail at once).
        lease_s: Seconds after which a run's claim counts as abandoned (a claim by a process
            on this machine that has died is abandoned at once).

    Raises:
        SessionError: An empty id, a negative `wait`, or (at first use) a file that is not a
            SQLite database or was written by a newer llm-worker.
    """

    def __init__(
        self,
        session_id: str,
        path: str | os.PathLike[str],
        *,
        wait: float = 0.0,
        lease_s: float = 600.0,
    ) -> None:
        self._path = os.fspath(path)
        super().__init__(session_id, _Sqlite(self._path), wait=wait, lease_s=lease_s)

    def _sibling(self, session_id: str) -> Self:
        return type(self)(session_id, self._path, wait=self._wait, lease_s=self._lease)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
