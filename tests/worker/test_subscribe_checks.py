"""`Worker.subscribe` and `add_hooks` check every method before registering any (issue #28, 11).

An async event method would never run, a method that takes other arguments would fail in the
middle of a stream, a class or a number is no subscriber: each is a `ConfigurationError`
naming the method, and a refused object leaves nothing registered. The base classes
`Subscriber` and `WorkerHooks` register only what a subclass overrides.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from llm_worker import (
    ConfigurationError,
    Decision,
    PauseState,
    RunStatus,
    TextBlockEvent,
    TextDelta,
    ToolUsePart,
    UsageEvent,
    Worker,
    tool,
)
from llm_worker.hooks import (
    Pause,
    Skip,
    Subscriber,
    ToolCallContext,
    TurnEndContext,
    WorkerHooks,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


def answering(*texts: str) -> Worker:
    return Worker(ScriptedClient([ScriptedResponse.text(t) for t in texts]))


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_usage(self, event: UsageEvent) -> None:
        self.seen.append("usage")

    def on_text_complete(self, text: str) -> None:
        self.seen.append(text)

    def on_turn_end(self, turn: int) -> None:
        self.seen.append(f"end {turn}")


class AsyncBlocks(Recorder):
    async def on_text_block(self, scope: None, event: TextBlockEvent) -> None:
        self.seen.append("never")


class AsyncTurnStart(Recorder):
    async def on_turn_start(self, turn: int) -> None:
        self.seen.append("never")


class AsyncGeneratorComplete(Recorder):
    async def on_text_complete(self, text: str) -> AsyncIterator[str]:  # type: ignore[override]
        yield text


class OneArgumentBlocks(Recorder):
    def on_text_block(self, event: TextBlockEvent) -> None:  # forgot the scope
        self.seen.append("never")


class ScopeNeedsArguments(Recorder):
    def new_text_block_scope(self, size: int) -> list[str]:
        return [] * size

    def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:
        self.seen.append("never")


class AsyncCallable:
    async def __call__(self, event: UsageEvent) -> None:
        return None


class AsyncCallableUsage(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.on_usage = AsyncCallable()  # type: ignore[assignment]


class AsyncPartialTurnEnd(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.on_turn_end = functools.partial(self._ended, "tag")  # type: ignore[assignment]

    async def _ended(self, tag: str, turn: int) -> None:
        return None


class NotCallable(Recorder):
    on_status = "verbose"


@pytest.mark.parametrize(
    ("subscriber", "method"),
    [
        (AsyncBlocks(), "on_text_block is async"),
        (AsyncTurnStart(), "on_turn_start is async"),
        (AsyncGeneratorComplete(), "on_text_complete is async"),
        (OneArgumentBlocks(), "on_text_block must take two arguments"),
        (ScopeNeedsArguments(), "new_text_block_scope must take no argument"),
        (NotCallable(), "on_status is str, not a method"),
        (AsyncCallableUsage(), "on_usage is async"),
        (AsyncPartialTurnEnd(), "on_turn_end is async"),
        (Recorder, "not the class Recorder"),
    ],
)
async def test_a_refused_subscriber_leaves_nothing_registered(subscriber: Any, method: str) -> None:
    worker = answering("hello")
    with pytest.raises(ConfigurationError, match=method):
        worker.subscribe(subscriber)
    with anyio.fail_after(TIMEOUT):
        await worker.run("hi")
    if isinstance(subscriber, Recorder):
        assert subscriber.seen == []  # its plain methods were not registered either


@pytest.mark.parametrize("thing", [42, "text", object(), None])
def test_an_object_without_event_methods_is_refused(thing: object) -> None:
    with pytest.raises(ConfigurationError, match="has none of the methods"):
        answering().subscribe(thing)


async def test_none_counts_as_no_method() -> None:
    class Quiet(Recorder):
        on_status = None

    worker = answering("hello")
    quiet = Quiet()
    worker.subscribe(quiet)
    with anyio.fail_after(TIMEOUT):
        await worker.run("hi")
    assert quiet.seen == ["usage", "hello", "end 0"]


class Texts(Subscriber[list[str]]):
    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.turns: list[str] = []

    def new_text_block_scope(self) -> list[str]:
        return []

    def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:
        if isinstance(event, TextDelta):
            scope.append(event.text)
        elif event.__class__.__name__ == "TextBlockStop":
            self.blocks.append("".join(scope))

    def on_turn_start(self, turn: int) -> None:
        self.turns.append(f"start {turn}")

    def on_turn_end(self, turn: int) -> None:
        self.turns.append(f"end {turn}")


@tool(effect="side_effect")
def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("approve?")


async def test_a_subscriber_class_follows_a_run_resumed_from_json_in_a_fresh_worker() -> None:
    first = Worker(
        ScriptedClient([ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})])]),
        tools=[send],
    )
    first.add_before_tool_call_hook(approval)
    with anyio.fail_after(TIMEOUT):
        paused = await first.run("send it")
    assert paused.state is not None
    saved = paused.state.to_json()
    fresh = Worker(ScriptedClient([ScriptedResponse.text("Sent to Ana.")]), tools=[send])
    texts = Texts()
    fresh.subscribe(texts)
    with anyio.fail_after(TIMEOUT):
        result = await fresh.resume(
            PauseState.from_json(saved), decisions={"c1": Decision.approve()}
        )
    assert result.status is RunStatus.FINISHED
    assert texts.blocks == ["Sent to Ana."]
    assert texts.turns == ["start 0", "end 0"]


def test_a_subscriber_class_that_overrides_nothing_is_refused() -> None:
    class Nothing(Subscriber):
        pass

    with pytest.raises(ConfigurationError, match="has none of the methods"):
        answering().subscribe(Nothing())


# -- add_hooks ---------------------------------------------------------------------------------


class Ends:
    def __init__(self) -> None:
        self.ended = 0

    def on_turn_end(self, ctx: TurnEndContext) -> None:
        self.ended += 1


class BadBefore(Ends):
    def before_tool_call(self) -> None:  # forgot the context
        return None


class GeneratorAbort(Ends):
    async def on_abort(self, ctx: object) -> AsyncIterator[None]:
        yield None


@pytest.mark.parametrize(
    ("hooks", "problem"),
    [
        (BadBefore(), "before_tool_call must take one argument"),
        (GeneratorAbort(), "on_abort is an async generator"),
        (Ends, "not the class Ends"),
    ],
)
async def test_refused_hooks_leave_nothing_registered(hooks: Any, problem: str) -> None:
    worker = answering("hello")
    with pytest.raises(ConfigurationError, match=problem):
        worker.add_hooks(hooks)
    with anyio.fail_after(TIMEOUT):
        await worker.run("hi")
    if isinstance(hooks, Ends):
        assert hooks.ended == 0


def test_single_hooks_are_checked_at_registration_too() -> None:
    async def generator(ctx: ToolCallContext) -> AsyncIterator[None]:
        yield None

    def two(ctx: ToolCallContext, extra: int) -> None:
        return None

    worker = answering()
    with pytest.raises(ConfigurationError, match="async generator"):
        worker.add_before_tool_call_hook(generator)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must take one argument"):
        worker.add_before_tool_call_hook(two)  # type: ignore[arg-type]


async def test_a_hooks_class_registers_only_what_it_overrides_through_a_pause() -> None:
    class Guard(WorkerHooks):
        def __init__(self) -> None:
            self.asked: list[tuple[str, bool]] = []

        def before_tool_call(self, ctx: ToolCallContext) -> Skip | Pause | None:
            self.asked.append((ctx.call.id, ctx.resumed))
            return None if ctx.resumed else Pause("approve?")

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "send", {"to": "ana"})])])
    worker = Worker(client, tools=[send])
    worker.add_hooks(Guard())
    hooks = worker._cfg.hooks  # pyright: ignore[reportPrivateUsage]
    assert [len(hooks.before_tool_call), len(hooks.after_tool_call), len(hooks.on_abort)] == [
        1,
        0,
        0,
    ]
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("send")
    assert paused.state is not None
    fresh = Worker(ScriptedClient([ScriptedResponse.text("sent")]), tools=[send])
    guard = Guard()
    fresh.add_hooks(guard)
    with anyio.fail_after(TIMEOUT):
        result = await fresh.resume(PauseState.from_json(paused.state.to_json()))
    assert result.status is RunStatus.FINISHED
    assert guard.asked == [("c1", True)]


def test_a_hooks_class_that_overrides_nothing_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="none of the hook methods"):
        answering().add_hooks(WorkerHooks())
