"""`Worker.stream` under trio as under asyncio: the same events, result, cancel, errors, pause.

Each scenario runs once under asyncio (the run lends its reader the answer) and once under
trio (the run reads its answer itself, `worker/_stream_trio.py`); the two must give the same
events. The HTTP servers run on asyncio in a thread of their own, so the test's loop may be trio.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
import sniffio
import trio
import trio.lowlevel
from pydantic import BaseModel, field_validator

from llm_worker import (
    BlockAbort,
    BlockDelta,
    PauseState,
    RunCompleted,
    RunEvent,
    RunStatus,
    RunStream,
    TextDelta,
    TextPart,
    ToolResultReady,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.errors import HookError
from llm_worker.events import PingEvent
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import Part
from llm_worker.providers import LLMClient, OpenAIChatClient
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedResponse,
    WireResponse,
    WireServer,
)
from llm_worker.timeline import TextBlockStop
from llm_worker.worker._stream import BUFFERED_MAX

T = TypeVar("T")
S = TypeVar("S", bound=WireServer)
TIMEOUT = 10.0


def both(scenario: Callable[[], Awaitable[T]]) -> T:
    """`scenario`'s outcome under asyncio, checked equal to its outcome under trio."""
    on_asyncio = asyncio.run(scenario())  # pyright: ignore[reportArgumentType]
    on_trio = trio.run(scenario)
    assert on_trio == on_asyncio
    return on_trio


def summary(events: list[RunEvent[Any]]) -> list[str]:
    """The events as text (a result's too), to compare one loop's with the other's."""
    return ["PingEvent" if isinstance(e, PingEvent) else repr(e) for e in events]  # its clock


