"""Budgets: each limit at its edge, shared objects, soft limit, pause/resume, output retries."""

from __future__ import annotations

import contextlib
import logging
from decimal import Decimal

import anyio
import pytest

from llm_worker import (
    LimitExceededError,
    Limits,
    Message,
    PauseState,
    Request,
    RunStatus,
    TextPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker._tokens import TokenCount
from llm_worker.errors import ConfigurationError
from llm_worker.events import UsageEvent
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio

SONNET = "claude-sonnet-4-5"
ran: list[str] = []


@tool
async def echo(text: str) -> str:
    """Say it back."""
    ran.append(text)
    return text


class Counted(ScriptedClient):
    """A scripted client with a token counter: every request's input counts `tokens`."""

    def __init__(self, responses: object, tokens: int = 100, **options: str) -> None:
        super().__init__(responses, **options)  # type: ignore[arg-type]
        self.tokens = tokens
        self.counted = 0

    async def count_tokens(self, request: Request) -> TokenCount:
        self.counted += 1
        return TokenCount(self.tokens, "provider")


class Uncounted(ScriptedClient):
    """A client without a token counter."""

    count_tokens = None  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]


def call(n: int = 1, *, tokens: int = 100, out: int = 10) -> ScriptedResponse:
    calls: list[ToolUsePart] = [ToolUsePart("", "echo", {"text": f"t{i}"}) for i in range(n)]
    return ScriptedResponse(list(calls), usage=UsageEvent(input_tokens=tokens, output_tokens=out))


def done(text: str = "done", *, tokens: int = 100, out: int = 10) -> ScriptedResponse:
    return ScriptedResponse.text(text, usage=UsageEvent(input_tokens=tokens, output_tokens=out))


def valid(history: list[Message]) -> bool:
    """Every call has exactly one result in the next message."""
    for i, message in enumerate(history):
        if message.tool_uses:
            ids = {u.id for u in message.tool_uses}
            nxt = history[i + 1] if i + 1 < len(history) else None
            if nxt is None or {r.tool_use_id for r in nxt.tool_results} != ids:
                return False
    return True


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


# -- each limit at its edge --------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3])
async def test_requests_n_allowed_and_the_next_refused_before_it_is_sent(n: int) -> None:
    client = ScriptedClient(call())  # calls a tool forever
    worker = Worker(client, tools=[echo])
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await worker.run("go", limits=Limits(requests=n))
    assert len(client.requests) == n
    assert (info.value.limit, info.value.value, info.value.used) == ("requests", n, n + 1)
    assert valid(worker.history)


@pytest.mark.parametrize(("limit", "allowed"), [(200, 2), (199, 1), (300, 3), (99, 0)])
async def test_input_tokens_counted_before_sending_n_allowed_n_plus_1_refused(
    limit: int, allowed: int
) -> None:
    client = Counted(call(tokens=100))
    worker = Worker(client, tools=[echo])
    budget = Limits(input_tokens=limit)
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await worker.run("go", limits=budget)
    assert len(client.requests) == allowed
    assert info.value.limit == "input_tokens"
    assert info.value.used == allowed * 100 + 100
    assert "count_tokens" in str(info.value)  # says how the input was counted
    assert budget.spent.input_tokens == allowed * 100


async def test_without_a_counter_the_input_is_estimated_and_says_so() -> None:
    client = Uncounted(call(tokens=1))
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await Worker(client, tools=[echo]).run("x" * 400, limits=Limits(input_tokens=50))
    assert client.requests == []
    assert "4 characters a token" in str(info.value)
    assert info.value.used is not None and info.value.used >= 100


async def test_output_tokens_cap_max_tokens_then_refuse_when_none_are_left() -> None:
    client = Counted([call(out=30), call(out=30), call(out=40), done()])
    worker = Worker(client, tools=[echo], max_tokens=1000)
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await worker.run("go", limits=Limits(output_tokens=100))
    assert [r.max_tokens for r in client.requests] == [100, 70, 40]
    assert (info.value.limit, info.value.used) == ("output_tokens", 100)


async def test_total_tokens_leave_room_for_output_and_cap_it() -> None:
    client = Counted([call(tokens=100, out=50), done(tokens=100, out=10)])
    worker = Worker(client, tools=[echo])
    budget = Limits(total_tokens=300)
    with anyio.fail_after(10):
        result = await worker.run("go", limits=budget)
    assert result.status is RunStatus.FINISHED
    # 300 - 0 - 100 input; then 300 - 150 spent - 100 input
    assert [r.max_tokens for r in client.requests] == [200, 50]
    assert budget.spent.total_tokens == 260
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await worker.run("again", limits=budget)  # 260 + 100 input leaves no room
    assert (info.value.limit, info.value.used) == ("total_tokens", 360)


