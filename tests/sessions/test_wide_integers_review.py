"""A call's integer past 64 bits through a SQL session (SQLite, PostgreSQL): saved with its
digits (it was an untyped TypeError) and read back exactly (orjson reads it as a float)."""

from __future__ import annotations

import anyio
import orjson
import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedResponse
from sessions.conftest import Store

pytestmark = pytest.mark.anyio

WIDE = 2**70 + 1  # no double holds it
paid: list[int] = []


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay (a person approves each payment)."""
    paid.append(amount)
    return f"paid {amount}"


async def test_a_wide_integer_is_kept_and_resumed_exactly_by_a_fresh_session(
    store: Store,
) -> None:
    paid.clear()  # the model streams the digits (the parser keeps them)
    first = ScriptedClient(
        [ScriptedResponse([ToolUsePart("", "pay", {"amount": orjson.Fragment(str(WIDE))})])]
    )
    with anyio.fail_after(60):
        result = await Worker(first, tools=[pay]).run("Pay", session=store.session("s"))
        assert result.status is RunStatus.PAUSED
        fresh = store.session("s")  # nothing cached: read from the database
        state = await fresh.pause_state()
        assert state is not None and state.pending[0].call.input == {"amount": WIDE}
        assert (await fresh.messages())[1].tool_uses[0].input == {"amount": WIDE}
        call = state.pending[0].call.id
        second = ScriptedClient([ScriptedResponse.text("Paid.")])
        done = await Worker(second, tools=[pay]).resume(
            decisions={call: Decision.approve()}, session=fresh
        )
    assert done.status is RunStatus.FINISHED
    assert paid == [WIDE]
    stored = await store.session("s").messages()
    assert stored[1].tool_uses[0].input == {"amount": WIDE}
    assert stored[2].tool_results[0].content == f"paid {WIDE}"