def text_of(events: list[RunEvent[Any]]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def live_tasks() -> int:
    """The tasks of the running loop (under trio, every task under its root, system ones too)."""
    if sniffio.current_async_library() == "asyncio":
        return len(asyncio.all_tasks())
    root = trio.lowlevel.current_root_task()
    assert root is not None
    count, nurseries = 0, list(root.child_nurseries)
    while nurseries:
        for task in nurseries.pop().child_tasks:
            count += 1
            nurseries.extend(task.child_nurseries)
    return count


@contextmanager
def in_a_thread(server: S) -> Iterator[S]:
    """`server` run by asyncio in a thread: the test's own loop may be trio."""
    ready = threading.Event()
    box: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def serve() -> None:
        async with server:
            stop = asyncio.Event()
            box.append((asyncio.get_running_loop(), stop))
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        assert ready.wait(TIMEOUT), "the server did not start"
        yield server
    finally:
        if box:
            loop, stop = box[0]
            loop.call_soon_threadsafe(stop.set)
        thread.join(TIMEOUT)
        assert not thread.is_alive()


async def read_into(stream: RunStream[Any], events: list[RunEvent[Any]]) -> None:
    """Read `stream` to its end (or its error) in `async with`, its events into `events`."""
    async with stream:
        async for event in stream:
            events.append(event)


# -- the events and the result -----------------------------------------------------------------


class City(BaseModel):
    name: str
    people: int


def test_the_text_events_and_the_result_are_those_of_asyncio() -> None:
    async def scenario() -> tuple[list[str], str, bool]:
        worker = Worker(ScriptedClient([ScriptedResponse.text("hello there", chunk_size=2)]))
        before = live_tasks()
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("hi") as stream:
                events = [event async for event in stream]
        assert isinstance(events[-1], RunCompleted)
        assert stream.result is events[-1].result
        assert text_of(events) == stream.result.text == "hello there"
        return summary(events), stream.result.status.value, live_tasks() == before

    events, status, ended = both(scenario)
    assert status == "finished"
    assert ended  # the run's task is over once its reader has the end
    assert len(events) > 6


def test_a_structured_output_keeps_its_type_and_its_partials() -> None:
    async def scenario() -> tuple[list[str], City]:
        answer = ScriptedResponse.output(City(name="Oslo", people=700_000), chunk_size=4)
        worker = Worker(ScriptedClient([answer]), output_type=City, output_partial_interval=0)
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("hi") as stream:
                events = [event async for event in stream]
        output = stream.result.output
        assert type(output) is City
        return summary(events), output

    events, output = both(scenario)
    assert output == City(name="Oslo", people=700_000)
    assert any(e.startswith("OutputPartial(") for e in events)


def test_parallel_tools_run_together_and_their_events_are_those_of_asyncio() -> None:
    async def scenario() -> list[str]:
        started = 0
        both_in = anyio.Event()

        @tool
        async def lookup(key: str) -> str:
            """Look a key up."""
            nonlocal started
            started += 1
            if started == 2:
                both_in.set()
            await both_in.wait()  # each call waits for the other: they run at once
            return key.upper()

        calls: list[Part] = [
            ToolUsePart("c1", "lookup", {"key": "a"}),
            ToolUsePart("c2", "lookup", {"key": "b"}),
        ]
        client = ScriptedClient(
            [ScriptedResponse(calls, chunk_size=3), ScriptedResponse.text("ok")]
        )
        worker = Worker(client, tools=[lookup])
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("go") as stream:
                events = [event async for event in stream]
        results = [e.result.content for e in events if isinstance(e, ToolResultReady)]
        assert results == ["A", "B"]
        assert stream.result.text == "ok"
        return summary(events)

    both(scenario)


def test_a_sub_agents_events_reach_the_reader_paced_as_under_asyncio() -> None:
    # A sub-agent's answer is read in its own task and waits while the reader has
    # BUFFERED_MAX events unread (`Channel.drained`): a trio channel's wait, here.
    async def scenario() -> tuple[list[str], int, bool]:
        child = ScriptedResponse([TextPart("c" * 3000)], chunk_size=1)
        helper = Worker(ScriptedClient([child]), name="helper")
        call = ToolUsePart("c1", "helper", {"input": "go"})
        answers = [ScriptedResponse([call]), ScriptedResponse.text("done")]
        tools = [helper.as_tool(name="helper", description="Helps.")]
        worker = Worker(ScriptedClient(answers), tools=tools)
        events: list[RunEvent[Any]] = []
        unread = 0
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("go") as stream:
                async for event in stream:
                    events.append(event)
                    if len(events) % 200 == 0:
                        await anyio.wait_all_tasks_blocked()  # the child runs ahead, and waits
                        buffer = stream._channel.buffer  # pyright: ignore[reportPrivateUsage]
                        unread = max(unread, len(buffer))
        assert stream.result.text == "done"
        deltas = [e for e in events if isinstance(e, BlockDelta) and e.path]  # the child's
        return summary(events), len(deltas), BUFFERED_MAX <= unread <= BUFFERED_MAX + 8

    _, deltas, paced = both(scenario)
    assert deltas == 3000
    assert paced  # the child ran ahead as far as the bound, and no further


@pytest.mark.parametrize("how", ["worker.cancel", "aclose from another task"])
def test_a_stream_stopped_while_parallel_tools_run_cancels_them(how: str) -> None:
    async def scenario() -> tuple[list[str], list[str], str, list[str]]:
        started: list[str] = []

        @tool
        async def slow(key: str) -> str:
            """Wait a minute."""
            started.append(key)
            await anyio.sleep(60)
            return key

        calls: list[Part] = [
            ToolUsePart("c1", "slow", {"key": "a"}),
            ToolUsePart("c2", "slow", {"key": "b"}),
        ]
        answers = [ScriptedResponse(calls), ScriptedResponse.text("after")]
        worker = Worker(ScriptedClient(answers), tools=[slow])
        aborts: list[str] = []
        worker.add_on_abort_hook(lambda ctx: aborts.append(ctx.kind))
        stream = worker.stream("go")
        events: list[RunEvent[Any]] = []
        ended: list[str] = []

        async def read() -> None:
            async for event in stream:
                events.append(event)
            ended.append(
                stream.result.status.value
                if events[-1:] and isinstance(events[-1], RunCompleted)
                else "closed"
            )

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(read)
                while len(started) < 2:
                    await anyio.wait_all_tasks_blocked()
                if how == "worker.cancel":
                    worker.cancel()
                else:
                    await stream.aclose()
            again = await worker.run("again")
        return summary(events)[:-1], aborts, again.text, ended

    _, aborts, again, ended = both(scenario)
    assert aborts == ["cancelled"] and again == "after"
    assert ended == (["cancelled"] if how == "worker.cancel" else ["closed"])


# -- cancel, close, drop -----------------------------------------------------------------------


def chunk(text: str) -> bytes:
    body = {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Trickle:
    """An HTTP answer that trickles forever, and says (in any thread) when it was closed."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    async def body(self) -> AsyncGenerator[bytes]:
        try:
            for n in range(1000):  # ten seconds at most
                yield chunk(f"w{n} ")
                await asyncio.sleep(0.01)
        finally:
            self.closed.set()


@pytest.mark.parametrize("how", ["break in async with", "aclose", "reader cancelled"])
def test_a_stream_stopped_mid_answer_ends_the_run_and_closes_its_http_stream(how: str) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        trickle = Trickle()
        server = WireServer(
            [
                WireResponse(stream=trickle.body()),
                WireResponse(chunk("again") + b"data: [DONE]\n\n"),
            ]
        )
        with in_a_thread(server):
            client = OpenAIChatClient(model="m", base_url=server.base_url + "/v1", api_key="k")
            worker = Worker(client)
            aborts: list[str] = []
            worker.add_on_abort_hook(lambda ctx: aborts.append(ctx.kind))
            before = live_tasks()
            events: list[RunEvent[Any]] = []
            with anyio.fail_after(TIMEOUT):
                await stop_mid_answer(worker, how, events)
                assert live_tasks() == before  # the run's task is over
                closed = await anyio.to_thread.run_sync(trickle.closed.wait, TIMEOUT)
                assert closed, "the HTTP stream was left open"
                again = await worker.run("again")  # the Worker is free
            await client.aclose()
        assert again.text == "again"
        assert text_of(events) == "w0 w1 "
        return summary(events), aborts

    events, aborts = both(scenario)
    assert aborts == ["cancelled"]
    assert events[-1].startswith("BlockDelta(")


async def stop_mid_answer(worker: Worker, how: str, into: list[RunEvent[Any]]) -> None:
    """Read `worker`'s stream until its second delta, then stop reading as `how` says."""
    if how == "break in async with":
        async with worker.stream("go") as stream:
            async for event in stream:
                into.append(event)
                if text_of(into) == "w0 w1 ":
                    break
    elif how == "aclose":
        stream = worker.stream("go")
        async for event in stream:
            into.append(event)
            if text_of(into) == "w0 w1 ":
                break
        await stream.aclose()
    else:
        with anyio.CancelScope() as scope:
            async for event in worker.stream("go"):
                into.append(event)
                if text_of(into) == "w0 w1 ":
                    scope.cancel()  # lands in the next read


def test_a_stream_dropped_unclosed_lets_its_run_end_alone_and_frees_the_worker() -> None:
    async def scenario() -> tuple[list[str], str, str]:
        done = anyio.Event()
        answers = [ScriptedResponse([TextPart("abcdefgh")], chunk_size=1)]
        worker = Worker(ScriptedClient([*answers, ScriptedResponse.text("next")]))
        worker.timeline.on_text_block(lambda e: done.set() if type(e) is TextBlockStop else None)
        before = live_tasks()
        stream = worker.stream("go")
        events: list[RunEvent[Any]] = []
        with anyio.fail_after(TIMEOUT):
            async for event in stream:  # no `async with`, no aclose
                events.append(event)
                if text_of(events):
                    break
            del stream
            gc.collect()
            await done.wait()  # the run read its answer to the end alone
            await anyio.wait_all_tasks_blocked()
            assert live_tasks() == before  # and then ended
            again = await worker.run("again")
        return summary(events), again.text, text_of(events)

    _, again, read = both(scenario)
    assert (again, read) == ("next", "a")


# -- errors ------------------------------------------------------------------------------------


def test_a_failing_hook_reaches_the_reader_typed_after_the_events_before_it() -> None:
    async def scenario() -> tuple[list[str], str, str]:
        async def broken(ctx: ToolCallContext) -> None:
            raise RuntimeError("hook bug")

        @tool
        async def send(to: str) -> str:
            """Send."""
            return to

        calls = [TextPart("sending"), ToolUsePart("c1", "send", {"to": "ana"})]
        worker = Worker(ScriptedClient([ScriptedResponse(calls, chunk_size=2)]), tools=[send])
        worker.add_before_tool_call_hook(broken)
        events: list[RunEvent[Any]] = []
        with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="hook bug") as raised:
            await read_into(worker.stream("go"), events)
        assert isinstance(raised.value.__cause__, RuntimeError)
        return summary(events), text_of(events), type(raised.value).__name__

    events, text, _ = both(scenario)
    assert text == "sending"
    kinds = [e.partition("(")[0] for e in events]
    assert "ToolCallComplete" in kinds and "ToolResultReady" not in kinds


def test_a_handler_failing_mid_answer_follows_the_events_before_it() -> None:
    async def scenario() -> tuple[list[str], str]:
        worker = Worker(ScriptedClient([ScriptedResponse([TextPart("abcdefgh")], chunk_size=1)]))

        def fragile(event: object) -> None:
            if isinstance(event, TextDelta) and event.text == "e":
                raise ValueError("handler bug")

        worker.timeline.on_text_block(fragile)
        events: list[RunEvent[Any]] = []
        with anyio.fail_after(TIMEOUT), pytest.raises(ValueError, match="handler bug"):
            await read_into(worker.stream("go"), events)
        assert [e.index for e in events if isinstance(e, BlockAbort)] == [0]
        return summary(events), text_of(events)

    _, text = both(scenario)
    assert text == "abcd"


class Note(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def _no_secrets(cls, value: str) -> str:
        if "secret" in value:
            raise RuntimeError("validator bug")  # not a ValueError: pydantic lets it through
        return value


def test_an_error_after_the_reader_had_the_event_comes_after_that_event() -> None:
    # The partial output's check runs once the event went to the reader's channel.
    answer = '{"text": "' + "x" * 300 + ' secret"}'

    async def scenario() -> tuple[list[str], str]:
        answers = [ScriptedResponse.text(answer, chunk_size=100)]
        worker = Worker(ScriptedClient(answers), output_type=Note)
        events: list[RunEvent[Any]] = []
        with anyio.fail_after(TIMEOUT), pytest.raises(RuntimeError, match="validator bug"):
            await read_into(worker.stream("go"), events)
        return summary(events), text_of(events)

    events, text = both(scenario)
    assert text == answer  # the event that failed the check was read, then the error
    assert not any(e.startswith("OutputPartial(") and "secret" in e for e in events)


# -- pause and resume --------------------------------------------------------------------------


@pytest.mark.parametrize("wire", ["scripted", "anthropic"])
def test_pause_then_resume_stream_from_json_in_a_fresh_worker(wire: str) -> None:
    async def ask(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("approve")

    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        await anyio.lowlevel.checkpoint()
        return a + b

    script = [
        ScriptedResponse([ToolUsePart("c1", "add", {"a": 1, "b": 2})], chunk_size=3),
        ScriptedResponse.text("three", chunk_size=2),
    ]

    async def pause_and_resume(first: LLMClient, then: LLMClient) -> tuple[list[str], ...]:
        worker = Worker(first, tools=[add])
        worker.add_before_tool_call_hook(ask)
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("go") as stream:
                paused = [event async for event in stream]
        assert stream.result.status is RunStatus.PAUSED and stream.result.state is not None
        state = PauseState.from_json(stream.result.state.to_json())
        fresh = Worker(then, tools=[add])
        fresh.add_before_tool_call_hook(ask)
        with anyio.fail_after(TIMEOUT):
            async with fresh.resume_stream(state) as resumed:
                events = [event async for event in resumed]
        assert resumed.result.status is RunStatus.FINISHED
        assert resumed.result.text == "three"
        results = [e.result.content for e in events if isinstance(e, ToolResultReady)]
        assert results == ["3"]
        return summary(paused)[:-1], summary(events)[:-1]  # RunCompleted: the runs' own ids

    async def scenario() -> tuple[list[str], ...]:
        if wire == "scripted":
            return await pause_and_resume(ScriptedClient(script[:1]), ScriptedClient(script[1:]))
        with in_a_thread(ScriptedModelServer("anthropic", script)) as server:
            async with server.client() as first, server.client() as then:
                return await pause_and_resume(first, then)

    paused, resumed = both(scenario)
    assert "ToolResultReady" in "".join(resumed)  # the paused call ran on resume
    assert paused[-1].startswith("TurnEnded(") and "ToolResultReady" not in "".join(paused)


# -- bounded memory ----------------------------------------------------------------------------


def test_a_long_answer_read_slowly_stays_bounded_in_memory() -> None:
    # 10,000 events (a thousand turns' worth) in one answer; the reader lets every other task
    # run as far as it can each 500 events. Under asyncio the answer is lent, event by event;
    # under trio the run reads ahead, at most BUFFERED_MAX events.
    size = 10_000

    async def scenario() -> tuple[int, int]:
        worker = Worker(ScriptedClient([ScriptedResponse([TextPart("x" * size)], chunk_size=1)]))
        dispatched = 0

        def count(event: object) -> None:
            nonlocal dispatched
            dispatched += isinstance(event, TextDelta)

        worker.timeline.on_text_block(count)
        read = ahead = 0
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("go") as stream:
                async for event in stream:
                    if isinstance(event, BlockDelta):
                        read += 1
                        if read % 500 == 0:
                            await anyio.wait_all_tasks_blocked()
                            ahead = max(ahead, dispatched - read)
        return read, ahead if sniffio.current_async_library() == "trio" else -ahead

    on_asyncio = asyncio.run(scenario())
    on_trio = trio.run(scenario)
    assert on_asyncio == (size, 0)  # lent: the run never reads ahead of its reader
    read, ahead = on_trio
    assert read == size
    assert BUFFERED_MAX // 2 <= ahead <= BUFFERED_MAX + 1  # it ran ahead, and not further