async def test_an_answer_that_reports_more_than_the_limit_stops_its_calls() -> None:
    # The counter said 100, the answer reports 400: over input_tokens=300 after the answer.
    client = Counted([call(2, tokens=400)])
    worker = Worker(client, tools=[echo])
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await worker.run("go", limits=Limits(input_tokens=300))
    assert (info.value.limit, info.value.used) == ("input_tokens", 400)
    assert ran == []  # none of the answer's calls ran
    assert valid(worker.history)  # they read "interrupted"


@pytest.mark.parametrize("n", [2, 3])
async def test_parallel_tool_calls_share_tool_calls_exactly(n: int) -> None:
    client = Counted([call(3), done()])
    worker = Worker(client, tools=[echo])
    budget = Limits(tool_calls=n)
    with anyio.fail_after(10):
        if n == 3:
            result = await worker.run("go", limits=budget)
            assert result.status is RunStatus.FINISHED
        else:
            with pytest.raises(LimitExceededError) as info:
                await worker.run("go", limits=budget)
            assert (info.value.limit, info.value.value, info.value.used) == ("tool_calls", 2, 3)
    assert len(ran) == n == budget.spent.tool_calls
    assert valid(worker.history)
    results = worker.history[2].tool_results
    refused = [r for r in results if r.is_error]
    assert len(refused) == 3 - n
    assert all("tool_calls" in r.content for r in refused)


async def test_two_workers_share_one_limits_concurrently() -> None:
    budget = Limits(requests=7, tool_calls=5)
    clients = [Counted(call()) for _ in range(2)]
    errors: list[LimitExceededError] = []

    async def one(client: Counted) -> None:
        try:
            await Worker(client, tools=[echo], limits=budget).run("go")
        except LimitExceededError as exc:
            errors.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for client in clients:
                group.start_soon(one, client)
    assert len(errors) == 2
    assert budget.spent.tool_calls == len(ran) == 5
    assert sum(len(c.requests) for c in clients) == budget.spent.requests <= 7


async def test_limits_shared_by_threads_count_exactly() -> None:
    budget = Limits(requests=9)
    sent: list[int] = []

    def one() -> None:
        client = ScriptedClient(call())
        with contextlib.suppress(LimitExceededError):
            Worker(client, tools=[echo], limits=budget).run_sync("go")
        sent.append(len(client.requests))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(anyio.to_thread.run_sync, one)
    assert sum(sent) == 9 == budget.spent.requests


async def test_wall_clock_stops_the_next_request() -> None:
    @tool
    async def slow() -> str:
        """Take a while."""
        await anyio.sleep(0.05)
        return "ok"

    client = Counted([ScriptedResponse([ToolUsePart("", "slow", {})]), done()])
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await Worker(client, tools=[slow]).run("go", limits=Limits(wall_s=0.04))
    assert info.value.limit == "wall_s"
    assert len(client.requests) == 1


# -- cost --------------------------------------------------------------------------------


async def test_cost_n_allowed_and_the_request_that_would_cross_it_refused() -> None:
    # Sonnet: $3 / M input, $15 / M output. 1000 in + 100 out = $0.0045 per request.
    usage = UsageEvent(input_tokens=1000, output_tokens=100)
    script = ScriptedResponse([ToolUsePart("", "echo", {"text": "a"})], usage=usage)
    client = Counted(script, tokens=1000, model=SONNET, provider="anthropic")
    budget = Limits(cost_usd=0.0125)  # 2 requests: 0.009; a 3rd's input would be 0.012 + output
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await Worker(client, tools=[echo]).run("go", limits=budget)
    assert len(client.requests) == 3
    assert budget.spent.cost_usd == Decimal("0.0135")
    assert info.value.limit == "cost_usd"


async def test_an_unpriced_model_with_a_cost_limit_fails_closed_before_sending() -> None:
    client = Counted(done(), model="no-such-model-7", provider="anthropic")
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await Worker(client).run("go", limits=Limits(cost_usd=1))
    assert client.requests == []
    assert info.value.limit == "cost_usd"
    assert "no price" in str(info.value) and 'on_unpriced="warn"' in str(info.value)


async def test_on_unpriced_warn_counts_zero_dollars_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = Counted(done(), model="no-such-model-8", provider="anthropic")
    budget = Limits(cost_usd=1, on_unpriced="warn")
    with anyio.fail_after(10), caplog.at_level(logging.WARNING, "llm_worker.limits"):
        result = await Worker(client).run("go", limits=budget)
    assert result.status is RunStatus.FINISHED
    assert budget.spent.cost_usd == 0 and budget.spent.unpriced == 1
    assert "no-such-model-8" in caplog.text


