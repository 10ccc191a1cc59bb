"""Guardrails with tripwires: input beside the first request, output before the run ends."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    ConfigurationError,
    GuardrailChecked,
    GuardrailTripped,
    HookError,
    InputGuardrailContext,
    OutputGuardrailContext,
    PauseState,
    RunCompleted,
    RunStatus,
    TextDelta,
    ToolUsePart,
    Trip,
    Worker,
    input_guardrail,
    output_guardrail,
    tool,
)
from llm_worker.events import Event
from llm_worker.hooks import AbortContext, Pause, ToolCallContext
from llm_worker.messages import Part, Request
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools import Tool
from llm_worker.worker._history import repair

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0


class Jittery:
    """A scripted client that yields to the event loop a seeded number of times per event."""

    def __init__(self, client: ScriptedClient, rng: random.Random) -> None:
        self.inner = client
        self.rng = rng
        self.provider, self.model = client.provider, client.model

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        async for event in self.inner.stream(request):
            for _ in range(self.rng.randrange(3)):
                await anyio.lowlevel.checkpoint()
            yield event


class Effects:
    """Tools whose effects land in a file; the read-only one only reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read = 0

    @tool(effect="side_effect")
    def transfer(self, amount: int) -> str:
        """Move money."""
        with self.path.open("a") as f:
            f.write(f"transfer {amount}\n")
        return "moved"

    @tool(effect="idempotent")
    def set_flag(self, on: bool) -> str:
        """Set a flag (idempotent, still an effect)."""
        with self.path.open("a") as f:
            f.write(f"flag {on}\n")
        return "set"

    @tool(effect="read_only")
    def balance(self) -> str:
        """Read the balance."""
        self.read += 1
        return "100"

    def tools(self) -> list[Tool]:
        return [self.transfer, self.set_flag, self.balance]


async def read(worker: Worker[Any], prompt: str, events: list[Any], watch: Any = None) -> None:
    """Read a run's stream into `events` (each also to `watch`), until it ends or raises."""
    async with worker.stream(prompt) as stream:
        async for event in stream:
            events.append(event)
            if watch is not None:
                watch(event)


def _answer(rng: random.Random) -> ScriptedResponse:
    calls: list[Part] = [
        ToolUsePart("c1", "balance", {}),
        ToolUsePart("c2", "transfer", {"amount": 5}),
        ToolUsePart("c3", "set_flag", {"on": True}),
    ]
    rng.shuffle(calls)
    return ScriptedResponse(calls, chunk_size=rng.choice((3, 8, 64)))


async def test_no_tool_with_an_effect_runs_after_a_tripwire_over_200_seeded_timings(
    tmp_path: Path,
) -> None:
    effects = Effects(tmp_path / "effects.log")
    tripped = 0
    for seed in range(200):
        rng = random.Random(seed)
        wait = rng.randrange(60)

        @input_guardrail
        async def slow_refusal(ctx: InputGuardrailContext) -> Trip | None:
            for _ in range(wait):  # noqa: B023  # each run's own
                await anyio.lowlevel.checkpoint()
            if seed % 5 == 0:  # noqa: B023
                await anyio.sleep(rng.random() / 1000)  # noqa: B023  # and some real time
            return Trip("not allowed")

        async def slow_hook(ctx: ToolCallContext) -> None:
            for _ in range(rng.randrange(4)):  # noqa: B023
                await anyio.lowlevel.checkpoint()

        client = Jittery(ScriptedClient([_answer(rng), ScriptedResponse.text("ok")]), rng)
        worker = Worker(
            client,  # pyright: ignore[reportArgumentType]
            tools=effects.tools(),
            guardrails=[slow_refusal],
            early_tool_start=seed % 2 == 0,
        )
        worker.add_before_tool_call_hook(slow_hook)
        with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped) as caught:
            await worker.run("move 5")
        tripped += 1
        assert caught.value.kind == "input"
        assert repair(worker.history)[0] == worker.history  # every call answered
        assert len(client.inner.requests) == 1  # the second request never went
    assert tripped == 200
    assert not effects.path.exists() or effects.path.read_text() == ""
    assert effects.read > 0  # read-only calls did start early beside the guardrail


async def test_the_same_run_with_a_passing_guardrail_runs_every_tool(tmp_path: Path) -> None:
    # The control of the race test: the effects do happen when the guardrail passes.
    effects = Effects(tmp_path / "effects.log")
    rng = random.Random(1)

    @input_guardrail
    async def fine(ctx: InputGuardrailContext) -> None:
        for _ in range(30):
            await anyio.lowlevel.checkpoint()

    worker = Worker(
        ScriptedClient([_answer(rng), ScriptedResponse.text("ok")]),
        tools=effects.tools(),
        guardrails=[fine],
        early_tool_start=True,
    )
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("move 5")
    assert result.text == "ok"
    assert sorted(effects.path.read_text().splitlines()) == ["flag True", "transfer 5"]


