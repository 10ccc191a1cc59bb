"""FallbackClient: before the first byte, mid-stream, cooldowns, and the Worker's history.

Real wire formats over HTTP on 127.0.0.1 (`ScriptedModelServer`, `WireServer`) where the wire
is the point; scripted clients in process where it is not.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import Worker, tool
from llm_worker.errors import (
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    StreamInterruptedError,
)
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    Event,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    UsageEvent,
)
from llm_worker.messages import Origin, TextPart, ThinkingPart, ToolUsePart
from llm_worker.providers import Cooldown, FallbackClient, RetryPolicy
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedResponse,
    WireResponse,
    WireServer,
)

NO_RETRY = RetryPolicy.disabled()


class Clock:
    """A hand-moved monotonic clock: cooldowns tested without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def overloaded(streamed: bool = True) -> OverloadedError:
    return OverloadedError(
        "Overloaded", provider="scripted", error_type="overloaded_error", streamed=streamed
    )


def usage(n: int) -> UsageEvent:
    return UsageEvent(input_tokens=n, output_tokens=1)


def sources(events: list[Event]) -> list[tuple[ResponseStatus, Origin | None]]:
    return [(e.status, e.source) for e in events if isinstance(e, StatusEvent)]


# -- the client alone --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mid_stream_failure_rolls_back_and_the_next_client_answers() -> None:
    first = ScriptedClient(
        [ScriptedResponse.text("Half an ans", fail_with=overloaded(), usage=usage(7))],
        provider="alpha",
        model="a-1",
    )
    second = ScriptedClient([ScriptedResponse.text("Whole.")], provider="beta", model="b-1")
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    with anyio.fail_after(5):
        events = [e async for e in client.stream(_request())]
    # The failed answer ends as a stream retry ends it: abort of the open block, then FAILED;
    # the second answer starts from STARTED, stamped with the client that streams it.
    assert [type(e).__name__ for e in events].count("BlockAbort") == 1
    assert sources(events) == [
        (ResponseStatus.STARTED, Origin("alpha", "a-1")),
        (ResponseStatus.FAILED, Origin("alpha", "a-1")),
        (ResponseStatus.STARTED, Origin("beta", "b-1")),
        (ResponseStatus.COMPLETED, Origin("beta", "b-1")),
    ]
    after = events[next(i for i, e in enumerate(events) if isinstance(e, BlockAbort)) :]
    text = "".join(
        e.delta.text for e in after if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )
    assert text == "Whole."
    assert second.requests[0] is first.requests[0]  # the same request went on


@pytest.mark.anyio
async def test_a_failure_that_does_not_fall_over_is_raised_with_its_events() -> None:
    bad = InvalidRequestError("bad tool schema", provider="alpha", status_code=400)
    first = ScriptedClient([ScriptedResponse.text("x", fail_with=bad)], provider="alpha")
    second = ScriptedClient([ScriptedResponse.text("never")], provider="beta")
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    events: list[Event] = []

    async def read() -> None:
        async for event in client.stream(_request()):
            events.append(event)

    with anyio.fail_after(5), pytest.raises(InvalidRequestError):
        await read()
    assert second.remaining == 1
    assert sources(events)[-1][0] is ResponseStatus.FAILED


@pytest.mark.anyio
async def test_every_client_failing_raises_the_last_with_the_others_as_notes() -> None:
    first = ScriptedClient([ScriptedResponse.text("a", fail_with=overloaded())], provider="a")
    cut = StreamInterruptedError("connection reset", provider="b", streamed=True)
    second = ScriptedClient([ScriptedResponse.text("b", fail_with=cut)], provider="b")
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    with anyio.fail_after(5), pytest.raises(StreamInterruptedError) as caught:
        await _drain(client)
    assert any("Overloaded" in note for note in caught.value.__notes__)


