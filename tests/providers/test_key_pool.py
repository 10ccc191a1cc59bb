"""KeyPool: keys rotated on 429 with a per-key cooldown, a 401 key dropped, keys never shown.

A real Anthropic client per key against a `WireServer` that answers by the key it is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import AuthenticationError, ConfigurationError
from llm_worker.providers import Cooldown, FallbackClient, KeyPool
from llm_worker.testing import (
    RecordedRequest,
    ScriptedClient,
    ScriptedResponse,
    WireResponse,
    WireServer,
)
from llm_worker.testing._wire_anthropic import encode

CANARIES = ["sk-canary-0-f3a9c1d7e5b2", "sk-canary-1-8d6e4f2a0c9b", "sk-canary-2-1b3d5f7a9c0e"]
MODEL = "claude-pool"


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _answer(text: str) -> WireResponse:
    return WireResponse(encode(ScriptedResponse.text(text), model=MODEL))


def _refused(key: str) -> WireResponse:
    # A provider that echoes the key it refused: the pool's error must not carry it on.
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {key}"},
    }
    return WireResponse(body, status=401, content_type="application/json")


def _limited(seconds: int) -> WireResponse:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    return WireResponse(
        body, status=429, content_type="application/json", headers={"retry-after": str(seconds)}
    )


def by_key(plan: dict[str, list[WireResponse]]) -> Callable[[RecordedRequest], WireResponse]:
    """Answer each key from its own queue (the last answer repeats)."""

    def answer(request: RecordedRequest) -> WireResponse:
        queue = plan[request.headers["x-api-key"]]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return answer


def keys_sent(server: WireServer) -> list[int]:
    return [CANARIES.index(r.headers["x-api-key"]) for r in server.requests]


@pytest.mark.anyio
async def test_rotation_with_one_revoked_key_and_one_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    plan = {
        CANARIES[0]: [_refused(CANARIES[0])],
        CANARIES[1]: [_limited(20), _answer("from key 1")],
        CANARIES[2]: [_answer("from key 2"), _answer("from key 2"), _limited(20), _answer("-")],
    }
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(f"anthropic:{MODEL}", CANARIES, base_url=server.base_url, clock=clock)
        async with pool:
            worker = Worker(pool)
            with anyio.fail_after(10):
                first = await worker.run("one")
                assert first.text == "from key 2"
                assert keys_sent(server) == [0, 1, 2]  # 401 dropped #0, 429 set #1 aside
                assert pool.usable == [1, 2]
                second = await worker.run("two")  # #2 is current: it answers at once
                assert second.text == "from key 2"
                assert keys_sent(server)[3:] == [2]
                clock.now += 21  # #1 is back; #2's next answer is a 429
                third = await worker.run("three")
                assert third.text == "from key 1"
                assert keys_sent(server)[4:] == [2, 1]
            shown = [repr(pool), *(r.getMessage() for r in caplog.records)]
    assert any("key #0 of 3" in line and "dropped" in line for line in shown)
    assert any("key #1 of 3" in line and "sits out 20 s" in line for line in shown)
    for text in shown:
        assert not any(canary in text for canary in CANARIES), text


@pytest.mark.anyio
async def test_every_key_revoked_names_the_indexes_never_the_keys() -> None:
    plan = {key: [_refused(key)] for key in CANARIES}
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(f"anthropic:{MODEL}", CANARIES, base_url=server.base_url)
        async with pool:
            with anyio.fail_after(10), pytest.raises(AuthenticationError) as caught:
                await Worker(pool).run("hi")
            with anyio.fail_after(10), pytest.raises(AuthenticationError):
                await Worker(pool).run("again")  # no key left: nothing is sent
    assert len(server.requests) == 3
    error = caught.value
    assert "keys #0, #1, #2 of 3" in str(error)
    shown = [str(error), repr(error), *getattr(error, "__notes__", []), repr(pool)]
    chained = error.__cause__ or error.__context__
    while chained is not None:
        shown += [str(chained), repr(chained)]
        chained = chained.__cause__ or chained.__context__
    for text in shown:
        assert not any(canary in text for canary in CANARIES), text


@pytest.mark.anyio
async def test_a_pool_with_every_key_limited_falls_over_to_the_next_client() -> None:
    plan = {key: [_limited(30)] for key in CANARIES[:2]}
    async with WireServer(handler=by_key(plan)) as server:
        pool = KeyPool(f"anthropic:{MODEL}", CANARIES[:2], base_url=server.base_url)
        spare = ScriptedClient(ScriptedResponse.text("spare"), provider="spare")
        client = FallbackClient([pool, spare], cooldown=Cooldown.disabled())
        async with pool:
            with anyio.fail_after(10):
                result = await Worker(client).run("hi")
                assert result.text == "spare"
                assert keys_sent(server) == [0, 1]  # each key once, no wait for Retry-After
                await Worker(client).run("again")  # both keys sit out: the pool sends nothing
    assert len(server.requests) == 2
    assert [u.provider for u in result.request_usage] == ["spare"]


def test_keys_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="list"):
        KeyPool("anthropic:m", "sk-one-key-only")
    with pytest.raises(ConfigurationError, match="twice"):
        KeyPool("anthropic:m", ["sk-aaaaaaaaaa", "sk-aaaaaaaaaa"])
    with pytest.raises(ConfigurationError, match="non-empty"):
        KeyPool("anthropic:m", ["sk-aaaaaaaaaa", ""])
