"""Two small tables llm-worker keeps beside DBOS's, in its system database.

`llm_worker_claims`: one row per answered pause of a run (`run id`, `wait`, the answer's
message). A decision or a cancel inserts the row before it sends its message; the primary key
lets exactly one of two simultaneous answers in, on SQLite and PostgreSQL alike, and the other
learns it lost. The message is kept so that an answer whose process died between the insert
and the send is not lost: the next answer to that pause sends it again (the send is keyed by
the wait, so DBOS delivers it once) before it is refused.

`llm_worker_leases`: one row per serving process (`executor id`, a token unique to the
process, when the lease ends). A serving process renews its lease while it lives and drops it
when it leaves; `recover()` refuses an executor whose lease is current, and a process starting
with the executor id of a live one waits for its lease to end.

Imported only once the `dbos` extra (which brings SQLAlchemy) is known to be installed.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

__all__ = ("Store",)


class Store:
    """llm-worker's tables in one system database."""

    def __init__(self, engine: sa.Engine, schema: str | None) -> None:
        self._engine = engine
        meta = sa.MetaData(schema=schema)
        self._claims = sa.Table(
            "llm_worker_claims",
            meta,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column("wait", sa.Integer, primary_key=True),
            sa.Column("kind", sa.Text, nullable=False),
            sa.Column("message", sa.Text, nullable=True),
        )
        self._leases = sa.Table(
            "llm_worker_leases",
            meta,
            sa.Column("executor_id", sa.Text, primary_key=True),
            sa.Column("holder", sa.Text, nullable=False),
            sa.Column("expires_at", sa.Float, nullable=False),
        )
        self._meta = meta
        # Leases are compared on the database's clock: the processes of a fleet on one
        # PostgreSQL server run on machines whose clocks differ (a fast clock would read a live
        # process's lease as ended and take its runs over). A SQLite file has one machine.
        self._now: Any = (
            sa.extract("epoch", sa.func.clock_timestamp())
            if engine.dialect.name == "postgresql"
            else None
        )

    def _clock(self, c: sa.Connection) -> float:
        """Seconds since the epoch, by the database's clock (PostgreSQL) or this machine's."""
        if self._now is None:
            return time.time()
        return float(c.execute(sa.select(self._now)).scalar_one())

    def create(self) -> None:
        """Create the tables if they are missing (every process may race to do it)."""
        try:
            self._meta.create_all(self._engine, checkfirst=True)
        except (IntegrityError, ProgrammingError, OperationalError):
            # Another process created them between the check and the create.
            self._meta.create_all(self._engine, checkfirst=True)

    def claim(self, run_id: str, wait: int, kind: str, message: str) -> bool:
        """Take the answer to the run's pause `wait`; False when another answer has it.

        `message` is the answer's JSON text, kept to send it again (`answer`).
        """
        values = {"run_id": run_id, "wait": wait, "kind": kind, "message": message}
        try:
            with self._engine.begin() as c:
                c.execute(sa.insert(self._claims).values(**values))
        except IntegrityError:
            return False
        return True

    def answer(self, run_id: str, wait: int) -> str | None:
        """The message JSON text that answered the run's pause `wait`, if any."""
        claims = self._claims
        with self._engine.connect() as c:
            row = c.execute(
                sa.select(claims.c.message).where(claims.c.run_id == run_id, claims.c.wait == wait)
            ).first()
        return None if row is None or row[0] is None else str(row[0])

    def last_answer(self, run_id: str) -> str | None:
        """What answered the run's latest answered pause (`decision` or `cancel`), if any."""
        claims = self._claims
        with self._engine.connect() as c:
            row = c.execute(
                sa.select(claims.c.kind)
                .where(claims.c.run_id == run_id)
                .order_by(claims.c.wait.desc())
                .limit(1)
            ).first()
        return None if row is None else str(row[0])

    def live(self, executor_ids: list[str], *, holder: str | None = None) -> list[str]:
        """The executors among `executor_ids` whose lease is current (not held by `holder`)."""
        with self._engine.connect() as c:
            query = sa.select(self._leases.c.executor_id).where(
                self._leases.c.executor_id.in_(executor_ids),
                self._leases.c.expires_at > self._clock(c),
            )
            if holder is not None:
                query = query.where(self._leases.c.holder != holder)
            return [str(r[0]) for r in c.execute(query)]

    def take(self, executor_id: str, holder: str, duration: float) -> bool:
        """Take or renew the lease of `executor_id` for `holder`; False while another holds it."""
        table = self._leases
        with self._engine.begin() as c:
            now = self._clock(c)
            values: dict[str, Any] = {"holder": holder, "expires_at": now + duration}
            updated = c.execute(
                sa.update(table)
                .where(
                    table.c.executor_id == executor_id,
                    sa.or_(table.c.holder == holder, table.c.expires_at <= now),
                )
                .values(**values)
            )
            if updated.rowcount:
                return True
        try:
            with self._engine.begin() as c:
                values["expires_at"] = self._clock(c) + duration
                c.execute(sa.insert(table).values(executor_id=executor_id, **values))
        except IntegrityError:
            return False  # a live holder's row (or a racing process inserted first)
        return True

    def drop(self, executor_id: str, holder: str) -> None:
        """Give up `holder`'s lease of `executor_id`."""
        table = self._leases
        with self._engine.begin() as c:
            c.execute(
                sa.delete(table).where(table.c.executor_id == executor_id, table.c.holder == holder)
            )
