"""The SQL both stores share: the schema and its migrations, claims, loads and appends.

Tables (schema version 2):

- `llm_worker_session_schema(version)`: one row, the schema version this store is at;
- `llm_worker_sessions(id, version, pause, claim, claim_pid, claim_host, claimed_at,
  updated_at, cleared)`: one row per session; `pause` is a `PauseState` as JSON; `claim` the
  token of the run holding it, with the process that took it (to see it died) and when;
  `cleared` the version the last `clear()` made (0: never cleared);
- `llm_worker_session_messages(session_id, seq, message)`: the conversation, one JSON
  message per row, append-only (only `clear()` deletes);
- `llm_worker_session_appends(session_id, append_key, version)`: the keyed appends (a
  durable run's) and the version each made: an append whose key is there is not made again.

A store written by a newer schema is refused (`SessionError`), never read as if it were
this one; an older one is migrated forward, step by step, in one transaction per step.
The work is synchronous (stdlib `sqlite3`, psycopg's blocking API) and runs in a worker
thread; one connection per session object, used by one thread at a time.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, Self, TypeVar

import anyio

from llm_worker._wide_json import exact_loads, json_bytes
from llm_worker.errors import PauseStateError, SessionBusyError, SessionError
from llm_worker.messages import Message
from llm_worker.sessions._protocol import SessionRecord
from llm_worker.state import PauseState

__all__ = ("MIGRATIONS", "SCHEMA_VERSION", "Dialect", "SqlSession")

T = TypeVar("T")

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: the first schema.
    (
        "CREATE TABLE IF NOT EXISTS llm_worker_sessions ("
        " id TEXT PRIMARY KEY, version BIGINT NOT NULL DEFAULT 0, pause TEXT,"
        " claim TEXT, claim_pid BIGINT, claim_host TEXT, claimed_at DOUBLE PRECISION,"
        " updated_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS llm_worker_session_messages ("
        " session_id TEXT NOT NULL, seq BIGINT NOT NULL, message TEXT NOT NULL,"
        " PRIMARY KEY (session_id, seq))",
    ),
    # 1 -> 2: keyed appends (a recovered durable run appends once), the version of the last
    # clear (a recovered run reloads the messages it started from only if they are intact).
    (
        "ALTER TABLE llm_worker_sessions ADD COLUMN cleared BIGINT NOT NULL DEFAULT 0",
        "CREATE TABLE IF NOT EXISTS llm_worker_session_appends ("
        " session_id TEXT NOT NULL, append_key TEXT NOT NULL, version BIGINT NOT NULL,"
        " PRIMARY KEY (session_id, append_key))",
    ),
)
"""`MIGRATIONS[n]` takes a store from schema version n to n + 1."""

SCHEMA_VERSION = len(MIGRATIONS)


class Cursor(Protocol):
    """The part of a DB-API cursor used here."""

    rowcount: int

    def fetchone(self) -> Any: ...  # a row: a tuple of JSON-edge values
    def fetchall(self) -> Any: ...


class Dialect(Protocol):
    """What differs between SQLite and PostgreSQL."""

    begin_write: str
    """Starts a transaction that writes (SQLite takes the write lock at once)."""
    for_update: str
    """Appended to a SELECT that the transaction will update."""
    errors: tuple[type[BaseException], ...]
    """The driver's exceptions, translated to `SessionError`."""

    def connect(self) -> Any: ...  # a DB-API connection in autocommit mode
    def execute(self, conn: Any, sql: str, params: Sequence[object] = ()) -> Cursor: ...
    def lock_schema(self, conn: Any) -> None: ...