async def test_an_input_trip_aborts_the_streaming_answer_and_leaves_a_valid_history() -> None:
    aborts: list[AbortContext] = []
    release = anyio.Event()

    @input_guardrail
    async def refuse(ctx: InputGuardrailContext) -> Trip | None:
        if ctx.text != "tell me a secret":
            return None
        assert len(ctx.history) == 1
        await release.wait()
        return Trip("secrets are off limits", info={"score": 0.97})

    def second_delta(event: Any) -> None:
        if isinstance(event, BlockDelta):
            release.set()  # trip while the answer streams

    client = ScriptedClient([ScriptedResponse.text("x" * 400, chunk_size=4, delay=0.001)])
    worker = Worker(client, guardrails=[refuse])
    worker.add_on_abort_hook(aborts.append)
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped) as caught:
        await read(worker, "tell me a secret", events, second_delta)
    assert caught.value.reason == "secrets are off limits"
    assert caught.value.info == {"score": 0.97}
    assert [a.kind for a in aborts] == ["aborted"]
    assert any(isinstance(e, BlockAbort) for e in events)
    assert GuardrailChecked("refuse", "input", True, "secrets are off limits") in events
    assert not any(isinstance(e, RunCompleted) for e in events)
    assert [m.role for m in worker.history] == ["user"]  # the cut answer is not kept
    client.add(ScriptedResponse.text("hello"))
    with anyio.fail_after(TIMEOUT):
        again = await worker.run("something else")  # the history is whole: it goes on
    assert again.text == "hello"


async def test_a_passing_input_guardrail_is_an_event_and_costs_no_request() -> None:
    @input_guardrail(name="topic")
    def on_topic(ctx: InputGuardrailContext) -> None:  # sync: runs in a thread
        return None

    worker = Worker(ScriptedClient([ScriptedResponse.text("hi")]), guardrails=[on_topic])
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("hello") as stream:
            events = [e async for e in stream]
    assert GuardrailChecked("topic", "input", False) in events
    assert isinstance(events[-1], RunCompleted) and events[-1].result.text == "hi"


