"""Review probes: a run refused before it began writes nothing, even to a cleared session."""

from __future__ import annotations

import pytest

from llm_worker import Message, ToolUsePart, Worker, tool
from llm_worker.errors import PauseStateError, SessionError
from llm_worker.testing import ScriptedClient, ScriptedResponse
from sessions.conftest import Store

pytestmark = pytest.mark.anyio


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


async def test_a_resume_refused_on_a_cleared_session_does_not_write_the_workers_history(
    store: Store,
) -> None:
    # The Worker still holds the paused run's history (a call without its result); the
    # session was cleared since. The resume is refused, and the session stays empty: it was
    # given that history back (the run "failed past its start" to in_session's eyes).
    session = store.session("s")
    script = [ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 1})])]
    worker = Worker(ScriptedClient(script), tools=[pay], session=session)
    paused = await worker.run("pay one")
    assert paused.state is not None and len(worker.history) == 2
    await session.clear()
    with pytest.raises(PauseStateError, match="no paused run"):
        await worker.resume()
    with pytest.raises(PauseStateError, match="not the pause"):
        await worker.resume(paused.state)
    record = await store.session("s").load()
    assert record.messages == [] and record.pause is None


async def test_the_messages_a_run_loaded_are_gone_after_a_clear_even_from_a_cached_copy(
    store: Store,
) -> None:
    # A recovered durable run reads its first load back with `messages_at`; the object that
    # made that load still holds its copy. Cleared by another object since, the messages are
    # gone for it too (it gave them back from its copy).
    session = store.session("s")
    token = await session.claim()
    await session.append(token, 0, [Message.user("a"), Message.assistant("b")], None)
    loaded = await session.load()
    await store.session("s").clear()
    with pytest.raises(SessionError, match="cleared since"):
        await session.messages_at(loaded.version, 2)
    assert texts(await store.session("s").messages()) == []
