# pyright: reportUnnecessaryTypeIgnoreComment=true
"""The hooks' type safety, checked by pyright strict (CI runs it on tests/typing).

Each `# pyright: ignore[...]` marks a registration the type checker must reject — a hook that
can return a result its hook point does not allow; if pyright stops rejecting it, the ignore
becomes unnecessary and CI fails. The accepted hooks also run under pytest.
"""

from __future__ import annotations

import pytest

from llm_worker import TextBlockEvent, Worker
from llm_worker.hooks import (
    Abort,
    AbortContext,
    Cancel,
    Continue,
    ContinueWithMessages,
    Finish,
    MessageSendContext,
    Pause,
    Skip,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


async def send_ok(ctx: MessageSendContext) -> Continue | Cancel:
    return Continue()


async def send_skip(ctx: MessageSendContext) -> Skip:
    return Skip()


async def before_ok(ctx: ToolCallContext) -> Continue | Skip | Abort | Pause | None:
    return None


async def before_finish(ctx: ToolCallContext) -> Finish:
    return Finish()


async def after_ok(ctx: ToolResultContext) -> Abort | None:
    return None


async def after_pause(ctx: ToolResultContext) -> Pause:
    return Pause()


async def end_ok(ctx: TurnEndContext) -> Finish | ContinueWithMessages | Pause:
    return Finish()


async def end_skip(ctx: TurnEndContext) -> Skip:
    return Skip()


async def abort_ok(ctx: AbortContext) -> None:
    return None


def sync_hook(ctx: MessageSendContext) -> None:
    return None


def sync_before(ctx: ToolCallContext) -> Skip | None:
    return None


def sync_abort(ctx: AbortContext) -> None:
    return None


def sync_before_cancel(ctx: ToolCallContext) -> Cancel:
    return Cancel("no")


def sync_end_skip(ctx: TurnEndContext) -> Skip:
    return Skip()


def make_worker() -> Worker:
    return Worker(ScriptedClient([ScriptedResponse.text("ok")]))


def test_allowed_results_register() -> None:
    worker = make_worker()
    worker.add_on_message_send_hook(send_ok)
    worker.add_before_tool_call_hook(before_ok)
    worker.add_after_tool_call_hook(after_ok)
    worker.add_on_turn_end_hook(end_ok)
    worker.add_on_abort_hook(abort_ok)
    # Plain `def` hooks are hooks too.
    worker.add_on_message_send_hook(sync_hook)
    worker.add_before_tool_call_hook(sync_before)
    worker.add_on_abort_hook(sync_abort)


def test_results_a_point_does_not_allow_are_rejected() -> None:
    worker = make_worker()
    worker.add_on_message_send_hook(send_skip)  # pyright: ignore[reportArgumentType]
    worker.add_before_tool_call_hook(before_finish)  # pyright: ignore[reportArgumentType]
    worker.add_after_tool_call_hook(after_pause)  # pyright: ignore[reportArgumentType]
    worker.add_on_turn_end_hook(end_skip)  # pyright: ignore[reportArgumentType]
    # A context of the wrong point is rejected too, and so is a plain hook's wrong result.
    worker.add_on_turn_end_hook(send_ok)  # pyright: ignore[reportArgumentType]
    worker.add_before_tool_call_hook(sync_before_cancel)  # pyright: ignore[reportArgumentType]
    worker.add_on_turn_end_hook(sync_end_skip)  # pyright: ignore[reportArgumentType]


async def test_a_wrong_result_that_slips_past_the_checker_fails_at_run_time() -> None:
    from llm_worker import HookError

    worker = make_worker()
    worker.add_on_message_send_hook(send_skip)  # pyright: ignore[reportArgumentType]
    with pytest.raises(HookError, match="does not allow"):
        await worker.run("hi")


def on_text(event: TextBlockEvent) -> None:
    return None


def test_worker_event_registrations_are_typed_like_the_timeline() -> None:
    worker = make_worker()
    worker.on_text_block(on_text)
    worker.on_tool_use_block(on_text)  # pyright: ignore[reportArgumentType]
    worker.on_usage(on_text)  # pyright: ignore[reportArgumentType]
