"""A tool that raises: the exception stays on the result, is logged, and the model reads a
text the application may choose (by default the type and message, never a traceback)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from llm_worker import PauseState, ToolError, ToolUsePart, Worker
from llm_worker.collectors import ToolCall
from llm_worker.hooks import Pause, ToolCallContext, ToolResultContext
from llm_worker.state import RunStatus, ToolResultReady
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.tools import ToolResult, execute_call, tool

pytestmark = pytest.mark.anyio


@tool(effect="read_only")
def ratio(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@tool(effect="read_only")
def refuse() -> str:
    """Always refuses."""
    raise ToolError("not today")


async def run(t: Any, **arguments: Any) -> ToolResult:
    with anyio.fail_after(5):
        return await execute_call(t, ToolCall("c1", t.name, arguments))


async def test_the_exception_stays_on_the_result_and_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="llm_worker"):
        result = await run(ratio, a=1, b=0)
    assert result.is_error
    assert result.content == "ZeroDivisionError: division by zero"  # never a traceback
    assert isinstance(result.exception, ZeroDivisionError)
    assert result.exception.__traceback__ is not None
    (record,) = [r for r in caplog.records if r.name == "llm_worker"]
    assert "ratio" in record.getMessage() and "c1" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[1] is result.exception
    assert "Traceback" in caplog.text and "a / b" in caplog.text


async def test_a_tool_error_is_kept_but_not_logged_as_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="llm_worker"):
        result = await run(refuse)
    assert result.content == "not today"
    assert isinstance(result.exception, ToolError)
    assert not caplog.records


async def test_the_formatter_chooses_what_the_model_reads_and_its_own_failure_is_survived(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def short(exc: BaseException, call: ToolCall) -> str:
        return f"{call.name} failed ({type(exc).__name__}); try other numbers"

    with anyio.fail_after(5):
        result = await execute_call(
            ratio, ToolCall("c1", "ratio", {"a": 1, "b": 0}), format_error=short
        )
    assert result.content == "ratio failed (ZeroDivisionError); try other numbers"

    def broken(exc: BaseException, call: ToolCall) -> str:
        raise RuntimeError("formatter bug")

    with caplog.at_level(logging.ERROR, logger="llm_worker"), anyio.fail_after(5):
        result = await execute_call(
            ratio, ToolCall("c1", "ratio", {"a": 1, "b": 0}), format_error=broken
        )
    assert result.content == "ZeroDivisionError: division by zero"
    assert isinstance(result.exception, ZeroDivisionError)
    assert "formatter bug" in caplog.text


def hint(exc: BaseException, call: ToolCall) -> str:
    return f"{type(exc).__name__} in {call.name}: check b"


@pytest.mark.parametrize("provider", ["scripted", "gemini"])
async def test_the_application_sees_the_exception_and_the_model_the_formatted_text(
    provider: str,
) -> None:
    script = [
        ScriptedResponse([ToolUsePart("c1", "ratio", {"a": 1, "b": 0})]),
        ScriptedResponse.text("b must not be zero."),
    ]
    seen: list[BaseException | None] = []

    async def after(ctx: ToolResultContext) -> None:
        seen.append(ctx.result.exception)

    async def go(client: Any) -> tuple[list[Any], Worker]:
        worker = Worker(client, tools=[ratio], format_tool_error=hint)
        worker.add_after_tool_call_hook(after)
        events: list[Any] = []
        with anyio.fail_after(10):
            async for event in worker.stream("1/0?"):
                events.append(event)
        return events, worker

    if provider == "scripted":
        events, worker = await go(ScriptedClient(script))
    else:
        async with ScriptedModelServer(provider, script) as server, server.client() as client:
            events, worker = await go(client)
            assert "ZeroDivisionError in ratio: check b" in server.requests[1].body.decode()
    (ready,) = [e for e in events if isinstance(e, ToolResultReady)]
    assert isinstance(ready.result.exception, ZeroDivisionError)
    assert isinstance(seen[0], ZeroDivisionError)
    (sent,) = worker.history[-2].tool_results
    assert sent.content == "ZeroDivisionError in ratio: check b"


async def test_a_paused_state_keeps_the_text_not_the_exception() -> None:
    @tool
    def pay() -> str:
        """Pay."""
        return "paid"

    async def hold(ctx: ToolCallContext) -> Pause | None:
        return Pause("approve") if ctx.call.name == "pay" and not ctx.resumed else None

    client = ScriptedClient(
        [
            ScriptedResponse(
                [ToolUsePart("c1", "ratio", {"a": 1, "b": 0}), ToolUsePart("c2", "pay", {})]
            )
        ]
    )
    worker = Worker(client, tools=[ratio, pay], early_tool_start=True)
    worker.add_before_tool_call_hook(hold)
    with anyio.fail_after(5):
        paused = await worker.run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    done = paused.state.pending[0].result
    assert done is not None and isinstance(done.exception, ZeroDivisionError)
    loaded = PauseState.from_json(paused.state.to_json())
    again = loaded.pending[0].result
    assert again is not None and again.exception is None
    assert again.content == done.content and again == done
    assert "Traceback" not in paused.state.to_json()
