"""What a durable run needs of a store (`ReplaySafeSession`), on SQLite and PostgreSQL.

A keyed append is written once; a claim is taken again under its own token, never under
another's; the messages a run loaded come back whatever was appended since, unless a clear
removed them; a store of schema version 1 is migrated and stays readable.
"""

from __future__ import annotations

import pytest

from llm_worker import Message, PauseState
from llm_worker.errors import SessionBusyError, SessionError
from llm_worker.sessions import ReplaySafeSession, Session
from llm_worker.sessions._sql import MIGRATIONS, SCHEMA_VERSION
from sessions.conftest import Store

pytestmark = pytest.mark.anyio


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_both_stores_are_replay_safe_and_a_plain_session_is_not(store: Store) -> None:
    assert isinstance(store.session("s"), ReplaySafeSession)

    class Plain:
        session_id = "plain"

        async def claim(self) -> str: ...
        async def load(self) -> object: ...
        async def append(self, *args: object) -> None: ...
        async def release(self, token: str) -> None: ...

    assert isinstance(Plain(), Session) and not isinstance(Plain(), ReplaySafeSession)


async def test_a_keyed_append_is_written_once(store: Store) -> None:
    session = store.session("s")
    token = await session.claim()
    assert await session.appended("run-1:0") is None
    await session.append(token, 0, [Message.user("a")], None, key="run-1:0")
    assert await session.appended("run-1:0") == 1
    # Again, as a recovered run would: its claim and version are long gone, nothing is written.
    await session.append(token, 0, [Message.user("a")], None, key="run-1:0")
    assert texts(await session.messages()) == ["a"] and (await session.load()).version == 1
    # Another key with the same stale version is another append: refused, as ever.
    with pytest.raises(SessionBusyError):
        await session.append(token, 0, [Message.user("b")], None, key="run-2:0")
    assert await session.appended("run-2:0") is None
    # Keys are per session: the same key on another session is that session's own.
    elsewhere = store.session("t")
    other = await elsewhere.claim()
    await elsewhere.append(other, 0, [Message.user("c")], None, key="run-1:0")
    assert texts(await elsewhere.messages()) == ["c"]


async def test_a_claim_is_taken_again_under_its_own_token_only(store: Store) -> None:
    session, rival = store.session("s"), store.session("s")
    assert await session.claim("run-1") == "run-1"
    assert await session.claim("run-1") == "run-1"  # its own claim: taken again
    with pytest.raises(SessionBusyError):
        await rival.claim("run-2")  # another run's token: this live process holds it
    with pytest.raises(SessionBusyError):
        await rival.claim()
    await session.append("run-1", 0, [Message.user("a")], None, key="run-1:0")
    assert await rival.claim("run-2") == "run-2"  # the append released it


async def test_the_messages_a_run_loaded_come_back_unless_a_clear_removed_them(
    store: Store,
) -> None:
    session = store.session("s")
    token = await session.claim()
    await session.append(token, 0, [Message.user("a"), Message.assistant("b")], None)
    loaded = await session.load()
    token = await session.claim()
    await session.append(token, loaded.version, [Message.user("c")], None)
    fresh = store.session("s")  # no cache: read from the store
    assert texts(await fresh.messages_at(loaded.version, 2)) == ["a", "b"]
    assert texts(await session.messages_at(loaded.version, 2)) == ["a", "b"]
    assert await fresh.messages_at(0, 0) == []
    await session.append(await session.claim(), loaded.version + 1, [], None, key="k")
    await session.clear()
    assert await session.appended("k") is None  # the keys went with the messages
    token = await session.claim()
    await session.append(token, loaded.version + 3, [Message.user("x"), Message.user("y")], None)
    for reader in (session, store.session("s")):
        with pytest.raises(SessionError, match="cleared since"):
            await reader.messages_at(loaded.version, 2)
    assert texts(await session.messages_at(loaded.version + 4, 2)) == ["x", "y"]
    with pytest.raises(SessionError):
        await session.messages_at(loaded.version + 4, 5)  # it never held 5


async def test_a_store_at_schema_version_1_is_migrated_and_stays_readable(store: Store) -> None:
    old = store.session("kept")
    d = old._dialect  # pyright: ignore[reportPrivateUsage]
    conn = d.connect()  # raw: no migration
    try:
        d.execute(conn, "CREATE TABLE llm_worker_session_schema (version INTEGER)")
        d.execute(conn, "INSERT INTO llm_worker_session_schema VALUES (1)")
        for sql in MIGRATIONS[0]:
            d.execute(conn, sql)
        state = PauseState(history=[Message.user("a")])
        d.execute(
            conn,
            "INSERT INTO llm_worker_sessions (id, version, pause, updated_at) VALUES (?, 3, ?, 0)",
            ("kept", state.to_json()),
        )
        for seq, text in enumerate(["a"]):
            d.execute(
                conn,
                "INSERT INTO llm_worker_session_messages (session_id, seq, message) "
                "VALUES (?, ?, ?)",
                ("kept", seq, Message.user(text).to_json()),
            )
    finally:
        conn.close()
    record = await old.load()  # migrated on first use
    assert (texts(record.messages), record.version) == (["a"], 3)
    assert record.pause is not None and texts(record.pause.history) == ["a"]
    assert SCHEMA_VERSION == 2
    version = old._conn.execute("SELECT version FROM llm_worker_session_schema").fetchone()  # pyright: ignore[reportPrivateUsage]
    assert int(version[0]) == SCHEMA_VERSION
    token = await old.claim()
    await old.append(token, 3, [Message.assistant("b")], None, key="k")
    assert texts(await old.messages_at(3, 1)) == ["a"]
    assert texts(await store.session("kept").messages()) == ["a", "b"]
