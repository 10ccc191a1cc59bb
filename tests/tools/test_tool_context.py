"""`ToolContext`: a tool's view of its call, never shown to the model."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from llm_worker import ConfigurationError, ToolContext, ToolProgress, Worker, tool
from llm_worker.blobs import MemoryBlobStore
from llm_worker.collectors import ToolCall
from llm_worker.events import UsageEvent
from llm_worker.messages import ToolUsePart
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools import current_tool_context, execute_call

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0


def test_the_context_parameter_is_left_out_of_the_schema() -> None:
    @tool
    def book(amount: int, ctx: ToolContext) -> str:
        """Book a payment."""
        return f"{amount} {ctx.call_id}"

    @tool
    def maybe(ctx: ToolContext | None = None) -> str:
        """Runs inside and outside a Worker."""
        return "ok" if ctx is None else ctx.tool_name

    assert book.input_schema["properties"].keys() == {"amount"}
    assert book.input_schema["required"] == ["amount"]
    assert maybe.input_schema.get("properties", {}) == {}


def test_two_context_parameters_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="one ToolContext"):

        @tool
        def twice(a: ToolContext, b: ToolContext) -> str:  # pyright: ignore[reportUnusedFunction]
            """Bad."""
            return ""


async def test_the_model_cannot_pass_the_context_itself() -> None:
    @tool
    def book(amount: int, ctx: ToolContext) -> str:
        """Book a payment."""
        return ctx.call_id

    call = ToolCall("c9", "book", {"amount": 1, "ctx": {"call_id": "forged"}})
    result = await execute_call(book, call)
    assert result.is_error and "ctx" in result.content
    good = await execute_call(book, ToolCall("c9", "book", {"amount": 1}))
    assert good.content == "c9"


async def test_a_tool_run_outside_a_worker_gets_a_context_of_its_call() -> None:
    @tool
    async def who(ctx: ToolContext) -> str:
        """Who am I."""
        return f"{ctx.tool_name}/{ctx.call_id}/{ctx.cancelled}"

    assert (await execute_call(who, ToolCall("c1", "who", {}))).content == "who/c1/False"
    assert await who.execute("{}") == "who//False"  # no call at all: still a context


async def test_the_worker_tells_each_call_its_id_usage_store_and_progress() -> None:
    seen: list[dict[str, Any]] = []
    store = MemoryBlobStore()

    @tool(effect="read_only")
    def sync_tool(city: str, ctx: ToolContext) -> str:
        """Sync, in a thread."""
        ctx.report_progress(1, 2, "half")
        seen.append({"id": ctx.call_id, "name": ctx.tool_name, "thread": True, "usage": ctx.usage})
        return city

    @tool(effect="read_only")
    async def async_tool(ctx: ToolContext) -> str:
        """Async, reporting from a task of its own."""
        async with anyio.create_task_group() as group:
            group.start_soon(_report_later, ctx)
        assert current_tool_context() is not None
        seen.append({"id": ctx.call_id, "store": ctx.blob_store, "requests": ctx.requests})
        return "ok"

    script = [
        ScriptedResponse(
            [
                ToolUsePart("call_a", "sync_tool", {"city": "Kyoto"}),
                ToolUsePart("call_b", "async_tool", {}),
            ],
            usage=UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15),
        ),
        ScriptedResponse.text("done"),
    ]
    worker = Worker(ScriptedClient(script), tools=[sync_tool, async_tool], blob_store=store)
    progress: list[ToolProgress] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as stream:
            async for event in stream:
                if isinstance(event, ToolProgress):
                    progress.append(event)
    by_id = {s["id"]: s for s in seen}
    assert by_id["call_a"]["name"] == "sync_tool"
    assert by_id["call_a"]["usage"].input_tokens == 10  # the run's usage so far
    assert by_id["call_b"]["store"] is store and by_id["call_b"]["requests"] == 1
    assert sorted((p.tool_use_id, p.message) for p in progress) == [
        ("call_a", "half"),
        ("call_b", "from a task"),
    ]


async def _report_later(ctx: ToolContext) -> None:
    await anyio.lowlevel.checkpoint()
    ctx.report_progress(1, None, "from a task")


class Bank:
    """A payment service that dedupes by idempotency key, as real ones do."""

    def __init__(self) -> None:
        self.booked: dict[str, int] = {}

    @tool(requires_approval=True)
    def pay(self, amount: int, ctx: ToolContext) -> str:
        """Book a payment."""
        self.booked.setdefault(ctx.call_id, amount)
        return f"booked under {ctx.call_id}"


async def test_resuming_one_state_twice_books_the_payment_once() -> None:
    from llm_worker import Decision, PauseState

    bank = Bank()
    first = Worker(
        ScriptedClient([ScriptedResponse([ToolUsePart("pay_1", "pay", {"amount": 30})])]),
        tools=[bank.pay],
    )
    with anyio.fail_after(TIMEOUT):
        paused = await first.run("pay the invoice")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    saved = paused.state.to_json()
    for _ in range(2):  # two processes resume the same saved state
        worker = Worker(ScriptedClient([ScriptedResponse.text("paid")]), tools=[bank.pay])
        with anyio.fail_after(TIMEOUT):
            done = await worker.resume(
                PauseState.from_json(saved), decisions={"pay_1": Decision.approve()}
            )
        assert done.text == "paid"
    assert bank.booked == {"pay_1": 30}


async def test_a_sync_tool_sees_its_cancellation_and_stops() -> None:
    started = threading.Event()
    stopped = threading.Event()

    @tool(effect="read_only")
    def crunch(ctx: ToolContext) -> str:
        """A long loop that looks at its cancellation."""
        started.set()
        while not ctx.cancelled:
            if not started.wait(0.01):  # pragma: no cover
                break
        stopped.set()
        return "stopped"

    worker = Worker(
        ScriptedClient([ScriptedResponse([ToolUsePart("c1", "crunch", {})])]), tools=[crunch]
    )
    result: list[Any] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            result.append(await worker.run("go"))

        group.start_soon(run)
        with anyio.fail_after(TIMEOUT):
            await anyio.to_thread.run_sync(started.wait, TIMEOUT)
            worker.cancel()
    assert result[0].status is RunStatus.CANCELLED
    with anyio.fail_after(TIMEOUT):
        assert await anyio.to_thread.run_sync(stopped.wait, TIMEOUT)


async def test_a_timed_out_async_tool_reads_cancelled_in_its_cleanup() -> None:
    flags: list[bool] = []

    @tool(timeout=0.05)
    async def slow(ctx: ToolContext) -> str:
        """Waits past its timeout."""
        try:
            await anyio.sleep_forever()
        finally:
            flags.append(ctx.cancelled)
        return ""  # pragma: no cover

    result = await execute_call(slow, ToolCall("c1", "slow", {}))
    assert result.is_error and flags == [True]


class Clock:
    """A hand-written tool reading the context through `current_tool_context()`."""

    name = "clock"
    description = "What time is it."
    effect = "read_only"

    def __init__(self) -> None:
        self.input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    async def execute(self, input_json: str) -> str:
        ctx = current_tool_context()
        assert ctx is not None
        return ctx.call_id


async def test_a_hand_written_tool_reads_the_current_context() -> None:
    assert current_tool_context() is None
    result = await execute_call(Clock(), ToolCall("c7", "clock", {}))
    assert result.content == "c7"
