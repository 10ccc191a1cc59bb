"""Review probes of prompt caching over the wires (issue 32, item 5)."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from llm_worker import RunStatus, TextPart, ToolUsePart, UsageEvent, Worker, tool
from llm_worker.messages import Part
from llm_worker.providers._anthropic_cache import count_breakpoints
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse
from support.wire_bodies import assert_valid

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=50, output_tokens=5)


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}"


def marked_blocks(body: dict[str, Any]) -> list[int]:
    """The positions (counted over all message blocks) of the messages' breakpoints."""
    found: list[int] = []
    position = 0
    for message in body["messages"]:
        for block in message["content"]:
            if "cache_control" in block:
                found.append(position)
            position += 1
    return found


def total_blocks(body: dict[str, Any]) -> int:
    return sum(len(m["content"]) for m in body["messages"])


async def test_a_wide_batch_of_calls_keeps_the_previous_end_within_the_lookback() -> None:
    # 12 parallel calls a turn: 12 tool_use + 12 tool_result blocks, more than the 20 blocks
    # Anthropic looks back from a breakpoint. With the end breakpoint alone, the previous
    # request's entry is out of reach and every turn re-reads the whole conversation uncached.
    turns, wide = 6, 12

    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= turns - 1:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        calls: list[Part] = [
            ToolUsePart("", "read", {"n": request.index * wide + i}) for i in range(wide)
        ]
        return ScriptedResponse(calls, usage=USAGE)

    async with ScriptedModelServer("anthropic", step, model="claude-sonnet-4-5") as s:
        worker = Worker(s.client(), tools=[read], system="You read.", max_requests=turns)
        with anyio.fail_after(30):
            result = await worker.run("read")
        bodies = [r.json() for r in s.requests]
    assert result.status is RunStatus.FINISHED and len(bodies) == turns
    for before, after in itertools.pairwise(bodies):
        previous_end = marked_blocks(before)[-1]
        # Some breakpoint of the new request reaches back to the previous one's end.
        assert any(0 <= mark - previous_end <= 20 for mark in marked_blocks(after)), (
            marked_blocks(before),
            marked_blocks(after),
            total_blocks(after),
        )
    assert all(len(marked_blocks(b)) + 1 <= 4 for b in bodies)
    assert_valid("anthropic", bodies[-1])


@pytest.mark.parametrize(
    "client_options",
    [{"prompt_cache": ("system", "tools")}, {"prompt_cache": ("system", "tools", "messages")}],
)
async def test_a_wide_batch_with_the_clients_own_breakpoints_stays_within_four(
    client_options: dict[str, Any],
) -> None:
    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= 3:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        calls: list[Part] = [
            ToolUsePart("", "read", {"n": request.index * 15 + i}) for i in range(15)
        ]
        return ScriptedResponse(calls, usage=USAGE)

    async with ScriptedModelServer("anthropic", step, model="claude-sonnet-4-5") as s:
        worker = Worker(s.client(**client_options), tools=[read], system="You read.")
        with anyio.fail_after(30):
            result = await worker.run("read")
        bodies = [r.json() for r in s.requests]
    assert result.status is RunStatus.FINISHED and len(bodies) == 4
    assert all(count_breakpoints(b) <= 4 for b in bodies), [count_breakpoints(b) for b in bodies]
    # With two of the client's own, the end and the previous end fill the four.
    if len(client_options["prompt_cache"]) == 2:
        assert [count_breakpoints(b) for b in bodies[1:]] == [4, 4, 4]