def test_unknown_failure_class_and_no_client_are_configuration_errors() -> None:
    from llm_worker.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="unknown fallback_on"):
        FallbackClient([ScriptedClient([])], fallback_on=["overload"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        FallbackClient([])


# -- over the wire -----------------------------------------------------------------------------


def _overloaded_529() -> WireResponse:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return WireResponse(body, status=529, content_type="application/json")


def _rate_limited(seconds: int) -> WireResponse:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    return WireResponse(
        body, status=429, content_type="application/json", headers={"retry-after": str(seconds)}
    )


@pytest.mark.anyio
async def test_529_before_the_first_byte_goes_to_gemini_unseen() -> None:
    async with (
        WireServer([_overloaded_529()]) as down,
        ScriptedModelServer("gemini", [ScriptedResponse.text("From Gemini.")]) as gemini,
    ):
        from llm_worker.providers import AnthropicClient

        anthropic = AnthropicClient(
            model="claude-x", base_url=down.base_url, api_key="k", retry=NO_RETRY
        )
        client = FallbackClient([anthropic, gemini.client()], cooldown=Cooldown.disabled())
        async with anthropic, client, Worker(client) as worker:
            events: list[Any] = []
            worker.on_status(events.append)
            with anyio.fail_after(10):
                result = await worker.run("Hi")
            await gemini.client().aclose()
    assert result.text == "From Gemini."
    # The failure before the answer is not shown: one STARTED, from Gemini.
    assert [s for s in sources(events)] == [
        (ResponseStatus.STARTED, Origin("gemini", "scripted-model")),
        (ResponseStatus.COMPLETED, Origin("gemini", "scripted-model")),
    ]
    assert [(u.provider, u.model) for u in result.request_usage] == [("gemini", "scripted-model")]
    assert len(down.requests) == 1


@pytest.mark.anyio
async def test_429_retry_after_keeps_the_client_out_for_that_long_for_every_worker() -> None:
    clock = Clock()
    cooldown = Cooldown(failures=3, duration=5, clock=clock)
    async with (
        WireServer([_rate_limited(30)]) as limited,
        ScriptedModelServer("openai_chat", ScriptedResponse.text("ok")) as spare,
    ):
        from llm_worker.providers import AnthropicClient

        def fallback() -> tuple[FallbackClient, AnthropicClient]:
            first = AnthropicClient(
                model="claude-x", base_url=limited.base_url, api_key="k", retry=NO_RETRY
            )
            return FallbackClient([first, spare.client()], cooldown=cooldown), first

        one, first_one = fallback()
        two, first_two = fallback()  # another Worker's own clients, to the same model
        async with first_one, first_two:
            with anyio.fail_after(10):
                assert (await Worker(one).run("a")).text == "ok"
                assert len(limited.requests) == 1
                clock.now += 29  # still inside Retry-After: the second Worker skips it too
                assert (await Worker(two).run("b")).text == "ok"
                assert len(limited.requests) == 1
                clock.now += 2  # past it: one request may try the client again
                limited.enqueue(_overloaded_529())
                assert (await Worker(two).run("c")).text == "ok"
                assert len(limited.requests) == 2


@pytest.mark.anyio
async def test_breaker_opens_after_n_failures_and_probes_once() -> None:
    clock = Clock()
    cooldown = Cooldown(failures=2, window=60, duration=10, clock=clock)
    first = ScriptedClient(
        [ScriptedResponse.text("x", fail_with=overloaded(False)) for _ in range(3)],
        provider="flaky",
    )
    second = ScriptedClient(ScriptedResponse.text("ok"), provider="steady")
    client = FallbackClient([first, second], cooldown=cooldown)
    with anyio.fail_after(5):
        for _ in range(4):
            await Worker(client).run("q")
        assert first.remaining == 1  # two failures opened it: requests 3 and 4 skipped it
        clock.now += 11
        await Worker(client).run("q")  # the probe: fails, so it opens again
        assert first.remaining == 0
        await Worker(client).run("q")


@pytest.mark.anyio
async def test_every_client_cooling_down_is_an_overloaded_error_with_retry_after() -> None:
    clock = Clock()
    only = ScriptedClient([ScriptedResponse.text("x", fail_with=overloaded(False))])
    client = FallbackClient([only], cooldown=Cooldown(failures=1, duration=8, clock=clock))
    with anyio.fail_after(5):
        with pytest.raises(OverloadedError):
            await Worker(client).run("q")
        with pytest.raises(OverloadedError, match="cooling down") as caught:
            await Worker(client).run("q")
    assert caught.value.retry_after == pytest.approx(8)


# -- the Worker's history ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_worker_history_holds_only_the_answer_that_completed() -> None:
    first = ScriptedClient(
        [
            ScriptedResponse(
                [
                    ThinkingPart("mull", signature="sig-alpha"),
                    TextPart("Let me look"),
                    ToolUsePart("", "lookup", {"q": "half"}),
                ],
                fail_with=overloaded(),
                usage=usage(11),
            )
        ],
        provider="alpha",
        model="a-1",
    )
    second = ScriptedClient(
        [
            ScriptedResponse([ThinkingPart("fresh", signature="sig-beta"), TextPart("Done.")]),
        ],
        provider="beta",
        model="b-1",
    )
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    with anyio.fail_after(5):
        result = await Worker(client, tools=[lookup]).run("Go")
    answer = result.messages[-1]
    assert answer.text == "Done."
    assert [type(p).__name__ for p in answer.content] == ["ThinkingPart", "TextPart"]
    thinking = answer.content[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.origin == Origin("beta", "b-1")  # the answering client's, not alpha's
    # The withdrawn answer reported no usage before it broke (a scripted client reports it
    # at the end): only the answer that completed is priced, by its own model.
    assert [(u.provider, u.model) for u in result.request_usage] == [("beta", "b-1")]


_runs: list[str] = []


@tool(effect="read_only")
async def lookup(q: str) -> str:
    """Look something up."""
    _runs.append(q)
    return f"found {q}"


@pytest.mark.anyio
async def test_an_early_started_tool_is_not_started_again_by_the_answer_after_it() -> None:
    _runs.clear()
    call = ToolUsePart("", "lookup", {"q": "rain"})
    first = ScriptedClient(
        [
            ScriptedResponse([call, TextPart("and then")], fail_with=overloaded()),
            ScriptedResponse.text("It rains."),  # alpha is back for the next request
        ],
        provider="alpha",
    )
    second = ScriptedClient(
        [ScriptedResponse([TextPart("Checking."), ToolUsePart("", "lookup", {"q": "rain"})])],
        provider="beta",
    )
    client = FallbackClient([first, second], cooldown=Cooldown.disabled())
    worker = Worker(client, tools=[lookup], early_tool_start=True)
    with anyio.fail_after(5):
        result = await worker.run("Weather?")
    assert _runs == ["rain"]  # started once, on the withdrawn answer; its result carried
    assert result.text == "It rains."
    answer, results = result.messages[1], result.messages[2]
    calls = [p for p in answer.content if isinstance(p, ToolUsePart)]
    assert len(calls) == 1
    assert results.tool_results[0].tool_use_id == calls[0].id
    assert "found rain" in str(results.tool_results[0].content)


async def _drain(client: FallbackClient) -> None:
    async for _ in client.stream(_request()):
        pass


def _request() -> Any:
    from llm_worker.messages import Message, Request

    return Request([Message.user("hi")])


@pytest.mark.anyio
async def test_worker_from_model_strings_does_not_wait_out_a_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        WireServer([_rate_limited(30)]) as limited,
        ScriptedModelServer("gemini", [ScriptedResponse.text("Gemini here.")]) as gemini,
    ):
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k-anthropic-0123456789")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", limited.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "k-gemini-0123456789")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.base_url)
        async with Worker(["anthropic:claude-from-list", "gemini:scripted-model"]) as worker:
            assert isinstance(worker.client, FallbackClient)
            assert repr(worker.client) == (
                "FallbackClient([anthropic:claude-from-list, gemini:scripted-model])"
            )
            with anyio.fail_after(5):  # a client that waited out Retry-After: 30 would not
                result = await worker.run("hi")
    assert result.text == "Gemini here."
    assert len(limited.requests) == 1


