"""The Worker against hostile answers: oversized arguments, repeated call ids, cancelled effects."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from llm_worker import ConfigurationError, Message, Request, ToolUsePart, Worker, tool
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    Event,
    InputJsonDelta,
    StopReason,
    TextDelta,
    TextMetadata,
    ToolUseMetadata,
)
from llm_worker.hooks import ToolCallContext
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 10


def make_store() -> tuple[Any, list[int]]:
    seen: list[int] = []

    @tool(effect="side_effect")
    async def store(data: str) -> str:
        """Store some data."""
        seen.append(len(data))
        return f"stored {len(data)} characters"

    return store, seen


# -- tool-argument size cap ------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["scripted", "anthropic", "openai_chat"])
async def test_oversized_arguments_get_an_error_result_and_a_bounded_history(
    provider: str,
) -> None:
    store, seen = make_store()
    huge = "x" * 300_000
    script = [
        ScriptedResponse([ToolUsePart("c1", "store", {"data": huge})]),
        ScriptedResponse.text("Understood."),
    ]
    if provider == "scripted":
        client = ScriptedClient(script)
        result, worker = await _run(Worker(client, tools=[store], max_tool_arguments=100_000))
        sent = client.requests[1].messages
    else:
        async with ScriptedModelServer(provider, script) as server, server.client() as client:
            worker = Worker(client, tools=[store], max_tool_arguments=100_000)
            result, worker = await _run(worker)
            body = server.requests[1].body
            assert len(body) < 10_000  # the next request does not carry the 300 KB again
        sent = worker.history
    assert result.status is RunStatus.FINISHED
    assert seen == []  # the tool never ran
    answer = sent[-1] if sent[-1].role == "user" else sent[-2]
    (error,) = answer.tool_results
    assert error.is_error
    assert "300,0" in error.content and "100,000" in error.content
    assert "smaller" in error.content
    assert len(error.content) < 1_000
    (kept,) = [p for m in sent for p in m.tool_uses]
    assert kept.input == {}


async def _run(worker: Worker) -> tuple[Any, Worker]:
    with anyio.fail_after(TIMEOUT):
        return await worker.run("store it"), worker


async def test_arguments_at_the_cap_still_run_and_a_hook_may_supply_smaller_ones() -> None:
    store, seen = make_store()

    async def shrink(ctx: ToolCallContext) -> None:
        if ctx.call.error is not None:
            ctx.call.input = {"data": "short"}

    client = ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("c1", "store", {"data": "a" * 50}),
                    ToolUsePart("c2", "store", {"data": "b" * 500}),
                ]
            ),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[store], max_tool_arguments=len('{"data":""}') + 50)
    worker.add_before_tool_call_hook(shrink)
    result, _ = await _run(worker)
    assert result.status is RunStatus.FINISHED
    assert seen == [50, 5]


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_tool_arguments"):
        Worker(ScriptedClient([]), max_tool_arguments=0)


def assert_paired(history: list[Message]) -> None:
    for i, message in enumerate(history):
        if message.role == "assistant" and message.tool_uses:
            ids = [r.tool_use_id for r in history[i + 1].tool_results]
            assert ids == [c.id for c in message.tool_uses]


# -- one call id, one execution, one result --------------------------------------------------


class EventClient:
    """A hand-written client that streams the given events, unchecked.

    The provider clients refuse an answer that repeats a call id; a client of the
    application's own may not, so the Worker guards its batch too.
    """

    provider = "custom"
    model = "raw-events"

    def __init__(self, *answers: list[Event]) -> None:
        self.answers = list(answers)
        self.requests: list[Request] = []

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        self.requests.append(request)
        for event in self.answers.pop(0):
            yield event


def call_events(index: int, call_id: str, data: str) -> list[Event]:
    return [
        BlockStart(index, BlockType.TOOL_USE, ToolUseMetadata(call_id, "store")),
        BlockDelta(index, InputJsonDelta(f'{{"data": "{data}"}}')),
        BlockStop(index, BlockType.TOOL_USE),
    ]


def text_events(text: str) -> list[Event]:
    return [
        BlockStart(0, BlockType.TEXT, TextMetadata()),
        BlockDelta(0, TextDelta(text)),
        BlockStop(0, BlockType.TEXT, StopReason.END_TURN),
    ]


@pytest.mark.parametrize("early", [False, True])
async def test_a_call_id_repeated_in_one_answer_runs_once_and_is_answered_once(
    early: bool,
) -> None:
    store, seen = make_store()
    repeated = call_events(0, "c1", "first") + call_events(1, "c1", "again")
    client = EventClient(repeated + call_events(2, "c2", "other"), text_events("ok"))
    worker = Worker(client, tools=[store], early_tool_start=early)
    result, _ = await _run(worker)
    assert result.status is RunStatus.FINISHED
    assert seen == [5, 5]  # "first" and "other": the repeat never ran
    sent = client.requests[1].messages
    assert [c.id for c in sent[-2].tool_uses] == ["c1", "c2"]
    assert [r.tool_use_id for r in sent[-1].tool_results] == ["c1", "c2"]
    assert sent[-1].tool_results[0].content == "stored 5 characters"


async def test_a_loaded_history_with_a_repeated_call_id_is_sent_with_one_call_and_one_result() -> (
    None
):
    client = ScriptedClient([ScriptedResponse.text("ok")])
    history = [
        Message.user("go"),
        Message("assistant", [ToolUsePart("c1", "store", {}), ToolUsePart("c1", "store", {})]),
    ]
    worker = Worker(client, history=history)
    result, _ = await _run(worker)
    assert result.status is RunStatus.FINISHED
    sent = client.requests[0].messages
    assert [c.id for c in sent[1].tool_uses] == ["c1"]
    assert [r.tool_use_id for r in sent[2].tool_results] == ["c1"]
    assert_paired(sent)


# -- what the model reads about a call cut short ---------------------------------------------


def blocking_tools() -> tuple[list[Any], anyio.Event]:
    both = anyio.Event()
    started: list[str] = []

    async def block(name: str) -> str:
        started.append(name)
        if len(started) == 2:
            both.set()
        await anyio.sleep_forever()
        return "unreachable"

    @tool(effect="side_effect")
    async def send_email() -> str:
        """Send an email."""
        return await block("send_email")

    @tool(effect="read_only")
    async def read_inbox() -> str:
        """Read the inbox."""
        return await block("read_inbox")

    @tool(effect="side_effect", exclusive=True)
    async def wipe() -> str:
        """Runs alone, after the others."""
        return "wiped"

    return [send_email, read_inbox, wipe], both


@pytest.mark.parametrize("how", ["worker.cancel", "task"])
async def test_a_side_effecting_call_cut_short_may_have_taken_effect(how: str) -> None:
    tools, both = blocking_tools()
    client = ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("a", "send_email", {}),
                    ToolUsePart("b", "read_inbox", {}),
                    ToolUsePart("c", "wipe", {}),
                ]
            )
        ]
    )
    worker = Worker(client, tools=tools)
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:

            async def stop() -> None:
                await both.wait()
                if how == "worker.cancel":
                    worker.cancel()
                else:
                    group.cancel_scope.cancel()

            group.start_soon(stop)
            await worker.run("go")
    email, inbox, wipe = worker.history[-1].tool_results
    assert "while it ran" in email.content and "may already have taken effect" in email.content
    assert "not repeat it blindly" in email.content
    assert "while it ran" in inbox.content and "taken effect" not in inbox.content
    assert "never started" in wipe.content and "taken effect" not in wipe.content