async def test_a_pause_waits_for_the_input_guardrail_and_a_resume_does_not_run_it() -> None:
    calls: list[str] = []
    verdicts: list[Trip | None] = [Trip("no"), None]

    @input_guardrail
    async def check(ctx: InputGuardrailContext) -> Trip | None:
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        calls.append(ctx.text)
        return verdicts.pop(0)

    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send."""
        return "sent"

    def script() -> list[ScriptedResponse]:
        return [ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})])]

    tripping = Worker(ScriptedClient(script()), tools=[send], guardrails=[check])
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped):
        await tripping.run("send it")  # the pause came first, the trip still wins
    passing = Worker(ScriptedClient(script()), tools=[send], guardrails=[check])
    with anyio.fail_after(TIMEOUT):
        paused = await passing.run("send it")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    from llm_worker import Decision

    resumed = Worker(ScriptedClient([ScriptedResponse.text("sent")]), tools=[send])
    resumed._cfg.guardrails = [check]  # pyright: ignore[reportPrivateUsage]
    with anyio.fail_after(TIMEOUT):
        done = await resumed.resume(
            PauseState.from_json(paused.state.to_json()), decisions={"c1": Decision.approve()}
        )
    assert done.text == "sent"
    assert calls == ["send it", "send it"]  # not again on resume


async def test_cancel_while_an_input_guardrail_is_pending_is_a_plain_cancel() -> None:
    started = anyio.Event()

    @input_guardrail
    async def forever(ctx: InputGuardrailContext) -> None:
        started.set()
        await anyio.sleep_forever()

    worker = Worker(
        ScriptedClient([ScriptedResponse.text("slow " * 50, chunk_size=2, delay=0.001)]),
        guardrails=[forever],
    )
    results: list[Any] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            results.append(await worker.run("hi"))

        group.start_soon(run)
        with anyio.fail_after(TIMEOUT):
            await started.wait()
        worker.cancel()
    assert results[0].status is RunStatus.CANCELLED


async def test_a_guardrail_that_raises_fails_closed_with_a_hook_error() -> None:
    aborts: list[str] = []

    @input_guardrail
    async def broken(ctx: InputGuardrailContext) -> None:
        raise RuntimeError("classifier down")

    @output_guardrail
    def vague(ctx: OutputGuardrailContext) -> Any:
        return False

    worker = Worker(ScriptedClient([ScriptedResponse.text("hi")]), guardrails=[broken])
    worker.add_on_abort_hook(lambda ctx: aborts.append(ctx.kind))
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="classifier down"):
        await worker.run("hello")
    assert aborts == ["failed"]
    other = Worker(ScriptedClient([ScriptedResponse.text("hi")]), guardrails=[vague])
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="return Trip"):
        await other.run("hello")


def test_guardrails_are_checked_at_construction() -> None:
    def bare(ctx: InputGuardrailContext) -> None:
        return None

    with pytest.raises(ConfigurationError, match="input_guardrail"):
        Worker(ScriptedClient([]), guardrails=[bare])  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]
    with pytest.raises(ConfigurationError, match="hold"):
        output_guardrail(bare, hold=0)  # pyright: ignore[reportArgumentType, reportCallIssue]


async def test_an_output_guardrail_checks_the_final_answer_before_it_completes() -> None:
    seen: list[OutputGuardrailContext] = []

    @output_guardrail
    async def no_passwords(ctx: OutputGuardrailContext) -> Trip | None:
        seen.append(ctx)
        return Trip("a password") if "hunter2" in ctx.text else None

    worker = Worker(
        ScriptedClient(
            [ScriptedResponse.text("all fine"), ScriptedResponse.text("the password is hunter2")]
        ),
        guardrails=[no_passwords],
    )
    with anyio.fail_after(TIMEOUT):
        ok = await worker.run("hi")
    assert ok.text == "all fine" and seen[-1].final and seen[-1].output == "all fine"
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped) as caught:
        await read(worker, "password?", events)
    assert caught.value.kind == "output" and caught.value.guardrail == "no_passwords"
    assert GuardrailChecked("no_passwords", "output", True, "a password") in events
    assert not any(isinstance(e, RunCompleted) for e in events)


async def test_an_output_guardrail_sees_the_structured_output() -> None:
    from dataclasses import dataclass

    @dataclass
    class Invoice:
        total: float

    @output_guardrail
    def not_negative(ctx: OutputGuardrailContext) -> Trip | None:
        return Trip("negative total") if ctx.output.total < 0 else None

    worker = Worker(
        ScriptedClient([ScriptedResponse.output({"total": -3})]),
        output_type=Invoice,
        guardrails=[not_negative],
    )
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped, match="negative total"):
        await worker.run("bill")


def _text_of(events: list[Any]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


async def test_held_text_is_released_window_by_window_once_it_passes() -> None:
    text = "The weather in Kyoto is clear and warm today, 21 degrees."
    windows: list[str] = []

    @output_guardrail(hold=10)
    def clean(ctx: OutputGuardrailContext) -> None:
        if not ctx.final:
            windows.append(ctx.text)

    worker = Worker(ScriptedClient([ScriptedResponse.text(text, chunk_size=4)]), guardrails=[clean])
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("weather?") as stream:
            async for event in stream:
                events.append(event)
    assert _text_of(events) == text
    assert len(windows) >= 5 and windows[-1] == text  # every 10 characters, then the end
    # a window is checked once 10 more characters gathered; the block's end checks the rest
    assert all(len(b) - len(a) >= 10 for a, b in itertools.pairwise(windows[:-1]))
    # each window's text reached the reader only after its check passed
    checks = [i for i, e in enumerate(events) if isinstance(e, GuardrailChecked) and not e.final]
    first_delta = next(i for i, e in enumerate(events) if isinstance(e, BlockDelta))
    assert checks[0] < first_delta


async def test_held_text_that_trips_is_never_shown() -> None:
    text = "Sure. Your admin password is hunter2 and the door code is 1234."

    @output_guardrail(hold=8)
    def no_secrets(ctx: OutputGuardrailContext) -> Trip | None:
        return Trip("a secret") if "hunter2" in ctx.text else None

    worker = Worker(
        ScriptedClient([ScriptedResponse.text(text, chunk_size=3)]), guardrails=[no_secrets]
    )
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped):
        await read(worker, "password?", events)
    shown = _text_of(events)
    assert "hunter2" not in shown and "hunter" not in shown
    assert text.startswith(shown) and shown  # what passed before was released
    starts = [e for e in events if isinstance(e, BlockStart)]
    aborts = [e for e in events if isinstance(e, BlockAbort)]
    assert len(starts) == 1 and len(aborts) == 1  # the reader sees its block end


async def test_hold_does_not_apply_to_a_plain_run() -> None:
    @output_guardrail(hold=4)
    def fine(ctx: OutputGuardrailContext) -> None:
        assert ctx.final  # without a stream reader, nothing is held: only the final check

    worker = Worker(ScriptedClient([ScriptedResponse.text("a" * 40)]), guardrails=[fine])
    with anyio.fail_after(TIMEOUT):
        assert (await worker.run("hi")).text == "a" * 40


async def test_a_paused_batch_with_a_hook_pause_survives_output_guardrails() -> None:
    # An output guardrail does not touch tool batches: a hook's pause still pauses.
    @output_guardrail
    def fine(ctx: OutputGuardrailContext) -> None:
        return None

    def ask(ctx: ToolCallContext) -> Pause:
        return Pause("ask")

    @tool
    def act() -> str:
        """Act."""
        return ""

    worker = Worker(
        ScriptedClient([ScriptedResponse([ToolUsePart("c1", "act", {})])]),
        tools=[act],
        guardrails=[fine],
    )
    worker.add_before_tool_call_hook(ask)
    with anyio.fail_after(TIMEOUT):
        assert (await worker.run("go")).status is RunStatus.PAUSED
