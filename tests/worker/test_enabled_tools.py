"""`@tool(enabled=...)`: tools offered only when the conversation allows, asked before requests."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import (
    Decision,
    EnabledContext,
    HookError,
    PauseState,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.tools import Tool

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0


class Db:
    """`query` is offered only once `schema` was called (and succeeded)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.asked: list[int] = []

    @tool(effect="read_only")
    def schema(self) -> str:
        """The database schema."""
        self.ran.append("schema")
        return "orders(id, total)"

    def after_schema(self, ctx: EnabledContext) -> bool:
        self.asked.append(ctx.requests)
        return ctx.called("schema")

    def tools(self) -> list[Tool]:
        @tool(effect="read_only", enabled=self.after_schema)
        def query(sql: str) -> str:
            """Run a query."""
            self.ran.append(f"query {sql}")
            return "42"

        @tool(effect="read_only")
        def help_me() -> str:
            """Always there."""
            return "help"

        return [query, self.schema, help_me]


def offered(call: ScriptedRequest) -> list[str]:
    return [spec.name for spec in call.request.tools]


async def test_a_tool_is_offered_once_its_condition_holds_in_registration_order() -> None:
    db = Db()
    seen: list[list[str]] = []

    def answer(parts: list[ToolUsePart] | str):
        def step(call: ScriptedRequest) -> ScriptedResponse:
            seen.append(offered(call))
            if isinstance(parts, str):
                return ScriptedResponse.text(parts)
            return ScriptedResponse(list(parts))

        return step

    script = [
        answer([ToolUsePart("c1", "query", {"sql": "select 1"})]),  # too early: refused
        answer([ToolUsePart("c2", "schema", {})]),
        answer([ToolUsePart("c3", "query", {"sql": "select total"})]),
        answer("42"),
    ]
    worker = Worker(ScriptedClient(script), tools=db.tools())
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("total?")
    assert result.text == "42"
    assert seen == [
        ["schema", "help_me"],
        ["schema", "help_me"],
        ["query", "schema", "help_me"],  # the registration order, stable across requests
        ["query", "schema", "help_me"],
    ]
    assert db.ran == ["schema", "query select total"]
    refused = result.messages[2].tool_results[0]
    assert refused.is_error and "'query' is not enabled" in refused.content
    assert "schema, help_me" in refused.content
    assert db.asked == [0, 1, 2, 3]  # once before each request, and only then


async def test_parallel_calls_run_the_enabled_ones_and_refuse_the_others() -> None:
    db = Db()
    script = [
        ScriptedResponse(
            [ToolUsePart("c1", "schema", {}), ToolUsePart("c2", "query", {"sql": "x"})]
        ),
        ScriptedResponse.text("ok"),
    ]
    for early in (False, True):
        db.ran.clear()
        worker = Worker(ScriptedClient(list(script)), tools=db.tools(), early_tool_start=early)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("go")
        schema, query = result.messages[2].tool_results
        assert not schema.is_error and query.is_error, early
        assert db.ran == ["schema"]  # the schema call in the same answer does not enable it


async def test_the_enabled_set_is_recomputed_from_a_resumed_history() -> None:
    db = Db()
    seen: list[list[str]] = []

    def final(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(offered(call))
        return ScriptedResponse.text("done")

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send the report."""
        return f"sent to {to}"

    first = Worker(
        ScriptedClient(
            [
                ScriptedResponse([ToolUsePart("c1", "schema", {})]),
                ScriptedResponse(
                    [
                        ToolUsePart("c2", "send", {"to": "ana"}),
                        ToolUsePart("c3", "query", {"sql": "q"}),
                    ]
                ),
            ]
        ),
        tools=[*db.tools(), send],
    )
    with anyio.fail_after(TIMEOUT):
        paused = await first.run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    fresh = Db()  # another process: its callable reads only the resumed history
    second = Worker(ScriptedClient([final]), tools=[*fresh.tools(), send])
    with anyio.fail_after(TIMEOUT):
        done = await second.resume(state, decisions={"c2": Decision.approve()})
    assert done.text == "done"
    assert fresh.ran == ["query q"]  # enabled by the schema call in the resumed history
    assert seen == [["query", "schema", "help_me", "send"]]


async def test_an_enabled_callable_that_fails_names_itself() -> None:
    def broken(ctx: EnabledContext) -> bool:
        raise RuntimeError("db down")

    def vague(ctx: EnabledContext) -> bool:
        return "yes"  # type: ignore[return-value]  # pyright: ignore[reportReturnType]

    for check, text in ((broken, "raised RuntimeError: db down"), (vague, "returned str")):

        @tool(enabled=check)
        def t() -> str:
            """A tool."""
            return ""

        worker = Worker(ScriptedClient([ScriptedResponse.text("x")]), tools=[t])
        with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match=text) as caught:
            await worker.run("go")
        assert caught.value.kind == "enabled"
        assert worker.history[-1].role == "user"  # nothing was sent


async def test_an_async_enabled_callable_and_a_hand_written_tool() -> None:
    async def never(ctx: EnabledContext) -> bool:
        await anyio.lowlevel.checkpoint()
        return False

    class Hidden:
        name = "hidden"
        description = "Never offered."
        enabled = staticmethod(never)

        def __init__(self) -> None:
            self.input_schema: dict[str, object] = {"type": "object"}

        async def execute(self, input_json: str) -> str:
            return "ran"  # pragma: no cover

    seen: list[list[str]] = []

    def step(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(offered(call))
        return ScriptedResponse.text("ok")

    worker = Worker(ScriptedClient([step]), tools=[Hidden()])
    with anyio.fail_after(TIMEOUT):
        await worker.run("go")
    assert seen == [[]]
