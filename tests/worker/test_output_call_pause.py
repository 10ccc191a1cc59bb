"""Tool output mode: the arguments the output tool accepted survive a pause at the turn end."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import Decision, PauseState, RunStatus, StopReason, Worker
from llm_worker.collectors import ToolCall
from llm_worker.errors import PauseStateError
from llm_worker.hooks import ContinueWithMessages, Pause, ToolCallContext, TurnEndContext
from llm_worker.messages import Message
from llm_worker.providers import LLMClient
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse
from llm_worker.worker._output import OutputMode

pytestmark = pytest.mark.anyio

PROVIDERS = sorted(WIRE_PROVIDERS)
TOOL = "final_result"


class Invoice(BaseModel):
    number: str
    total: float


def _upper(ctx: ToolCallContext) -> None:
    if ctx.call.name == TOOL:
        ctx.call.input = {**ctx.call.input, "number": str(ctx.call.input["number"]).upper()}


def _worker(client: LLMClient, *, pauses: int = 1) -> Worker[Invoice]:
    """A tool-mode Worker that upper-cases the number and pauses `pauses` times at turn end."""
    worker = Worker(client, output_type=Invoice, output_mode="tool")
    worker.add_before_tool_call_hook(_upper)
    seen: list[int] = []

    def pause(ctx: TurnEndContext) -> Pause | None:
        seen.append(1)
        return Pause("review") if len(seen) <= pauses else None

    worker.add_on_turn_end_hook(pause)
    return worker


def _continue_then_pause() -> Callable[[TurnEndContext], ContinueWithMessages | Pause | None]:
    """An on_turn_end hook: ask again once, then pause once, then accept."""
    turns: list[int] = []

    def hook(ctx: TurnEndContext) -> ContinueWithMessages | Pause | None:
        turns.append(1)
        if len(turns) == 1:
            return ContinueWithMessages([Message.user("Check the answer again.")])
        return Pause("review") if len(turns) == 2 else None

    return hook


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_two_turn_end_pauses_in_fresh_workers_keep_the_rewritten_output(
    provider: str,
) -> None:
    script = [ScriptedResponse.output({"number": "a-1", "total": 4}, tool=TOOL)]
    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        with anyio.fail_after(10):
            first = await _worker(client, pauses=1).run("Read it.")
            assert first.state is not None
            assert first.state.output_call is not None
            assert first.state.output_call.input == {"number": "A-1", "total": 4}
            second = await _worker(client, pauses=1).resume(
                PauseState.from_json(first.state.to_json())
            )
            assert second.status is RunStatus.PAUSED and second.state is not None
            third = await _worker(client, pauses=0).resume(
                PauseState.from_json(second.state.to_json())
            )
        await client.aclose()
    assert third.output == Invoice(number="A-1", total=4)
    assert len(server.requests) == 1
    # The history keeps the model's own arguments (replays and signatures depend on them).
    [call] = [c for m in third.messages for c in m.tool_uses] or [
        c for m in first.messages for c in m.tool_uses
    ]
    assert call.input == {"number": "a-1", "total": 4}


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
async def test_an_approval_with_edited_output_then_a_turn_end_pause_resumes_the_edit(
    provider: str,
) -> None:
    script = [ScriptedResponse.output({"number": "a-1", "total": 4}, tool=TOOL)]

    def ask(ctx: ToolCallContext) -> Pause | None:
        return Pause("check the answer") if not ctx.resumed else None

    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(ask)
        worker.add_on_turn_end_hook(lambda ctx: None if ctx.resumed else Pause("review"))
        with anyio.fail_after(10):
            asked = await worker.run("Read it.")
            assert asked.state is not None
            [pending] = asked.state.pending
            edited = Decision.approve(input={"number": "B-7", "total": 9})
            at_end = await worker.resume(
                PauseState.from_json(asked.state.to_json()), decisions={pending.call.id: edited}
            )
            assert at_end.state is not None and at_end.state.at == "on_turn_end"
            fresh = Worker(client, output_type=Invoice, output_mode="tool")
            result = await fresh.resume(PauseState.from_json(at_end.state.to_json()))
        await client.aclose()
    assert result.output == Invoice(number="B-7", total=9)


async def test_a_continued_turn_pauses_with_the_new_call_not_the_old_one() -> None:
    script = [
        ScriptedResponse.output({"number": "a-1", "total": 4}, tool=TOOL),
        ScriptedResponse.output({"number": "a-2", "total": 5}, tool=TOOL),
    ]

    async with ScriptedModelServer("openai_responses", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(_upper)
        worker.add_on_turn_end_hook(_continue_then_pause())
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
            assert paused.state is not None and paused.state.output_call is not None
            result = await worker.resume(PauseState.from_json(paused.state.to_json()))
        await client.aclose()
    assert result.output == Invoice(number="A-2", total=5)


async def test_a_refusal_after_an_accepted_call_pauses_without_the_old_call() -> None:
    script = [
        ScriptedResponse.output({"number": "a-1", "total": 4}, tool=TOOL),
        ScriptedResponse.text("I won't.", stop_reason=StopReason.REFUSAL),
    ]

    async with ScriptedModelServer("anthropic", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        worker.add_on_turn_end_hook(_continue_then_pause())
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
        assert paused.state is not None
        assert paused.state.output_call is None  # the old call is not this answer's
        state = PauseState.from_json(paused.state.to_json())  # and the state loads
        with anyio.fail_after(10):
            result = await Worker(client, output_type=Invoice, output_mode="tool").resume(state)
        await client.aclose()
    assert result.refusal == "I won't." and result.output_or_none is None


async def test_a_cancel_while_the_resumed_turn_end_waits_leaves_a_usable_worker() -> None:
    script = [
        ScriptedResponse.output({"number": "a-1", "total": 4}, tool=TOOL),
        ScriptedResponse.output({"number": "c-3", "total": 1}, tool=TOOL),
    ]
    entered, calls = anyio.Event(), list[int]()
    cancelled = None

    async def slow_review(ctx: TurnEndContext) -> Pause | None:
        calls.append(1)
        if len(calls) == 1:
            return Pause("review")
        if len(calls) == 2:
            entered.set()
            await anyio.sleep_forever()
        return None

    async with ScriptedModelServer("openai_chat", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(_upper)
        worker.add_on_turn_end_hook(slow_review)
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
            assert paused.state is not None
            state = PauseState.from_json(paused.state.to_json())
            async with anyio.create_task_group() as group:

                async def cancel_when_waiting() -> None:
                    await entered.wait()
                    worker.cancel()

                group.start_soon(cancel_when_waiting)
                cancelled = await worker.resume(state)
            after = await worker.run("The next one.")
        await client.aclose()
    assert cancelled is not None and cancelled.status is RunStatus.CANCELLED
    assert cancelled.output_or_none is None
    assert after.output == Invoice(number="C-3", total=1)


def _state_at_turn_end(call: ToolCall, *, at: str = "on_turn_end") -> dict[str, object]:
    from llm_worker.messages import ToolResultPart, ToolUsePart

    history = [
        Message.user("Read it."),
        Message("assistant", [ToolUsePart("c1", TOOL, {"number": "a-1", "total": 4})]),
        Message("user", [ToolResultPart("c1", "The final answer was accepted.", name=TOOL)]),
    ]
    data = PauseState(history, at="on_turn_end", output_call=call).to_dict()
    data["at"] = at
    return data


@pytest.mark.parametrize(
    ("call", "at", "problem"),
    [
        (ToolCall("c1", TOOL, {"number": "A-1", "total": 4}), "before_tool_call", "turn end"),
        (ToolCall("c9", TOOL, {"number": "A-1", "total": 4}), "on_turn_end", "c9"),
        (ToolCall("c1", "other", {"number": "A-1", "total": 4}), "on_turn_end", "other"),
    ],
)
def test_an_output_call_that_does_not_fit_the_history_is_refused(
    call: ToolCall, at: str, problem: str
) -> None:
    with pytest.raises(PauseStateError, match=problem):
        PauseState.from_dict(_state_at_turn_end(call, at=at))


def test_a_damaged_output_call_is_refused() -> None:
    data = _state_at_turn_end(ToolCall("c1", TOOL, {}))
    data["output_call"] = {"name": TOOL}
    with pytest.raises(PauseStateError, match="output call"):
        PauseState.from_dict(data)


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_worker_without_that_output_tool_refuses_the_state(mode: OutputMode) -> None:
    state = PauseState.from_dict(_state_at_turn_end(ToolCall("c1", TOOL, {"number": "A"})))
    async with ScriptedModelServer("anthropic", []) as server:
        client = server.client()
        other = Worker(client, output_type=Invoice, output_mode=mode, output_tool_name="answer")
        with anyio.fail_after(10), pytest.raises(PauseStateError, match=TOOL):
            await other.resume(state)
        await client.aclose()
    assert other.history == []
    assert server.requests == []
