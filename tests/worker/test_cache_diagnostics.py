"""Cache diagnostics: where a request parts from the previous one, and the cache's hit rate.

A `CacheMiss` names the place (tools / system / message, part, character offset) with hashes;
the INFO record on `llm_worker` carries no content (docs/guarantees.md: content stays out of
logs), only the event itself shows the differing characters.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from llm_worker import Message, TextPart, ToolUsePart, UsageEvent, Worker, tool
from llm_worker.hooks import MessageSendContext
from llm_worker.messages import ToolSpec
from llm_worker.state import CacheMiss, RunCompleted
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from support.e2e import PROVIDERS

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=100, output_tokens=5, cache_read_input_tokens=80)
PREFIX = "You are a careful assistant. The time is "


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}"


def looping(turns: int, usage: UsageEvent = USAGE) -> Any:
    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= turns - 1:
            return ScriptedResponse([TextPart("done")], usage=usage)
        return ScriptedResponse([ToolUsePart("", "read", {"n": request.index})], usage=usage)

    return step


def timestamped(ctx: MessageSendContext) -> None:
    """A hook that puts the time into the system prompt: every request misses the cache."""
    ctx.request.system = f"{PREFIX}12:00:{ctx.request_number:02d}. Be brief."


async def test_a_timestamp_in_the_system_prompt_is_named(caplog: pytest.LogCaptureFixture) -> None:
    worker = Worker(ScriptedClient(looping(4)), tools=[read], system="Be brief.")
    worker.add_on_message_send_hook(timestamped)
    events: list[Any] = []
    with caplog.at_level(logging.INFO, logger="llm_worker"), anyio.fail_after(10):
        async with worker.stream("go") as stream:
            events = [e async for e in stream]
    misses = [e for e in events if isinstance(e, CacheMiss)]
    result = next(e for e in events if isinstance(e, RunCompleted)).result
    assert misses == result.cache_misses
    assert [m.request for m in misses] == [2, 3, 4]
    miss = misses[0]
    assert (miss.where, miss.index, miss.part) == ("system", None, None)
    assert miss.offset == len(PREFIX) + len("12:00:0")
    assert (miss.before, miss.after) == ("1. Be brief.", "2. Be brief.")
    assert miss.before_hash != miss.after_hash
    records = [r for r in caplog.records if r.name == "llm_worker" and "cache miss" in r.message]
    assert len(records) == 3 and all(r.levelno == logging.INFO for r in records)
    logged = records[0].getMessage()
    assert "system" in logged and f"character {miss.offset}" in logged
    assert miss.before_hash in logged
    for record in records:  # no content: neither the prompt nor the differing characters
        text = record.getMessage() + repr(record.args)
        assert "careful" not in text and "Be brief" not in text and "12:00" not in text
    assert "Be brief" not in repr(miss) and "Be brief" not in str(miss)


async def test_a_stable_conversation_has_no_miss_and_its_hit_rate() -> None:
    worker = Worker(ScriptedClient(looping(30)), tools=[read], system="Be brief.", max_requests=30)
    result = await worker.run("go")
    assert result.cache_misses == []
    assert result.cache_hit_rate == pytest.approx(0.8)
    assert [r.cache_read_tokens for r in result.request_usage] == [80] * 30
    assert result.request_usage[0].cache_write_tokens == 0
    # Across runs of one conversation too: the next run's first request starts with the last.
    worker2 = Worker(
        ScriptedClient(lambda r: ScriptedResponse.text("ok", usage=USAGE)), system="Be brief."
    )
    for n in range(3):
        again = await worker2.run(f"question {n}")
        assert again.cache_misses == []


async def test_an_edited_old_message_is_named_by_index_part_and_offset() -> None:
    worker = Worker(ScriptedClient(looping(6)), tools=[read])

    def redact(ctx: MessageSendContext) -> None:
        if ctx.request_number >= 4:  # from the 4th request on, the first question is edited
            ctx.messages[0] = Message("user", [TextPart("go, and be quick")])

    worker.add_on_message_send_hook(redact)
    result = await worker.run("go")
    assert len(result.cache_misses) == 1  # then the edit is stable: the prefix holds again
    miss = result.cache_misses[0]
    assert (miss.request, miss.where, miss.index, miss.part, miss.offset) == (
        4,
        "messages",
        0,
        0,
        2,
    )
    assert (miss.before, miss.after) == ("", ", and be quick")


async def test_a_reordered_tool_is_named() -> None:
    worker = Worker(ScriptedClient(looping(3)), tools=[read])

    def extra(ctx: MessageSendContext) -> None:
        if ctx.request_number == 2:
            spec = ToolSpec("alpha", "First.", {"type": "object", "properties": {}})
            ctx.request.tools = [spec, *ctx.request.tools]

    worker.add_on_message_send_hook(extra)
    result = await worker.run("go")
    where = [(m.request, m.where, m.index) for m in result.cache_misses]
    assert where == [(2, "tools", 0), (3, "tools", 0)]
    assert result.cache_misses[0].offset == 0 and result.cache_misses[0].after.startswith("alpha")


async def test_prompt_cache_false_reports_nothing() -> None:
    worker = Worker(ScriptedClient(looping(3)), tools=[read], prompt_cache=False)
    worker.add_on_message_send_hook(timestamped)
    client = worker.client
    result = await worker.run("go")
    assert result.cache_misses == []
    assert isinstance(client, ScriptedClient)
    assert all(r.prompt_cache is None for r in client.requests)


async def test_a_resumed_run_in_a_fresh_worker_starts_without_a_previous_request() -> None:
    from llm_worker import PauseState, RunStatus
    from llm_worker.hooks import Pause, ToolCallContext

    def pause_once(ctx: ToolCallContext) -> Pause | None:
        return Pause("check") if ctx.call.input["n"] == 0 and not ctx.resumed else None

    client = ScriptedClient(looping(3))
    first = Worker(client, tools=[read], system="Be brief.")
    first.add_before_tool_call_hook(pause_once)
    paused = await first.run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    second = Worker(client, tools=[read], system="Be brief.")
    second.add_before_tool_call_hook(pause_once)
    done = await second.resume(PauseState.from_json(paused.state.to_json()))
    assert done.status is RunStatus.FINISHED and done.cache_misses == []
    keys = {r.prompt_cache for r in client.requests}
    assert len(keys) == 1  # the same conversation key after the resume


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cache_reads_and_misses_over_each_wire(provider: str) -> None:
    usage = UsageEvent(input_tokens=100, output_tokens=5, cache_read_input_tokens=60)
    async with ScriptedModelServer(provider, looping(3, usage), model="m") as s:  # type: ignore[call-overload]
        worker = Worker(s.client(), tools=[read], system="Be brief.")
        worker.add_on_message_send_hook(timestamped)
        with anyio.fail_after(10):
            result = await worker.run("go")
    assert [r.cache_read_tokens for r in result.request_usage] == [60, 60, 60]
    assert result.cache_hit_rate == pytest.approx(0.6)
    assert [(m.request, m.where) for m in result.cache_misses] == [(2, "system"), (3, "system")]


async def test_a_sub_agents_miss_reaches_the_parents_stream_with_its_path() -> None:
    child = Worker(ScriptedClient(looping(3)), tools=[read], system="Be brief.")
    child.add_on_message_send_hook(timestamped)
    parent = Worker(
        ScriptedClient(
            [
                ScriptedResponse([ToolUsePart("", "helper", {"input": "go"})], usage=USAGE),
                ScriptedResponse.text("ok", usage=USAGE),
            ]
        ),
        tools=[child.as_tool(name="helper", description="Reads pages.")],
    )
    with anyio.fail_after(10):
        async with parent.stream("go") as stream:
            events = [e async for e in stream]
    misses = [e for e in events if isinstance(e, CacheMiss)]
    assert [(m.request, m.where) for m in misses] == [(2, "system"), (3, "system")]
    assert {m.path for m in misses} == {("call_0",)}  # the sub-agent call they came through
