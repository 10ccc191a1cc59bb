"""Review probes: input tokens count the same over every wire; a bad single step fails typed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel, Field

from llm_worker import Worker, tool
from llm_worker.messages import Message, Request, TextPart, ToolUsePart
from llm_worker.testing import (
    WIRE_PROVIDERS,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
    ScriptStepError,
    prompt_tokens,
)


@tool(effect="read_only")
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key} " * 20


def until_two_results(call: ScriptedRequest) -> ScriptedResponse:
    """Ask for a lookup until two results are in, then answer with text."""
    done = sum(len(m.tool_results) for m in call.request.messages)
    if done < 2:
        return ScriptedResponse([ToolUsePart("", "lookup", {"key": f"k{done}"})])
    return ScriptedResponse.text("Done.")


pytestmark = pytest.mark.anyio


class Line(BaseModel):
    item: str = Field(description="what was bought")
    amount: float


class Invoice(BaseModel):
    number: str
    lines: list[Line]
    note: str | None = None


INVOICE = Invoice(number="INV-1", lines=[Line(item="tea", amount=1.5)])


async def _counts(provider: str | None, worker_of: Any, step: Any, prompt: str) -> list[int]:
    if provider is None:
        result = await worker_of(ScriptedClient(step)).run(prompt)
    else:
        async with ScriptedModelServer(provider, step) as server, server.client() as client:
            result = await worker_of(client).run(prompt)
    return [r.usage.input_tokens or 0 for r in result.request_usage]


async def test_the_same_conversation_counts_the_same_over_every_wire() -> None:
    # Before: the count was of the neutral messages' JSON, ids, item ids, origins and wire
    # schema spelling included: Gemini [63, 199, 336], Responses [70, 219, 369], the others
    # [70, 203, 336] for one conversation.
    def tools(client: Any) -> Worker:
        return Worker(client, tools=[lookup], system="Be brief.")

    with anyio.fail_after(30):
        seen = {
            p: await _counts(p, tools, until_two_results, "Look two keys up.")
            for p in [None, *sorted(WIRE_PROVIDERS)]
        }
    assert len({tuple(c) for c in seen.values()}) == 1, seen
    assert seen[None][0] < seen[None][1] < seen[None][2]


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_structured_request_counts_the_same_over_every_wire(mode: str) -> None:
    answer = ScriptedResponse.output(INVOICE, tool="final_result" if mode == "tool" else None)

    def invoices(client: Any) -> Worker[Invoice]:
        return Worker(client, output_type=Invoice, output_mode=mode, system="Read it.")  # type: ignore[arg-type]

    with anyio.fail_after(30):
        seen = {p: await _counts(p, invoices, answer, "An invoice.") for p in WIRE_PROVIDERS}
    assert len(set(map(tuple, seen.values()))) == 1, seen
    # The schema's property names and descriptions count: more than the prompt alone.
    assert next(iter(seen.values()))[0] > prompt_tokens(Request([Message.user("An invoice.")]))


def test_wire_bookkeeping_does_not_count() -> None:
    plain = Request([Message("assistant", [TextPart("hello")])])
    tagged = Request([Message("assistant", [TextPart("hello", signature="s" * 400, item_id="i")])])
    assert prompt_tokens(plain) == prompt_tokens(tagged)


async def test_a_single_async_step_fails_typed_and_is_not_left_unawaited() -> None:
    async def step(call: ScriptedRequest) -> ScriptedResponse:
        return ScriptedResponse.text("never")

    with pytest.raises(ScriptStepError, match="async def"), anyio.fail_after(5):
        await Worker(ScriptedClient(step)).run("Go.")  # type: ignore[arg-type]


async def test_a_single_step_returning_a_dict_fails_typed_on_a_server() -> None:
    def step(call: ScriptedRequest) -> Any:
        return {"text": "not a response"}

    server = ScriptedModelServer("openai_responses", step)
    failed: list[Exception] = []

    async def play() -> None:
        async with server, server.client() as client:
            try:
                await Worker(client).run("Go.")
            except Exception as exc:  # the client's error for the 424 answer
                failed.append(exc)

    with anyio.fail_after(10), pytest.raises(ScriptStepError, match="returned dict"):
        await play()
    assert failed and "script" in str(failed[0])
