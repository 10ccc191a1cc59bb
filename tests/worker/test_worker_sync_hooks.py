"""Plain `def` hooks: accepted at every hook point, called directly on the event loop's thread."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from llm_worker import Decision, HookError, Message, RunStatus, ToolUsePart, Worker, tool
from llm_worker.hooks import (
    AbortContext,
    Cancel,
    ContinueWithMessages,
    MessageSendContext,
    Pause,
    Skip,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
)
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


@tool
async def read_config() -> str:
    """Read the configuration."""
    return "password=hunter2"


@tool
async def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("a skipped call must not run")


def two_calls_then(*answers: str) -> ScriptedClient:
    calls = [ToolUsePart("c1", "read_config", {}), ToolUsePart("c2", "delete_file", {"path": "x"})]
    return ScriptedClient(
        [ScriptedResponse(list(calls)), *(ScriptedResponse.text(a) for a in answers)]
    )


async def test_sync_hooks_act_at_every_point_on_the_loop_thread() -> None:
    threads: set[int] = set()
    sent: list[int] = []

    def count(ctx: MessageSendContext) -> None:
        threads.add(threading.get_ident())
        sent.append(ctx.request_number)

    def no_deletes(ctx: ToolCallContext) -> Skip | None:
        threads.add(threading.get_ident())
        return Skip("deleting is off") if ctx.call.name == "delete_file" else None

    def mask(ctx: ToolResultContext) -> None:
        threads.add(threading.get_ident())
        ctx.result.content = ctx.result.content.replace("hunter2", "***")

    def insist_once(ctx: TurnEndContext) -> ContinueWithMessages | None:
        threads.add(threading.get_ident())
        if ctx.continuations == 0:
            return ContinueWithMessages([Message.user("Shorter, please.")])
        return None

    worker = Worker(two_calls_then("A long answer.", "Short."), tools=[read_config, delete_file])
    worker.add_on_message_send_hook(count)
    worker.add_before_tool_call_hook(no_deletes)
    worker.add_after_tool_call_hook(mask)
    worker.add_on_turn_end_hook(insist_once)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("go")
    assert result.text == "Short."
    assert sent == [1, 2, 3]
    config, deleted = worker.history[2].tool_results
    assert config.content == "password=***"
    assert deleted.is_error and "deleting is off" in deleted.content
    assert threads == {threading.get_ident()}  # called directly, never in a worker thread


async def test_a_sync_cancel_and_a_sync_on_abort_hook() -> None:
    aborted: list[str] = []

    def stop(ctx: MessageSendContext) -> Cancel:
        return Cancel("not now")

    def record(ctx: AbortContext) -> None:
        aborted.append(ctx.kind)

    worker = Worker(ScriptedClient([]))
    worker.add_on_message_send_hook(stop)
    worker.add_on_abort_hook(record)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("go")
    assert result.status is RunStatus.CANCELLED
    assert aborted == ["cancelled"]


async def test_a_raising_sync_hook_fails_the_run_naming_it_after_on_abort() -> None:
    aborted: list[str] = []

    def broken(ctx: ToolCallContext) -> None:
        raise ValueError("bad rule")

    async def record(ctx: AbortContext) -> None:
        aborted.append(ctx.kind)

    worker = Worker(two_calls_then(), tools=[read_config, delete_file])
    worker.add_before_tool_call_hook(broken)
    worker.add_on_abort_hook(record)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="broken") as info:
        await worker.run("go")
    assert "ValueError: bad rule" in str(info.value)
    assert aborted == ["failed"]


async def test_a_sync_hook_past_its_timeout_fails_the_run_once_it_returns() -> None:
    def slow(ctx: ToolCallContext) -> None:
        time.sleep(0.05)  # the hook's own (blocking) work, which no timeout can interrupt

    worker = Worker(two_calls_then(), tools=[read_config, delete_file])
    worker.add_before_tool_call_hook(slow, timeout=0.01)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="ran past its timeout"):
        await worker.run("go")

    quick = Worker(two_calls_then("ok"), tools=[read_config, delete_file])
    quick.add_before_tool_call_hook(lambda ctx: None, timeout=5)
    with anyio.fail_after(TIMEOUT):
        assert (await quick.run("go")).text == "ok"


async def test_an_object_with_plain_hook_methods_registers_them() -> None:
    class Policy:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def before_tool_call(self, ctx: ToolCallContext) -> Skip | None:
            self.seen.append(ctx.call.name)
            return Skip() if ctx.call.name == "delete_file" else None

        async def after_tool_call(self, ctx: ToolResultContext) -> None:
            self.seen.append(f"after {ctx.call.name}")

    policy = Policy()
    worker = Worker(two_calls_then("ok"), tools=[read_config, delete_file])
    worker.add_hooks(policy)
    with anyio.fail_after(TIMEOUT):
        await worker.run("go")
    assert policy.seen == ["read_config", "delete_file", "after read_config", "after delete_file"]


async def test_a_sync_pause_hook_and_resume_over_a_real_wire() -> None:
    def ask_first(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("ask a person")

    script = [
        ScriptedResponse([ToolUsePart("", "read_config", {})]),
        ScriptedResponse.text("Read it."),
    ]
    async with ScriptedModelServer("openai_responses", script) as server, server.client() as c:
        worker = Worker(c, tools=[read_config])
        worker.add_before_tool_call_hook(ask_first)
        with anyio.fail_after(TIMEOUT):
            paused = await worker.run("go")
            assert paused.status is RunStatus.PAUSED and paused.state is not None
            again = await worker.resume(paused.state)  # the hook now lets it through
            assert again.text == "Read it."
            assert b"password=hunter2" in server.requests[1].body
            denied = Worker(c, tools=[read_config])
            denied.add_before_tool_call_hook(ask_first)
            server.add(ScriptedResponse.text("Fine."))
            [pending] = paused.state.pending
            done = await denied.resume(paused.state, decisions={pending.call.id: Decision.deny()})
    assert done.text == "Fine."