@pytest.mark.anyio
async def test_context_length_falls_over_only_when_asked() -> None:
    def too_long() -> InvalidRequestError:
        return InvalidRequestError(
            "prompt is too long: 250000 tokens > 200000 maximum", provider="a", status_code=400
        )

    def clients() -> tuple[ScriptedClient, ScriptedClient]:
        small = ScriptedClient([ScriptedResponse.text("x", fail_with=too_long())], provider="a")
        big = ScriptedClient([ScriptedResponse.text("fits")], provider="b")
        return small, big

    small, big = clients()
    default = FallbackClient([small, big], cooldown=Cooldown.disabled())
    with anyio.fail_after(5), pytest.raises(InvalidRequestError):
        await Worker(default).run("long")
    assert big.remaining == 1
    small, big = clients()
    asked = FallbackClient(
        [small, big], fallback_on={"context_length", "overloaded"}, cooldown=Cooldown(failures=1)
    )
    with anyio.fail_after(5):
        assert (await Worker(asked).run("long")).text == "fits"
    # The request's fault, not the client's: its breaker did not count it.
    assert asked._breakers[0].remaining(0.0) == 0.0  # pyright: ignore[reportPrivateUsage]


@pytest.mark.anyio
async def test_fallback_on_a_function_of_the_error() -> None:
    first = ScriptedClient([ScriptedResponse.text("a", fail_with=overloaded())], provider="a")
    second = ScriptedClient([ScriptedResponse.text("b")], provider="b")
    seen: list[ProviderError] = []

    def only_streamed(exc: ProviderError) -> bool:
        seen.append(exc)
        return exc.streamed

    client = FallbackClient([first, second], fallback_on=only_streamed)
    with anyio.fail_after(5):
        assert (await Worker(client).run("q")).text == "b"
    assert [type(e) for e in seen] == [OverloadedError]