class SqlSession:
    """A session in a SQL store (the base of `SqliteSession` and `PostgresSession`)."""

    def __init__(self, session_id: str, dialect: Dialect, *, wait: float, lease_s: float) -> None:
        if not isinstance(session_id, str) or not session_id:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SessionError("a session id must be a non-empty string")
        if wait < 0 or lease_s <= 0:
            raise SessionError("wait must be >= 0 and lease_s > 0")
        self._id = session_id
        self._dialect = dialect
        self._wait = wait
        self._lease = lease_s
        self._conn: Any = None
        self._lock = threading.Lock()
        # The messages as of a version this object read or wrote: a load that finds the
        # same version reads none again (a 1,000-turn session loaded 2,000 rows every run).
        # Any other writer bumps the version, so a stale copy is never served.
        self._cached: tuple[int, list[Message]] | None = None

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._id!r})"

    # -- the connection ------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Generator[Any]:
        with self._lock, self._translated():
            if self._conn is None:
                conn = self._dialect.connect()
                try:
                    _migrate(self._dialect, conn)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
            yield self._conn

    @contextmanager
    def _translated(self) -> Generator[None]:
        try:
            yield
        except self._dialect.errors as exc:
            raise SessionError(
                f"session {self._id!r}: the store failed: {type(exc).__name__}"
            ) from exc

    async def _run(self, work: Callable[[Any], T]) -> T:
        def call() -> T:
            with self._connection() as conn:
                return work(conn)

        return await anyio.to_thread.run_sync(call)

    def close(self) -> None:
        """Close the connection (the next use opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        """Close the connection, from async code."""
        await anyio.to_thread.run_sync(self.close)

    # -- the run's protocol --------------------------------------------------------------------

    async def claim(self, token: str | None = None) -> str:
        """Take the session for one run (waiting up to `wait` seconds while it is busy).

        Args:
            token: The claim's token (default: a new one). A claim held under the same
                token is taken again, by this process: a durable run recovered elsewhere
                is not refused by the claim its dead attempt left.

        Raises:
            SessionBusyError: Another run holds it (a live process, a claim younger than
                `lease_s`).
        """
        token = token or uuid.uuid4().hex
        deadline = time.monotonic() + self._wait
        pause = 0.02
        while True:
            if await self._run(lambda conn: self._try_claim(conn, token)):
                return token
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionBusyError(
                    f"session {self._id!r} is busy: another run holds it (wait for it, or "
                    "pass wait= seconds to the session)",
                    session_id=self._id,
                )
            await anyio.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)

    def _try_claim(self, conn: Any, token: str) -> bool:
        d = self._dialect
        with _transaction(d, conn):
            now = time.time()
            d.execute(
                conn,
                "INSERT INTO llm_worker_sessions (id, version, updated_at) VALUES (?, 0, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (self._id, now),
            )
            row = d.execute(
                conn,
                "SELECT claim, claim_pid, claim_host, claimed_at FROM llm_worker_sessions "
                "WHERE id = ?" + d.for_update,
                (self._id,),
            ).fetchone()
            if row[0] is not None and row[0] != token and not _stale(row, now, self._lease):
                return False
            d.execute(
                conn,
                "UPDATE llm_worker_sessions SET claim = ?, claim_pid = ?, claim_host = ?, "
                "claimed_at = ? WHERE id = ?",
                (token, os.getpid(), socket.gethostname(), now, self._id),
            )
            return True

    async def load(self) -> SessionRecord:
        """The session's messages, pause and version (empty for a new session).

        Raises:
            SessionError: The store failed, or holds what this version cannot read.
        """
        return await self._run(self._load)

    def _load(self, conn: Any) -> SessionRecord:
        d = self._dialect
        cached = self._cached
        with _transaction(d, conn):
            row = d.execute(
                conn, "SELECT version, pause FROM llm_worker_sessions WHERE id = ?", (self._id,)
            ).fetchone()
            fresh = row is not None and (cached is None or str(cached[0]) != str(row[0]))
            rows: list[Any] = (
                d.execute(
                    conn,
                    "SELECT message FROM llm_worker_session_messages WHERE session_id = ? "
                    "ORDER BY seq",
                    (self._id,),
                ).fetchall()
                if fresh
                else []
            )
        if row is None:
            return SessionRecord()
        with self._readable():
            version = int(row[0])
            if fresh or cached is None:
                messages = [Message.from_dict(exact_loads(r[0])) for r in rows]
                self._cached = (version, messages)
            else:
                messages = cached[1]
            pause = None if row[1] is None else PauseState.from_json(row[1])
        return SessionRecord(list(messages), pause, version)

    @contextmanager
    def _readable(self) -> Generator[None]:
        """A stored record this version cannot read, as a `SessionError`."""
        try:
            yield
        except (ValueError, TypeError, KeyError, PauseStateError) as exc:
            raise SessionError(f"session {self._id!r} holds a record it cannot read") from exc

    async def messages_at(self, version: int, count: int) -> list[Message]:
        """The messages the session held at `version`, when it held `count` of them.

        What a recovered durable run started from: messages are only ever appended, so
        they are the first `count` ones, whatever was appended since, unless the session
        was cleared since.

        Raises:
            SessionError: The session was cleared since `version` (those messages are gone),
                or it never held `count` messages at `version`.
        """
        return await self._run(lambda conn: self._messages_at(conn, version, count))

    def _messages_at(self, conn: Any, version: int, count: int) -> list[Message]:
        d = self._dialect
        cached = self._cached
        hit = cached is not None and cached[0] == version and len(cached[1]) == count
        with _transaction(d, conn):
            # Read even when the copy is at hand: a clear by another object since it was read
            # must fail the run here as it would with no copy.
            row = d.execute(
                conn, "SELECT version, cleared FROM llm_worker_sessions WHERE id = ?", (self._id,)
            ).fetchone()
            rows: list[Any] = (
                []
                if hit
                else d.execute(
                    conn,
                    "SELECT message FROM llm_worker_session_messages WHERE session_id = ? "
                    "AND seq < ? ORDER BY seq",
                    (self._id, count),
                ).fetchall()
            )
        with self._readable():
            intact = row is None or (int(row[0]) >= version and int(row[1]) <= version)
            if intact and hit and cached is not None:
                return list(cached[1])
            if not intact or len(rows) != count:
                raise SessionError(
                    f"session {self._id!r} no longer holds the {count} messages it held at "
                    f"version {version} (it was cleared since)"
                )
            return [Message.from_dict(exact_loads(r[0])) for r in rows]

    async def append(
        self,
        token: str,
        version: int,
        messages: list[Message],
        pause: PauseState | None,
        *,
        key: str | None = None,
    ) -> None:
        """Append `messages` and set the pause, if the claim holds and nothing changed.

        Args:
            token: The claim's token (`claim()`'s).
            version: The version `load()` read.
            messages: The messages to append, oldest first.
            pause: The run's pause, or None (the session's pause is cleared).
            key: Makes the append happen once: the key is stored with it, in the same
                transaction, and an append whose key is stored already writes nothing and
                raises nothing (a recovered durable run's, whose first attempt appended).
                `appended(key)` tells the version it made.

        Raises:
            SessionBusyError: The claim was taken over or the session changed since `load`
                (nothing is written).
        """
        rows = [json_bytes(m.to_dict()).decode() for m in messages]  # wide integers exactly
        paused = None if pause is None else pause.to_json()
        await self._run(lambda conn: self._append(conn, token, version, rows, paused, key=key))

    async def appended(self, key: str) -> int | None:
        """The version the append keyed `key` made, or None if no append had this key."""
        return await self._run(lambda conn: _keyed(self._dialect, conn, self._id, key))

    def _append(
        self,
        conn: Any,
        token: str,
        version: int,
        rows: list[str],
        pause: str | None,
        *,
        key: str | None,
    ) -> None:
        d = self._dialect
        with _transaction(d, conn):
            if key is not None and _keyed(d, conn, self._id, key) is not None:
                return  # made already, by this run's earlier attempt: the cache is left as is
            self._write(conn, token, version, rows, pause)
            if key is not None:
                d.execute(
                    conn,
                    "INSERT INTO llm_worker_session_appends (session_id, append_key, version) "
                    "VALUES (?, ?, ?)",
                    (self._id, key, version + 1),
                )
        cached = self._cached
        if cached is not None and cached[0] == version:  # read back as a load would
            added = [Message.from_dict(exact_loads(r)) for r in rows]
            self._cached = (version + 1, [*cached[1], *added])

    def _write(
        self, conn: Any, token: str, version: int, rows: list[str], pause: str | None
    ) -> None:
        """The append itself, in the caller's transaction, if the claim and version hold."""
        d = self._dialect
        row = d.execute(
            conn,
            "SELECT version, claim FROM llm_worker_sessions WHERE id = ?" + d.for_update,
            (self._id,),
        ).fetchone()
        if row is None or row[1] != token or int(row[0]) != version:
            raise SessionBusyError(
                f"session {self._id!r} changed while this run went on (another run took "
                "it over): this run's messages were not appended",
                session_id=self._id,
            )
        seq = _count(d, conn, self._id)
        for offset, message in enumerate(rows):
            d.execute(
                conn,
                "INSERT INTO llm_worker_session_messages (session_id, seq, message) "
                "VALUES (?, ?, ?)",
                (self._id, seq + offset, message),
            )
        d.execute(
            conn,
            "UPDATE llm_worker_sessions SET version = version + 1, pause = ?, claim = NULL,"
            " claim_pid = NULL, claim_host = NULL, claimed_at = NULL, updated_at = ? "
            "WHERE id = ?",
            (pause, time.time(), self._id),
        )

    async def release(self, token: str) -> None:
        """Give up the claim `token` (a no-op when it is no longer held)."""
        await self._run(lambda conn: self._release(conn, token))

    def _release(self, conn: Any, token: str) -> None:
        self._dialect.execute(
            conn,
            "UPDATE llm_worker_sessions SET claim = NULL, claim_pid = NULL, claim_host = NULL, "
            "claimed_at = NULL WHERE id = ? AND claim = ?",
            (self._id, token),
        )

    # -- for the application -------------------------------------------------------------------

    async def messages(self) -> list[Message]:
        """The conversation as stored."""
        return (await self.load()).messages

    async def pause_state(self) -> PauseState | None:
        """The pause of the session's last run, if it paused."""
        return (await self.load()).pause

    async def clear(self) -> None:
        """Delete the session's messages, pause and append keys (its id stays).

        Its version moves on.

        Raises:
            SessionBusyError: A run holds the session.
        """
        await self._run(self._clear)

    def _clear(self, conn: Any) -> None:
        d = self._dialect
        with _transaction(d, conn):
            row = d.execute(
                conn,
                "SELECT claim, claim_pid, claim_host, claimed_at FROM llm_worker_sessions "
                "WHERE id = ?" + d.for_update,
                (self._id,),
            ).fetchone()
            if row is None:
                return
            if row[0] is not None and not _stale(row, time.time(), self._lease):
                raise SessionBusyError(
                    f"session {self._id!r} is busy: a run holds it", session_id=self._id
                )
            d.execute(
                conn, "DELETE FROM llm_worker_session_messages WHERE session_id = ?", (self._id,)
            )
            # The keys go too (the table stays as small as the sessions): a durable run that
            # appended before the clear and is recovered after it fails at its reload
            # (`messages_at`: cleared since), before it could append again.
            d.execute(
                conn, "DELETE FROM llm_worker_session_appends WHERE session_id = ?", (self._id,)
            )
            d.execute(
                conn,
                "UPDATE llm_worker_sessions SET version = version + 1, pause = NULL, "
                "cleared = version + 1, updated_at = ? WHERE id = ?",
                (time.time(), self._id),
            )

    async def fork(self, new_id: str) -> Self:
        """A new session `new_id` in the same store, starting as a copy of this one.

        The copy has this session's messages and pause (a paused conversation forks paused)
        and a history of its own from then on.

        Raises:
            SessionError: A session `new_id` exists already.
        """
        await self._run(lambda conn: self._copy(conn, new_id))
        return self._sibling(new_id)

    def _sibling(self, session_id: str) -> Self:
        """A session of the same store (the subclass's constructor)."""
        raise NotImplementedError

    def _copy(self, conn: Any, new_id: str) -> None:
        d = self._dialect
        with _transaction(d, conn):
            taken = d.execute(
                conn, "SELECT 1 FROM llm_worker_sessions WHERE id = ?", (new_id,)
            ).fetchone()
            if taken is not None:
                raise SessionError(f"cannot fork to {new_id!r}: that session exists already")
            d.execute(
                conn,
                "INSERT INTO llm_worker_sessions (id, version, pause, updated_at) "
                "SELECT ?, 0, pause, ? FROM llm_worker_sessions WHERE id = ?",
                (new_id, time.time(), self._id),
            )
            d.execute(
                conn,
                "INSERT INTO llm_worker_session_messages (session_id, seq, message) "
                "SELECT ?, seq, message FROM llm_worker_session_messages WHERE session_id = ?",
                (new_id, self._id),
            )

    async def list_ids(self, prefix: str = "") -> list[str]:
        """The ids of the sessions in this store that start with `prefix`, sorted."""
        return await self._run(lambda conn: self._ids(conn, prefix))

    def _ids(self, conn: Any, prefix: str) -> list[str]:
        rows = self._dialect.execute(
            conn,
            "SELECT id FROM llm_worker_sessions WHERE substr(id, 1, CAST(? AS INTEGER)) = ? "
            "ORDER BY id",
            (len(prefix), prefix),
        ).fetchall()
        return [str(r[0]) for r in rows]


@contextmanager
def _transaction(d: Dialect, conn: Any) -> Generator[None]:
    d.execute(conn, d.begin_write)
    try:
        yield
    except BaseException:
        d.execute(conn, "ROLLBACK")
        raise
    d.execute(conn, "COMMIT")


def _keyed(d: Dialect, conn: Any, session_id: str, key: str) -> int | None:
    row = d.execute(
        conn,
        "SELECT version FROM llm_worker_session_appends WHERE session_id = ? AND append_key = ?",
        (session_id, key),
    ).fetchone()
    return None if row is None else int(row[0])


def _count(d: Dialect, conn: Any, session_id: str) -> int:
    row = d.execute(
        conn,
        "SELECT COUNT(*) FROM llm_worker_session_messages WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return int(row[0])


def _stale(row: Any, now: float, lease: float) -> bool:
    """Whether a claim is over: its lease ran out, or its process on this host is gone."""
    _, pid, host, claimed_at = row
    if claimed_at is None or now - float(claimed_at) > lease:
        return True
    if host != socket.gethostname() or pid is None or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def _migrate(d: Dialect, conn: Any) -> None:
    """Bring the store to SCHEMA_VERSION, or refuse one written by a newer version."""
    d.execute(conn, "CREATE TABLE IF NOT EXISTS llm_worker_session_schema (version INTEGER)")
    with _transaction(d, conn):
        d.lock_schema(conn)
        row = d.execute(conn, "SELECT version FROM llm_worker_session_schema").fetchone()
        at = 0 if row is None else int(row[0])
        if at > SCHEMA_VERSION:
            raise SessionError(
                f"the session store is at schema version {at}; this llm-worker reads up to "
                f"{SCHEMA_VERSION}: upgrade llm-worker"
            )
        for step in MIGRATIONS[at:]:
            for sql in step:
                d.execute(conn, sql)
        if row is None:
            d.execute(conn, "INSERT INTO llm_worker_session_schema VALUES (?)", (SCHEMA_VERSION,))
        elif at < SCHEMA_VERSION:
            d.execute(conn, "UPDATE llm_worker_session_schema SET version = ?", (SCHEMA_VERSION,))
