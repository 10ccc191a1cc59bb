"""Review probes: structured output crossed with pause/resume, tools, hostile answers."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from pydantic import BaseModel

from llm_worker import (
    Decision,
    OutputValidationError,
    PauseState,
    RunStatus,
    StopReason,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext, TurnEndContext
from llm_worker.messages import ToolUsePart
from llm_worker.testing import WIRE_PROVIDERS, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

PROVIDERS = sorted(WIRE_PROVIDERS)


class Invoice(BaseModel):
    number: str
    total: float


class Node(BaseModel):
    """A recursive type: its schema refers to itself."""

    name: str
    child: Node | None = None


def _pause_once(ctx: TurnEndContext) -> Pause | None:
    return None if ctx.resumed else Pause("review the answer")


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses", "anthropic"])
async def test_a_refusal_paused_at_turn_end_is_still_a_refusal_in_a_fresh_worker(
    provider: str,
) -> None:
    refusal = ScriptedResponse.text("I can't help with that.", stop_reason=StopReason.REFUSAL)
    async with ScriptedModelServer(provider, [refusal]) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice)
        worker.add_on_turn_end_hook(_pause_once)
        with anyio.fail_after(10):
            paused = await worker.run("Something forbidden.")
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        fresh = Worker(client, output_type=Invoice)
        fresh.add_on_turn_end_hook(_pause_once)
        with anyio.fail_after(10):
            result = await fresh.resume(PauseState.from_json(paused.state.to_json()))
        await client.aclose()
    assert result.status is RunStatus.FINISHED
    assert result.refusal is not None
    assert result.output_or_none is None
    assert result.stop_reason is StopReason.REFUSAL
    assert len(server.requests) == 1  # no validation retry of the refusal's words


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_valid_answer_paused_at_turn_end_resumes_in_a_fresh_worker(provider: str) -> None:
    answer = ScriptedResponse.output(Invoice(number="A-1", total=2))
    async with ScriptedModelServer(provider, [answer]) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice)
        worker.add_on_turn_end_hook(_pause_once)
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
        assert paused.state is not None
        fresh = Worker(client, output_type=Invoice)
        fresh.add_on_turn_end_hook(_pause_once)
        with anyio.fail_after(10):
            result = await fresh.resume(PauseState.from_json(paused.state.to_json()))
        await client.aclose()
    assert result.output == Invoice(number="A-1", total=2)
    assert result.stop_reason is StopReason.END_TURN
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_mode_output_call_paused_for_approval_resumes_in_a_fresh_worker(
    provider: str,
) -> None:
    @tool
    async def lookup(number: str) -> str:
        """Look an invoice up."""
        return f"{number}: 4 euros"

    script = [
        ScriptedResponse([ToolUsePart("", "lookup", {"number": "A-1"})]),
        ScriptedResponse.output(Invoice(number="A-1", total=4), tool="final_result"),
    ]

    def ask(ctx: ToolCallContext) -> Pause | None:
        return Pause("approve the answer") if ctx.call.name == "final_result" else None

    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        worker = Worker(client, tools=[lookup], output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(ask)
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        fresh = Worker(client, tools=[lookup], output_type=Invoice, output_mode="tool")
        from llm_worker import Decision

        [pending] = paused.state.pending
        with anyio.fail_after(10):
            result = await fresh.resume(
                PauseState.from_json(paused.state.to_json()),
                decisions={pending.call.id: Decision.approve()},
            )
        await client.aclose()
    assert result.status is RunStatus.FINISHED
    assert result.output == Invoice(number="A-1", total=4)
    assert len(server.requests) == 2


def _nested(depth: int) -> str:
    return '{"name": "n", "child": ' * depth + '{"name": "leaf"}' + "}" * depth


@pytest.mark.parametrize("output_type", [Node, Node.model_json_schema()])
async def test_a_deeply_nested_answer_is_a_typed_error_not_a_crash(output_type: Any) -> None:
    deep = ScriptedResponse.text(_nested(900))
    async with ScriptedModelServer("openai_chat", [deep, deep]) as server:
        client = server.client()
        worker = Worker(client, output_type=output_type)
        with anyio.fail_after(20), pytest.raises(OutputValidationError) as caught:
            await worker.run("Build a tree.")
        await client.aclose()
    assert caught.value.attempts == 2
    feedback = orjson.dumps(server.requests[1].json()).decode()
    assert "does not match the required output" in feedback
    assert len(worker.history[2].text) < 2_000  # the problems, not the answer, go back


@pytest.mark.parametrize("provider", ["openai_chat", "gemini"])
async def test_tool_mode_output_is_the_arguments_a_hook_rewrote(provider: str) -> None:
    # A before_tool_call hook may rewrite a call's arguments (redact, normalise): for the
    # output tool, the rewritten arguments are what was checked and accepted, so the output.
    script = [ScriptedResponse.output({"number": " a-1 ", "total": "4"}, tool="final_result")]

    def normalise(ctx: ToolCallContext) -> None:
        if ctx.call.name == "final_result":
            ctx.call.input = {"number": "A-1", "total": 4}

    async with ScriptedModelServer(provider, script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool", output_retries=0)
        worker.add_before_tool_call_hook(normalise)
        with anyio.fail_after(10):
            result = await worker.run("Read it.")
        await client.aclose()
    assert result.output == Invoice(number="A-1", total=4)


async def test_tool_mode_output_edited_on_approval_is_the_edited_answer() -> None:
    script = [ScriptedResponse.output(Invoice(number="A-1", total=4), tool="final_result")]

    def ask(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("a person checks the answer")

    async with ScriptedModelServer("anthropic", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(ask)
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
        assert paused.state is not None
        [pending] = paused.state.pending
        fresh = Worker(client, output_type=Invoice, output_mode="tool")
        fresh.add_before_tool_call_hook(ask)
        edited = Decision.approve(input={"number": "A-1", "total": 5})
        with anyio.fail_after(10):
            result = await fresh.resume(
                PauseState.from_json(paused.state.to_json()), decisions={pending.call.id: edited}
            )
        await client.aclose()
    assert result.output == Invoice(number="A-1", total=5)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "answer",
    [
        "",  # an empty answer
        "null",  # no object at all
        '["a", 1]',  # an array for an object
        '{"number": 1, "total": true, "extra": {"deep": [1, 2, 3]}}',  # wrong types
        '{"number": "\\ud800", "total": 1}',  # a lone surrogate
        '{"number": "A-1", "total": 1e999}',  # a number out of range
        "{" * 5000,  # unfinished, deep
    ],
)
async def test_hostile_answers_are_sent_back_then_a_typed_error(answer: str) -> None:
    script = [ScriptedResponse.text(answer), ScriptedResponse.text(answer)]
    async with ScriptedModelServer("anthropic", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice)
        with anyio.fail_after(20), pytest.raises(OutputValidationError) as caught:
            await worker.run("Read it.")
        await client.aclose()
    assert caught.value.attempts == 2
    assert caught.value.errors


async def test_an_answer_with_many_errors_sends_back_a_bounded_message() -> None:
    rows = orjson.dumps({"result": [{"number": i, "total": "x"} for i in range(20_000)]}).decode()
    script = [ScriptedResponse.text(rows, chunk_size=4096)] * 2
    async with ScriptedModelServer("openai_chat", script) as server:
        client = server.client()
        worker = Worker(client, output_type=list[Invoice])
        with anyio.fail_after(30), pytest.raises(OutputValidationError) as caught:
            await worker.run("Read them.")
        await client.aclose()
    assert len(worker.history[2].text) < 4_000
    assert len(str(caught.value)) < 2_000


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_run_cancelled_after_a_partial_output_leaves_a_usable_worker(
    provider: str,
) -> None:
    from llm_worker import OutputPartial

    slow = ScriptedResponse.output(
        [Invoice(number=f"A-{i}", total=i) for i in range(200)], chunk_size=8, delay=0.001
    )
    again = ScriptedResponse.output([Invoice(number="B", total=1)])
    async with ScriptedModelServer(provider, [slow, again]) as server:
        client = server.client()
        worker = Worker(client, output_type=list[Invoice])
        with anyio.fail_after(20):
            async with worker.stream("Read them.") as stream:
                async for event in stream:
                    if isinstance(event, OutputPartial):
                        worker.cancel()
                result = stream.result
            assert result is not None
            assert result.status is RunStatus.CANCELLED
            assert result.output_or_none is None
            second = await worker.run("Just one.")
        await client.aclose()
    assert second.output == [Invoice(number="B", total=1)]


@tool(requires_approval=True)
async def send(to: str) -> str:
    """Send the invoice."""
    return f"sent to {to}"


async def test_output_retries_bound_the_whole_run_across_a_pause() -> None:
    # One invalid answer before the pause, one after: with output_retries=1 that is the end,
    # also in a fresh Worker resumed from the state's JSON.
    script = [
        ScriptedResponse.text('{"number": 1}'),
        ScriptedResponse([ToolUsePart("", "send", {"to": "bob"})]),
        ScriptedResponse.text('{"number": 2}'),
    ]
    async with ScriptedModelServer("openai_responses", script) as server:
        client = server.client()
        worker = Worker(client, tools=[send], output_type=Invoice, output_retries=1)
        with anyio.fail_after(10):
            paused = await worker.run("Send it, then give the invoice.")
        assert paused.state is not None
        [pending] = paused.state.pending
        fresh = Worker(client, tools=[send], output_type=Invoice, output_retries=1)
        with anyio.fail_after(10), pytest.raises(OutputValidationError) as caught:
            await fresh.resume(
                PauseState.from_json(paused.state.to_json()),
                decisions={pending.call.id: Decision.approve()},
            )
        await client.aclose()
    assert caught.value.attempts == 2


async def test_tool_mode_rewritten_output_survives_a_turn_end_pause() -> None:
    script = [ScriptedResponse.output({"number": "a-1", "total": 4}, tool="final_result")]

    def normalise(ctx: ToolCallContext) -> None:
        if ctx.call.name == "final_result":
            ctx.call.input = {"number": "A-1", "total": 4}

    async with ScriptedModelServer("anthropic", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(normalise)
        worker.add_on_turn_end_hook(_pause_once)
        with anyio.fail_after(10):
            paused = await worker.run("Read it.")
        assert paused.state is not None
        fresh = Worker(client, output_type=Invoice, output_mode="tool")
        fresh.add_on_turn_end_hook(_pause_once)
        with anyio.fail_after(10):
            result = await fresh.resume(PauseState.from_json(paused.state.to_json()))
        await client.aclose()
    assert result.output == Invoice(number="A-1", total=4)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_aborting_neighbour_hook_ends_the_run_and_the_next_run_finishes(
    provider: str,
) -> None:
    from llm_worker import Aborted
    from llm_worker.hooks import Abort

    @tool
    async def lookup(number: str) -> str:
        """Look an invoice up."""
        return f"{number}: 4 euros"

    both = ScriptedResponse(
        [
            ToolUsePart("", "lookup", {"number": "A-1"}),
            ToolUsePart("", "final_result", {"number": "A-1", "total": 4}),
        ]
    )
    again = ScriptedResponse.output(Invoice(number="A-2", total=1), tool="final_result")

    def stop(ctx: ToolCallContext) -> Abort | None:
        return Abort("lookups are off") if ctx.call.name == "lookup" else None

    async with ScriptedModelServer(provider, [both, again]) as server:
        client = server.client()
        worker = Worker(client, tools=[lookup], output_type=Invoice, output_mode="tool")
        worker.add_before_tool_call_hook(stop)
        with anyio.fail_after(10), pytest.raises(Aborted):
            await worker.run("Read it.")
        with anyio.fail_after(10):
            result = await worker.run("Read the next one.")
        await client.aclose()
    assert result.output == Invoice(number="A-2", total=1)
