"""Steering: `Worker.steer` / `Worker.follow_up` delivered at the loop's boundaries."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import (
    ConfigurationError,
    Decision,
    Message,
    PauseState,
    RunStatus,
    Steered,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import Part
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.worker._history import repair
from llm_worker.worker._steering import SKIPPED

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0


class Desk:
    def __init__(self) -> None:
        self.ran: list[str] = []

    @tool
    def book(self, city: str) -> str:
        """Book a hotel."""
        self.ran.append(f"book {city}")
        return f"booked in {city}"

    @tool(effect="read_only", exclusive=True)
    def weather(self, city: str) -> str:
        """The weather (runs alone, after the others)."""
        self.ran.append(f"weather {city}")
        return "clear"


def texts(request: ScriptedRequest) -> list[str]:
    return [m.text for m in request.request.messages if m.role == "user" and m.text]


async def test_a_steer_skips_the_calls_that_did_not_start_and_reaches_the_next_request() -> None:
    desk = Desk()
    seen: list[list[str]] = []

    def first(call: ScriptedRequest) -> ScriptedResponse:
        worker.steer("Actually, Osaka instead.")  # while this answer is being made
        calls: list[Part] = [
            ToolUsePart("c1", "book", {"city": "Kyoto"}),
            ToolUsePart("c2", "weather", {"city": "Kyoto"}),
        ]
        return ScriptedResponse(calls)

    def second(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(texts(call))
        return ScriptedResponse.text("Osaka it is.")

    worker = Worker(ScriptedClient([first, second]), tools=[desk.book, desk.weather])
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("Book Kyoto.") as stream:
            events = [e async for e in stream]
    result = stream.result
    assert result.text == "Osaka it is."
    assert desk.ran == []  # neither call had started: both skipped
    results = result.messages[2].tool_results
    assert [r.content for r in results] == [SKIPPED, SKIPPED] and all(r.is_error for r in results)
    assert seen == [["Book Kyoto.", "Actually, Osaka instead."]]
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "user", "assistant"]
    steered = [e for e in events if isinstance(e, Steered)]
    assert steered == [Steered([Message.user("Actually, Osaka instead.")], "steer")]
    assert repair(worker.history)[1] == 0


async def test_a_call_that_started_finishes_and_the_later_ones_are_skipped() -> None:
    desk = Desk()

    @tool
    def slow_book(city: str) -> str:
        """Book, and the user speaks meanwhile."""
        worker.steer("Stop, wrong city.")
        desk.ran.append(f"slow_book {city}")
        return "booked"

    script = [
        ScriptedResponse(
            [
                ToolUsePart("c1", "slow_book", {"city": "Kyoto"}),
                ToolUsePart("c2", "weather", {"city": "Kyoto"}),  # exclusive: runs after
            ]
        ),
        ScriptedResponse.text("Understood."),
    ]
    worker = Worker(ScriptedClient(script), tools=[slow_book, desk.weather])
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Book Kyoto.")
    booked, weather = result.messages[2].tool_results
    assert booked.content == "booked" and not booked.is_error  # never abandoned
    assert weather.content == SKIPPED
    assert desk.ran == ["slow_book Kyoto"]


async def test_a_steer_during_the_final_answer_makes_the_run_go_on() -> None:
    def final(call: ScriptedRequest) -> ScriptedResponse:
        worker.steer("And in French?")
        return ScriptedResponse.text("Hello.")

    def again(call: ScriptedRequest) -> ScriptedResponse:
        assert texts(call)[-1] == "And in French?"
        return ScriptedResponse.text("Bonjour.")

    worker = Worker(ScriptedClient([final, again]))
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Say hello.")
    assert result.text == "Bonjour." and result.requests == 2


async def test_a_follow_up_waits_for_the_run_to_finish() -> None:
    desk = Desk()
    seen: list[list[str]] = []

    def first(call: ScriptedRequest) -> ScriptedResponse:
        worker.follow_up("Then book Osaka too.")
        return ScriptedResponse([ToolUsePart("c1", "book", {"city": "Kyoto"})])

    def second(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(texts(call))
        return ScriptedResponse.text("Kyoto booked.")

    def third(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(texts(call))
        return ScriptedResponse.text("Osaka booked too.")

    worker = Worker(ScriptedClient([first, second, third]), tools=[desk.book])
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("Book Kyoto.")
    assert desk.ran == ["book Kyoto"]  # a follow-up never cuts a batch short
    assert seen == [["Book Kyoto."], ["Book Kyoto.", "Then book Osaka too."]]
    assert result.text == "Osaka booked too."


async def test_a_steer_queued_before_a_pause_is_delivered_after_the_resume() -> None:
    desk = Desk()

    def ask(ctx: ToolCallContext) -> Pause | None:
        if not ctx.resumed:
            pausing.steer("Use the cheapest hotel.")  # the user speaks, then the run pauses
            return Pause("approve the booking")
        return None

    pausing = Worker(
        ScriptedClient([ScriptedResponse([ToolUsePart("c1", "book", {"city": "Kyoto"})])]),
        tools=[Desk().book],
    )
    pausing.add_before_tool_call_hook(ask)
    with anyio.fail_after(TIMEOUT):
        paused = await pausing.run("Book Kyoto.")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    assert [m.text for m in paused.state.steers] == ["Use the cheapest hotel."]
    assert pausing.queued == ([], [])  # the state carries it now
    state = PauseState.from_json(paused.state.to_json())
    seen: list[list[str]] = []

    def after(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(texts(call))
        return ScriptedResponse.text("Booked the cheapest.")

    resuming = Worker(ScriptedClient([after]), tools=[desk.book])  # another process
    with anyio.fail_after(TIMEOUT):
        done = await resuming.resume(state, decisions={"c1": Decision.approve()})
    assert desk.ran == ["book Kyoto"]  # the person's decision came after the steer: it runs
    assert seen == [["Book Kyoto.", "Use the cheapest hotel."]]
    assert done.text == "Booked the cheapest."


async def test_a_steer_left_by_a_cancelled_run_goes_to_the_next_one() -> None:
    client = ScriptedClient([ScriptedResponse.text("slow " * 200, chunk_size=2, delay=0.001)])
    worker = Worker(client)

    async def read() -> None:
        async with worker.stream("Tell me a story.") as stream:
            async for _ in stream:
                if not worker.queued[0]:
                    worker.steer("Shorter, please.")
                    worker.cancel()

    with anyio.fail_after(TIMEOUT):
        await read()
    assert worker.queued == ([Message.user("Shorter, please.")], [])
    seen: list[list[str]] = []

    def next_run(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(texts(call))
        return ScriptedResponse.text("Short.")

    client.add(next_run)
    with anyio.fail_after(TIMEOUT):
        await worker.run("Go on.")
    assert seen[0][-2:] == ["Go on.", "Shorter, please."]
    assert worker.queued == ([], [])


def test_a_steer_must_be_text_or_messages() -> None:
    worker = Worker(ScriptedClient([]))
    with pytest.raises(ConfigurationError):
        worker.steer([{"role": "user", "content": "hi"}])  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]
    assert worker.queued == ([], [])


def test_an_old_pause_state_without_queues_loads() -> None:
    state = PauseState([Message.user("hi")], at="on_turn_end")
    data = state.to_dict()
    del data["steers"], data["follow_ups"]
    assert PauseState.from_dict(data).steers == []


async def test_a_discarded_pause_leaves_its_steers_to_the_next_run() -> None:
    state = PauseState(
        [Message.user("hi"), Message.assistant("Hello.")],
        at="on_turn_end",
        steers=[Message.user("Be brief.")],
    )
    seen: list[list[str]] = []

    def answer(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(texts(call))
        return ScriptedResponse.text("OK.")

    worker = Worker(ScriptedClient([answer]))
    await worker.discard_pause(state=PauseState.from_json(state.to_json()))
    assert worker.queued == ([Message.user("Be brief.")], [])
    with anyio.fail_after(TIMEOUT):
        await worker.run("Next question.")
    assert seen == [["hi", "Next question.", "Be brief."]]


async def test_a_steer_passes_the_input_guardrails_before_it_is_sent() -> None:
    from llm_worker import GuardrailTripped, InputGuardrailContext, Trip, input_guardrail

    checked: list[str] = []

    @input_guardrail
    def polite(ctx: InputGuardrailContext) -> Trip | None:
        checked.append(ctx.text)
        return Trip("be polite") if "idiot" in ctx.text else None

    desk = Desk()

    def first(call: ScriptedRequest) -> ScriptedResponse:
        worker.steer("You idiot, Osaka!")
        return ScriptedResponse([ToolUsePart("c1", "book", {"city": "Kyoto"})])

    worker = Worker(ScriptedClient([first]), tools=[desk.book], guardrails=[polite])
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped, match="be polite"):
        await worker.run("Book Kyoto.")
    assert checked == ["Book Kyoto.", "You idiot, Osaka!"]
    assert desk.ran == []
    assert "idiot" not in str([m.to_dict() for m in worker.history])
    assert repair(worker.history)[1] == 0
