"""Review probe: leases are read on the database's clock, not each machine's.

The processes of a fleet on one PostgreSQL server run on machines whose clocks differ; a
machine whose clock ran an hour fast read a live process's lease as ended (and `recover()`
took over runs still running, so they ran twice).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from llm_worker.durable._store import Store


@pytest.fixture
def pg_store(postgres_server: str) -> Iterator[Store]:
    url = f"{postgres_server}/postgres".replace("postgresql://", "postgresql+psycopg://")
    engine = sa.create_engine(url)
    store = Store(engine, None)
    store.create()
    yield store
    engine.dispose()


def test_a_fast_clock_on_one_machine_does_not_end_a_live_lease(
    pg_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = f"A-{uuid.uuid4().hex[:8]}"
    assert pg_store.take(executor, "alive", 30.0)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600.0)  # this machine runs fast
    assert pg_store.live([executor]) == [executor]
    assert not pg_store.take(executor, "intruder", 30.0)  # the live holder keeps it
    monkeypatch.setattr(time, "time", lambda: real() - 3600.0)  # and a slow one
    assert pg_store.take(executor, "alive", 0.0)  # renewed to end now, by the server's clock
    assert pg_store.live([executor]) == []
    assert pg_store.take(executor, "next", 30.0)
