"""Sessions on SQLite and PostgreSQL: load, append, busy, pause, fork, clear, list, schema."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import (
    Decision,
    Message,
    PauseState,
    ProviderPart,
    RunStatus,
    TextPart,
    ThinkingPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.errors import PauseStateError, SessionBusyError, SessionError
from llm_worker.messages import Origin
from llm_worker.sessions import Session
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from sessions.conftest import Store

pytestmark = pytest.mark.anyio


@tool
def note(text: str) -> str:
    """Note it."""
    return f"noted {text}"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay."""
    return f"paid {amount}"


def noting(text: str = "x") -> list[ScriptedResponse]:
    return [
        ScriptedResponse([ToolUsePart("", "note", {"text": text})]),
        ScriptedResponse.text("ok"),
    ]


async def test_a_run_appends_its_messages_and_the_next_worker_goes_on_from_them(
    store: Store,
) -> None:
    session = store.session("chat-1")
    assert isinstance(session, Session)
    with anyio.fail_after(20):
        first = await Worker(ScriptedClient(noting()), tools=[note]).run("hi", session=session)
        assert first.status is RunStatus.FINISHED
        stored = await session.messages()
        assert stored == first.messages and len(stored) == 4
        client = ScriptedClient([ScriptedResponse.text("again")])
        other = store.session("chat-1")  # another connection, as another process would
        second = await Worker(client, tools=[note]).run("more", session=other)
    assert client.requests[0].messages[:4] == stored  # the history came from the session
    assert second.messages[0] == Message.user("more")
    assert len(await session.messages()) == 6


async def test_opaque_provider_data_and_blob_ids_survive_the_store(store: Store) -> None:
    origin = Origin("anthropic", "claude-sonnet-4-5")
    history = [
        Message.user("look"),
        Message(
            "assistant",
            [
                ThinkingPart("hmm", signature="sig-Δ", origin=origin),
                ThinkingPart("", redacted="enc==", origin=origin),
                ProviderPart({"type": "server_tool_use", "id": "srv_1"}, origin=origin),
                TextPart("see [blob:0190a1b2-c3d4-8e5f-9a0b-1c2d3e4f5a6b]"),
            ],
        ),
    ]
    session = store.session("opaque")
    token = await session.claim()
    await session.append(token, (await session.load()).version, history, None)
    assert await store.session("opaque").messages() == history


async def test_a_second_run_on_a_held_session_fails_clearly(store: Store) -> None:
    session = store.session("busy")
    token = await session.claim()
    with anyio.fail_after(20), pytest.raises(SessionBusyError) as info:
        await Worker(ScriptedClient(noting()), tools=[note]).run(
            "hi", session=store.session("busy")
        )
    assert info.value.session_id == "busy" and "busy" in str(info.value)
    await session.release(token)
    assert await session.messages() == []


async def test_wait_takes_the_session_once_the_holder_lets_go(store: Store) -> None:
    holder = store.session("waits")
    token = await holder.claim()
    waiting = store.session("waits", wait=10)
    worker = Worker(ScriptedClient(noting()), tools=[note])
    results: list[RunStatus] = []

    async def run() -> None:
        results.append((await worker.run("hi", session=waiting)).status)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await holder.release(token)
    assert results == [RunStatus.FINISHED]


async def test_an_append_after_the_session_changed_is_refused_whole(store: Store) -> None:
    session = store.session("stale")
    token = await session.claim()
    record = await session.load()
    await session.append(token, record.version, [Message.user("one")], None)
    again = await session.claim()
    with pytest.raises(SessionBusyError):
        await session.append(again, record.version, [Message.user("two")], None)  # old version
    assert await session.messages() == [Message.user("one")]
    await session.release(again)


