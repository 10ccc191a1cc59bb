"""Review probes for KeyPool: hostile Retry-After values, concurrent requests, canary scans.

A real Anthropic client per key against a `WireServer` that answers by the key it is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import AuthenticationError, ConfigurationError, RateLimitError
from llm_worker.providers import Cooldown, FallbackClient, KeyPool, RetryPolicy
from llm_worker.testing import (
    RecordedRequest,
    ScriptedClient,
    ScriptedResponse,
    WireResponse,
    WireServer,
)
from llm_worker.testing._wire_anthropic import encode
from support.telemetry import Telemetry

CANARIES = ["sk-canary-0-7c1e9a3f5d2b", "sk-canary-1-4e8a2c6f0b9d", "sk-canary-2-9f1b3d5e7a0c"]
MODEL = "claude-pool"
QUICK = RetryPolicy(initial_delay=0.001, max_delay=0.001)


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _answer(text: str) -> WireResponse:
    return WireResponse(encode(ScriptedResponse.text(text), model=MODEL))


def _limited(retry_after: str | None) -> WireResponse:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    headers = {} if retry_after is None else {"retry-after": retry_after}
    return WireResponse(body, status=429, content_type="application/json", headers=headers)


def _refused(key: str) -> WireResponse:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {key}"},
    }
    return WireResponse(body, status=401, content_type="application/json")


def by_key(plan: dict[str, list[WireResponse]]) -> Callable[[RecordedRequest], WireResponse]:
    """Answer each key from its own queue (the last answer repeats)."""

    def answer(request: RecordedRequest) -> WireResponse:
        queue = plan[request.headers["x-api-key"]]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return answer


@pytest.mark.anyio
@pytest.mark.parametrize(
    "retry_after", ["1e12", "inf", "Fri, 01 Jan 2100 00:00:00 GMT", "1e400", "-5", "nan", "junk"]
)
async def test_a_hostile_retry_after_keeps_a_key_out_ten_minutes_at_most(retry_after: str) -> None:
    # A huge wait is not waited (the key's client gives up at once); a negative, NaN or
    # unreadable one is no wait: the key's own client retries it after its backoff.
    huge = retry_after in ("1e12", "inf", "Fri, 01 Jan 2100 00:00:00 GMT", "1e400")
    clock = Clock()
    plan = {
        CANARIES[0]: [_limited(retry_after), _answer("zero")],
        CANARIES[1]: [_answer("one"), _limited("1")],
    }
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(
            f"anthropic:{MODEL}",
            CANARIES[:2],
            base_url=server.base_url,
            clock=clock,
            retry=QUICK,
        )
        async with pool:
            with anyio.fail_after(10):
                assert (await Worker(pool).run("hi")).text == ("one" if huge else "zero")
                if not huge:
                    return
                clock.now += 601  # past the longest wait honoured (600 s, as a Cooldown's)
                # #1 is limited now: #0 must be back, whatever its Retry-After said
                assert (await Worker(pool).run("again")).text == "zero"


@pytest.mark.anyio
async def test_parallel_requests_with_a_401_racing_a_429_all_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    plan = {
        CANARIES[0]: [_refused(CANARIES[0])],
        CANARIES[1]: [_limited("30"), _answer("one")],
        CANARIES[2]: [_answer("two")],
    }
    texts: list[str] = []
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(f"anthropic:{MODEL}", CANARIES, base_url=server.base_url, retry=QUICK)
        async with pool:

            async def one() -> None:
                texts.append((await Worker(pool).run("hi")).text)

            with anyio.fail_after(15):
                async with anyio.create_task_group() as group:
                    for _ in range(12):
                        group.start_soon(one)
        shown = [repr(pool), *(r.getMessage() for r in caplog.records)]
        shown += [str(getattr(r, "key_index", "")) for r in caplog.records]
    assert len(texts) == 12
    assert set(texts) <= {"one", "two"}
    assert pool.usable == [1, 2]
    # The refused key was sent at most by the requests already under way when it was refused.
    for text in shown:
        assert not any(canary in text for canary in CANARIES), text


@pytest.mark.anyio
async def test_keys_never_reach_a_span_or_an_error_through_a_fallback_client() -> None:
    t = Telemetry()
    plan = {key: [_refused(key)] for key in CANARIES[:2]}
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(f"anthropic:{MODEL}", CANARIES[:2], base_url=server.base_url)
        failing = FallbackClient(
            [pool, KeyPool(f"anthropic:{MODEL}", [CANARIES[2]], base_url=server.base_url)],
            cooldown=Cooldown.disabled(),
        )
        plan[CANARIES[2]] = [_limited("30")]
        async with pool:
            worker = Worker(failing, instrument=t.instrumentation(capture_content=True))
            with anyio.fail_after(10), pytest.raises(AuthenticationError) as caught:
                await worker.run("hi")
    assert t.spans()
    shown = [
        str(caught.value),
        repr(caught.value),
        repr(failing),
        *getattr(caught.value, "__notes__", []),
    ]
    for span in t.spans():
        shown += [repr(dict(span.attributes or {})), repr(span.events), str(span.status)]
    for text in shown:
        assert not any(canary in text for canary in CANARIES), text


@pytest.mark.anyio
async def test_a_pool_limited_everywhere_is_a_rate_limit_a_fallback_falls_over_on() -> None:
    clock = Clock()
    plan = {key: [_limited("1e12")] for key in CANARIES[:2]}
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(
            f"anthropic:{MODEL}", CANARIES[:2], base_url=server.base_url, clock=clock, retry=QUICK
        )
        async with pool:
            with anyio.fail_after(10), pytest.raises(RateLimitError) as caught:
                await Worker(pool).run("hi")
            assert caught.value.retry_after is not None
            assert 0 < caught.value.retry_after <= 600
            spare = ScriptedClient(ScriptedResponse.text("spare"), provider="spare")
            client = FallbackClient([pool, spare], cooldown=Cooldown.disabled())
            with anyio.fail_after(10):
                assert (await Worker(client).run("hi")).text == "spare"


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf")])
def test_a_pool_wait_that_is_not_seconds_is_refused(seconds: float) -> None:
    with pytest.raises(ConfigurationError, match="key_cooldown"):
        KeyPool("anthropic:m", CANARIES, key_cooldown=seconds)
    with pytest.raises(ConfigurationError, match="max_retry_after"):
        KeyPool("anthropic:m", CANARIES, max_retry_after=seconds)