# -- soft limit --------------------------------------------------------------------------


async def test_soft_limit_tells_the_model_once_then_it_finishes() -> None:
    seen: list[Request] = []

    def answer(req: ScriptedRequest) -> ScriptedResponse:
        seen.append(req.request)
        if req.request.tool_choice == "none":
            return done("wrapped up")
        return call()

    worker = Worker(ScriptedClient(answer), tools=[echo])
    with anyio.fail_after(10):
        result = await worker.run("go", limits=Limits(requests=5, soft=0.6))
    assert result.status is RunStatus.FINISHED and result.text == "wrapped up"
    assert result.soft_limit == "requests"
    assert [r.tool_choice for r in seen] == [None, None, "none"]  # the 3rd of 5 is at 0.6
    last = seen[-1].messages[-1]
    assert last.tool_results and isinstance(last.content[-1], TextPart)
    assert "requests limit (3 of 5)" in last.content[-1].text
    notes = [m for m in worker.history if "[budget]" in m.text]
    assert notes == []  # told in the request only: the history keeps no note


async def test_soft_limit_in_tool_output_mode_forces_the_output_tool() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    def answer(req: ScriptedRequest) -> ScriptedResponse:
        if req.request.tool_choice is not None:
            return ScriptedResponse.output(Answer(value=1), tool="final_result")
        return call()

    worker = Worker(ScriptedClient(answer), tools=[echo], output_type=Answer, output_mode="tool")
    with anyio.fail_after(10):
        result = await worker.run("go", limits=Limits(tool_calls=2, soft=0.5))
    assert result.output == Answer(value=1)
    assert result.soft_limit == "tool_calls"


# -- pause, resume, output retries ---------------------------------------------------------


def pausing_worker(client: ScriptedClient) -> Worker:
    worker = Worker(client, tools=[echo])

    async def pause_second(ctx: ToolCallContext) -> Pause | None:
        return Pause("check") if ctx.call.input.get("text") == "pause" and not ctx.resumed else None

    worker.add_before_tool_call_hook(pause_second)
    return worker


def pause_script() -> list[ScriptedResponse]:
    first = ScriptedResponse([ToolUsePart("", "echo", {"text": "a"})])
    second = ScriptedResponse([ToolUsePart("", "echo", {"text": "pause"})])
    return [first, second, call(), call(), done()]


async def test_a_budget_spans_a_pause_resumed_in_a_new_worker_and_limits() -> None:
    with anyio.fail_after(10):
        paused = await pausing_worker(ScriptedClient(pause_script())).run(
            "go", limits=Limits(requests=3)
        )
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    client = ScriptedClient(pause_script()[2:])
    fresh = Limits(requests=3)  # another process: it never saw the two requests before
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await pausing_worker(client).resume(state, limits=fresh)
    assert len(client.requests) == 1  # 2 before the pause + 1 = 3; the 4th refused
    assert (info.value.limit, info.value.used) == ("requests", 4)


async def test_the_same_limits_across_a_pause_counts_it_once() -> None:
    budget = Limits(requests=4)
    worker = pausing_worker(ScriptedClient(pause_script()))
    with anyio.fail_after(10):
        paused = await worker.run("go", limits=budget)
        assert paused.state is not None
        state = PauseState.from_json(paused.state.to_json())
        with pytest.raises(LimitExceededError):
            await worker.resume(state, limits=budget)
    assert budget.spent.requests == 4  # 2 + 2, never 2 + 2 + 2


async def test_structured_output_retries_are_charged() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    client = ScriptedClient([ScriptedResponse.text('{"value": "x"}')] * 3)
    worker = Worker(client, output_type=Answer, output_retries=5)
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await worker.run("go", limits=Limits(requests=2))
    assert len(client.requests) == 2
    assert info.value.limit == "requests"
    assert valid(worker.history)


async def test_max_requests_stays_a_shorthand_beside_limits() -> None:
    client = ScriptedClient(call())
    with anyio.fail_after(10), pytest.raises(LimitExceededError) as info:
        await Worker(client, tools=[echo], max_requests=2).run("go", limits=Limits(requests=5))
    assert info.value.limit == "max_requests" and len(client.requests) == 2


@pytest.mark.parametrize(
    "options",
    [{"requests": -1}, {"cost_usd": float("nan")}, {"soft": 1.0}, {"soft": 0}],
)
def test_limits_that_cannot_work_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        Limits(**options)  # type: ignore[arg-type]
