"""Cost from usage: per request and per run, None when unknown, carried across a pause."""

from __future__ import annotations

import sys
from decimal import Decimal

import anyio
import pytest

from llm_worker import PauseState, RequestUsage, ToolUsePart, Worker, tool
from llm_worker.errors import MissingExtraError
from llm_worker.events import UsageEvent
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

SONNET = "claude-sonnet-4-5"


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [ToolUsePart("c1", "add", {"a": 1, "b": 2})],
            usage=UsageEvent(input_tokens=1000, output_tokens=100, cache_read_input_tokens=200),
        ),
        ScriptedResponse.text("3", usage=UsageEvent(input_tokens=2000, output_tokens=10)),
    ]


async def test_a_run_costs_the_sum_of_its_requests_priced_with_cache_reads() -> None:
    worker = Worker(ScriptedClient(script(), model=SONNET, provider="anthropic"), tools=[add])
    with anyio.fail_after(10):
        result = await worker.run("1+2?")
    first, second = result.request_usage
    assert (first.provider, first.model) == ("anthropic", SONNET)
    # $3 / M input tokens, $0.30 / M cache reads, $15 / M output tokens
    assert first.cost == Decimal("0.00396")  # (800 * 3 + 200 * 0.3 + 100 * 15) / 1e6
    assert second.cost == Decimal("0.00615")  # (2000 * 3 + 10 * 15) / 1e6
    assert result.cost == Decimal("0.01011")


@pytest.mark.parametrize(
    ("provider", "model"),
    [("anthropic", "no-such-model-7"), ("scripted", "scripted"), ("openai_chat", "")],
)
async def test_an_unknown_model_or_provider_costs_none_never_a_guess(
    provider: str, model: str
) -> None:
    worker = Worker(ScriptedClient(script(), model=model, provider=provider), tools=[add])
    with anyio.fail_after(10):
        result = await worker.run("1+2?")
    assert [r.cost for r in result.request_usage] == [None, None]
    assert result.cost is None


def test_one_unknown_request_makes_the_total_unknown() -> None:
    usage = UsageEvent(input_tokens=10, output_tokens=1)
    from llm_worker.state import RunResult

    known = RequestUsage("anthropic", SONNET, usage)
    unknown = RequestUsage("anthropic", "no-such-model-7", usage)
    assert RunResult(RunStatus.FINISHED, request_usage=[known, unknown]).cost is None
    assert RunResult(RunStatus.FINISHED).cost == 0
    assert RequestUsage("anthropic", SONNET, UsageEvent()).cost is None  # no counts


async def test_a_resumed_run_costs_its_requests_before_the_pause_too() -> None:
    def ask(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("approve?")

    first = Worker(ScriptedClient(script()[:1], model=SONNET, provider="anthropic"), tools=[add])
    first.add_before_tool_call_hook(ask)
    with anyio.fail_after(10):
        paused = await first.run("1+2?")
    assert paused.state is not None and paused.cost == Decimal("0.00396")
    state = PauseState.from_json(paused.state.to_json())
    second = Worker(ScriptedClient(script()[1:], model=SONNET, provider="anthropic"), tools=[add])
    second.add_before_tool_call_hook(ask)
    with anyio.fail_after(10):
        result = await second.resume(state)
    assert len(result.request_usage) == 2
    assert result.cost == Decimal("0.01011")


async def test_a_state_saved_before_cost_and_tracing_existed_still_loads() -> None:
    first = Worker(ScriptedClient(script()[:1], model=SONNET, provider="anthropic"), tools=[add])
    first.add_before_tool_call_hook(lambda ctx: None if ctx.resumed else Pause("wait"))
    with anyio.fail_after(10):
        paused = await first.run("1+2?")
    assert paused.state is not None
    old = paused.state.to_dict()
    del old["request_usage"], old["trace_context"]
    state = PauseState.from_dict(old)
    assert (state.request_usage, state.trace_context) == ([], None)
    assert PauseState.from_json(paused.state.to_json()).request_usage == paused.request_usage


def test_without_the_extra_cost_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    request = RequestUsage("anthropic", SONNET, UsageEvent(input_tokens=1, output_tokens=1))
    with pytest.raises(MissingExtraError) as caught:
        _ = request.cost
    assert caught.value.extra == "cost"


async def test_a_broken_attempt_that_reported_usage_is_priced_too() -> None:
    from llm_worker.errors import OverloadedError
    from llm_worker.testing import ScriptedModelServer
    from llm_worker.worker import StreamRetry

    # Anthropic reports the input tokens at the start: a stream broken later has billed them.
    broken = OverloadedError("busy", error_type="overloaded_error", streamed=True)
    usage = UsageEvent(input_tokens=1000, output_tokens=100)
    script = [
        ScriptedResponse.text("par", fail_with=broken, usage=usage),
        ScriptedResponse.text("ok", usage=usage),
    ]
    async with ScriptedModelServer("anthropic", script, model=SONNET) as server:
        client = server.client()
        async with client:
            worker = Worker(client, stream_retry=StreamRetry(delay=0.0))
            with anyio.fail_after(10):
                result = await worker.run("go")
    assert result.requests == 1
    first, second = result.request_usage
    assert first.usage.input_tokens == second.usage.input_tokens == 1000
    assert result.cost == sum((r.cost or Decimal(0) for r in result.request_usage), Decimal(0))
    assert first.cost is not None and first.cost >= Decimal("0.003")  # 1000 * $3 / M at least


async def test_usage_the_price_table_cannot_price_costs_none_not_an_error() -> None:
    # A server that reports more cached tokens than prompt tokens (malformed, or another
    # counting): the run's answer stands; its cost is unknown.
    odd = UsageEvent(input_tokens=10, output_tokens=1, cache_read_input_tokens=50)
    client = ScriptedClient(
        [ScriptedResponse.text("hi", usage=odd)], model=SONNET, provider="anthropic"
    )
    worker = Worker(client)
    with anyio.fail_after(10):
        result = await worker.run("hello")
    assert result.status is RunStatus.FINISHED
    assert result.cost is None
