"""Review probes for the fallback cooldown: probes that close it, threads, cancelled probes."""

from __future__ import annotations

import asyncio
import threading

import anyio
import anyio.to_thread
import pytest

from llm_worker import Worker
from llm_worker.errors import OverloadedError
from llm_worker.events import StatusEvent
from llm_worker.providers import AnthropicClient, Cooldown, FallbackClient, RetryPolicy
from llm_worker.providers._cooldown import Breaker
from llm_worker.state import RunStatus
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedResponse,
    WireResponse,
    WireServer,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def overloaded() -> OverloadedError:
    return OverloadedError("Overloaded", provider="scripted", error_type="overloaded_error")


def _529() -> WireResponse:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return WireResponse(body, status=529, content_type="application/json")


@pytest.mark.anyio
async def test_a_probe_that_succeeds_through_a_worker_closes_the_circuit() -> None:
    clock = Clock()
    first = ScriptedClient(
        [
            ScriptedResponse.text("x", fail_with=overloaded()),
            ScriptedResponse.text("first back"),
            ScriptedResponse.text("first again"),
        ],
        provider="flaky",
    )
    second = ScriptedClient(ScriptedResponse.text("spare"), provider="steady")
    cooldown = Cooldown(failures=1, duration=10, clock=clock)
    client = FallbackClient([first, second], cooldown=cooldown)
    with anyio.fail_after(5):
        assert (await Worker(client).run("q")).text == "spare"
        assert (await Worker(client).run("q")).text == "spare"  # open: skipped
        clock.now += 11
        assert (await Worker(client).run("q")).text == "first back"  # the probe
        # closed by the probe's success: the next request is the first client's at once
        assert (await Worker(client).run("q")).text == "first again"


@pytest.mark.anyio
async def test_a_cancelled_probe_frees_the_probe_slot() -> None:
    clock = Clock()
    first = ScriptedClient(
        [
            ScriptedResponse.text("x", fail_with=overloaded()),
            ScriptedResponse.text("slow probe answer", delay=5.0),
            ScriptedResponse.text("first back"),
        ],
        provider="flaky",
    )
    second = ScriptedClient(ScriptedResponse.text("spare"), provider="steady")
    cooldown = Cooldown(failures=1, duration=10, clock=clock)
    client = FallbackClient([first, second], cooldown=cooldown)
    with anyio.fail_after(5):
        assert (await Worker(client).run("q")).text == "spare"
        clock.now += 11
        worker = Worker(client)
        async with worker.stream("q") as stream:
            async for event in stream:
                if isinstance(event, StatusEvent):  # the probe's answer began: cancel it
                    worker.cancel()
        assert stream.result.status is RunStatus.CANCELLED
        assert first.remaining == 1
        # the cancelled probe gave no verdict: the next request may probe again
        assert (await Worker(client).run("q")).text == "first back"


def test_one_probe_at_a_time_across_threads() -> None:
    breaker = Breaker()
    policy = Cooldown(failures=1, duration=10)
    breaker.failed(0.0, overloaded(), policy)
    start = threading.Barrier(16)
    got: list[bool] = []

    def attempt() -> None:
        start.wait(timeout=10)
        got.append(breaker.acquire(11.0))

    threads = [threading.Thread(target=attempt) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(got) == [False] * 15 + [True]


@pytest.mark.anyio
async def test_a_cooldown_is_shared_by_workers_in_other_threads_and_loops() -> None:
    async with (
        WireServer(handler=lambda _request: _529()) as down,
        ScriptedModelServer("openai_chat", ScriptedResponse.text("ok")) as spare,
    ):
        base = down.base_url + "/cooldown-threads"  # a breaker of this test alone
        spare_url = spare.base_url + "/v1"

        def in_a_thread(runs: int) -> list[str]:
            async def main() -> list[str]:
                first = AnthropicClient(
                    model="claude-x", base_url=base, api_key="k", retry=RetryPolicy.disabled()
                )
                from llm_worker.providers import OpenAIChatClient

                other = OpenAIChatClient(model="scripted-model", base_url=spare_url, api_key="k")
                async with first, other:
                    client = FallbackClient([first, other], cooldown=Cooldown(failures=2))
                    return [(await Worker(client).run("q")).text for _ in range(runs)]

            return asyncio.run(main())

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(anyio.to_thread.run_sync, in_a_thread, 5)
    # 20 requests in four threads, each its own loop and clients: the shared breaker opened
    # after its second failure, so at most the requests already past it reached the server.
    assert 2 <= len(down.requests) <= 2 + 4


def _429(_request: object) -> WireResponse:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    return WireResponse(
        body, status=429, content_type="application/json", headers={"retry-after": "30"}
    )


@pytest.mark.anyio
async def test_a_429_on_one_key_does_not_keep_another_accounts_client_out() -> None:
    async with (
        WireServer(handler=_429) as limited,
        ScriptedModelServer("openai_chat", ScriptedResponse.text("ok")) as spare,
    ):
        base = limited.base_url + "/per-key"  # a breaker of this test alone

        def fallback(key: str) -> tuple[FallbackClient, AnthropicClient]:
            first = AnthropicClient(
                model="claude-x", base_url=base, api_key=key, retry=RetryPolicy.disabled()
            )
            return FallbackClient([first, spare.client()], cooldown=Cooldown()), first

        tenant_a, first_a = fallback("sk-tenant-a-0123456789")
        tenant_b, first_b = fallback("sk-tenant-b-9876543210")
        same_a, first_same = fallback("sk-tenant-a-0123456789")
        async with first_a, first_b, first_same:
            with anyio.fail_after(10):
                assert (await Worker(tenant_a).run("a")).text == "ok"
                assert (await Worker(same_a).run("a")).text == "ok"  # the same key: skipped
                assert len(limited.requests) == 1
                assert (await Worker(tenant_b).run("b")).text == "ok"  # its own limits: tried
                assert len(limited.requests) == 2
        identity = repr([first_a.transport.credential_tag, first_b.transport.credential_tag, base])
    assert "sk-tenant" not in identity
    assert first_a.transport.credential_tag == first_same.transport.credential_tag


@pytest.mark.parametrize(
    ("retry_after", "closed_at"),
    [(1e308, 1000.0 + 600), (float("inf"), 1000.0 + 600), (-5.0, 1000.0), (float("nan"), 1000.0)],
)
def test_a_hostile_retry_after_opens_a_breaker_ten_minutes_at_most(
    retry_after: float, closed_at: float
) -> None:
    breaker = Breaker()
    policy = Cooldown(failures=3)
    error = OverloadedError("slow", provider="p", retry_after=retry_after)
    breaker.failed(1000.0, error, policy)
    assert breaker.remaining(1000.0) == pytest.approx(closed_at - 1000.0)
    assert breaker.acquire(closed_at)  # back (one failure of three: no cooldown of its own)