async def test_a_pause_is_kept_in_the_session_and_resumed_from_it(store: Store) -> None:
    script = [
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 3})]),
        ScriptedResponse.text("paid"),
    ]
    with anyio.fail_after(20):
        paused = await Worker(ScriptedClient(script[:1]), tools=[pay]).run(
            "pay 3", session=store.session("pp")
        )
        assert paused.status is RunStatus.PAUSED
        kept = await store.session("pp").pause_state()
        assert kept is not None and [p.call.id for p in kept.pending] == ["p1"]
        with pytest.raises(PauseStateError, match="resume"):
            await Worker(ScriptedClient(script), tools=[pay]).run(
                "new", session=store.session("pp")
            )
        worker = Worker(ScriptedClient(script[1:]), tools=[pay])
        session = store.session("pp")
        done = await worker.resume(decisions={"p1": Decision.approve()}, session=session)
    assert done.status is RunStatus.FINISHED and done.text == "paid"
    assert await session.pause_state() is None
    stored = await session.messages()
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2].tool_results[0].content == "paid 3"
    with pytest.raises(PauseStateError, match="no paused run"):
        await worker.resume(session=session)


async def test_a_state_that_is_not_the_sessions_pause_is_refused(store: Store) -> None:
    other = PauseState([Message.user("elsewhere"), Message.user("two")])
    with anyio.fail_after(20), pytest.raises(PauseStateError, match="not the pause"):
        await Worker(ScriptedClient([])).resume(other, session=store.session("none"))


async def test_a_failed_run_keeps_its_valid_history(store: Store) -> None:
    from llm_worker import LimitExceededError, Limits

    with anyio.fail_after(20), pytest.raises(LimitExceededError):
        await Worker(ScriptedClient(noting()), tools=[note]).run(
            "hi", session=store.session("fails"), limits=Limits(requests=1)
        )
    stored = await store.session("fails").messages()
    assert [m.role for m in stored] == ["user", "assistant", "user"]  # the call answered


async def test_fork_clear_and_list_by_prefix(store: Store) -> None:
    session = store.session("user-1/a")
    with anyio.fail_after(20):
        await Worker(ScriptedClient(noting()), tools=[note]).run("hi", session=session)
        fork = store.track(await session.fork("user-1/b"))
        with pytest.raises(SessionError, match="exists"):
            await session.fork("user-1/b")
        await store.session("user-2/a").load()  # a new id is not stored until claimed
        await Worker(ScriptedClient(noting()), tools=[note]).run(
            "x", session=store.session("user-2/a")
        )
        await Worker(ScriptedClient([ScriptedResponse.text("b")])).run("only b", session=fork)
        assert len(await fork.messages()) == 6 and len(await session.messages()) == 4
        assert await session.list_ids("user-1/") == ["user-1/a", "user-1/b"]
        assert await session.list_ids("user-") == ["user-1/a", "user-1/b", "user-2/a"]
        assert await session.list_ids("user_") == []  # no LIKE wildcards
        await session.clear()
        assert await session.messages() == [] and len(await fork.messages()) == 6
        token = await fork.claim()
        with pytest.raises(SessionBusyError):
            await fork.clear()
        await fork.release(token)


async def test_a_store_of_a_newer_schema_is_refused_and_an_empty_one_is_made(store: Store) -> None:
    session = store.session("schema")
    await session.load()  # makes the tables at the current version
    from llm_worker.sessions._sql import SCHEMA_VERSION

    conn = session._conn  # pyright: ignore[reportPrivateUsage]
    conn.execute("UPDATE llm_worker_session_schema SET version = 99")
    await session.aclose()
    with pytest.raises(SessionError, match="schema version 99"):
        await store.session("schema").load()
    newer = store.session("schema")
    with pytest.raises(SessionError, match=f"reads up to {SCHEMA_VERSION}"):
        await newer.messages()


async def test_a_session_id_must_be_a_string() -> None:
    from llm_worker.sessions import SqliteSession

    with pytest.raises(SessionError):
        SqliteSession("", "x.db")
    with pytest.raises(SessionError):
        SqliteSession("a", "x.db", wait=-1)


async def test_a_damaged_record_is_a_session_error(store: Store) -> None:
    session = store.session("bad")
    token = await session.claim()
    await session.append(token, 0, [Message.user("fine")], None)
    conn = session._conn  # pyright: ignore[reportPrivateUsage]
    sql = "UPDATE llm_worker_session_messages SET message = 'not json'"
    conn.execute(sql)
    with pytest.raises(SessionError, match="cannot read"):
        await session.messages()


def _answer(call: ScriptedRequest) -> ScriptedResponse:
    return ScriptedResponse.text(f"{len(call.request.messages)} messages")
