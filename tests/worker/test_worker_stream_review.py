"""Review probes of `Worker.stream`'s lent reading: cancel, GC, readers, context, pause, traces."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import random
from collections.abc import AsyncGenerator
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from llm_worker import (
    BlockDelta,
    PauseState,
    RunCompleted,
    RunEvent,
    RunStatus,
    TextDelta,
    TextPart,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.errors import Aborted, HookError, OverloadedError
from llm_worker.events import StatusEvent
from llm_worker.hooks import Abort, Pause, ToolCallContext
from llm_worker.state import OutputPartial
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.ui import to_vercel_stream
from llm_worker.worker import StreamRetry
from support.telemetry import Telemetry, parent_of, span_id

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0
PROVIDERS = ["anthropic", "openai_chat", "openai_responses", "gemini"]


@tool
async def add(a: int, b: int) -> int:
    """Add."""
    await anyio.lowlevel.checkpoint()
    return a + b


def script(text="x" * 40):
    return [
        ScriptedResponse(
            [
                TextPart("thinking aloud " * 3),
                ToolUsePart("c1", "add", {"a": 1, "b": 2}),
                ToolUsePart("c2", "add", {"a": 3, "b": 4}),
            ],
            chunk_size=3,
        ),
        ScriptedResponse([TextPart(text)], chunk_size=2),
    ]


def texts(events):
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("early", [False, True])
async def test_pause_in_parallel_batch_then_resume_stream_from_json(
    provider: str, early: bool, http_transport: str
) -> None:
    async def ask(ctx: ToolCallContext) -> Pause | None:
        if ctx.call.input.get("a") == 3 and not ctx.resumed:
            return Pause("approve")
        return None

    async with ScriptedModelServer(provider, script()) as server, server.client() as client:
        w = Worker(client, tools=[add], early_tool_start=early)
        w.add_before_tool_call_hook(ask)
        seen: list[RunEvent] = []
        with anyio.fail_after(TIMEOUT):
            async with w.stream("go") as s:
                async for e in s:
                    seen.append(e)
        res = s.result
        assert res.status is RunStatus.PAUSED, res
        assert isinstance(seen[-1], RunCompleted)
        assert res.state is not None
        state = PauseState.from_json(res.state.to_json())
        async with server.client() as client2:
            w2 = Worker(client2, tools=[add], early_tool_start=early)
            w2.add_before_tool_call_hook(ask)
            seen2: list[RunEvent] = []
            with anyio.fail_after(TIMEOUT):
                async with w2.resume_stream(state) as s2:
                    async for e in s2:
                        seen2.append(e)
            assert s2.result.status is RunStatus.FINISHED
            assert s2.result.text == "x" * 40
            assert texts(seen2) == "x" * 40


async def _drop_unclosed(w: Worker, at: int) -> None:
    stream = w.stream("go")
    seen = 0
    async for _ in stream:
        seen += 1
        if seen >= at:
            break
    del stream  # neither read to its end nor closed: the run must not wait for it
    gc.collect()
    done = w._done  # pyright: ignore[reportPrivateUsage]
    if done is not None:
        await done.wait()  # the run reads on alone, and ends


async def _close_from_another_task(w: Worker, at: int) -> None:
    stream = w.stream("go")
    reached = anyio.Event()

    async def closer() -> None:
        await reached.wait()
        await stream.aclose()

    seen = 0
    async with anyio.create_task_group() as group:
        group.start_soon(closer)
        async for _ in stream:
            seen += 1
            if seen == at:
                reached.set()
        reached.set()


async def _stop_in_the_loop(w: Worker, at: int, how: str) -> None:
    with anyio.CancelScope() as scope:
        async with w.stream("go") as stream:
            seen = 0
            async for _ in stream:
                seen += 1
                if seen == at:
                    if how == "worker_cancel":
                        w.cancel()
                    elif how == "scope":
                        scope.cancel()
                    else:
                        break


@pytest.mark.parametrize("seed", range(24))
async def test_seeded_random_cancellation_points(seed: int) -> None:
    rnd = random.Random(seed)
    provider = PROVIDERS[seed % 4]
    transport = ["httpx", "aiohttp"][(seed // 4) % 2]
    how = rnd.choice(["worker_cancel", "scope", "aclose_other", "break", "gc"])
    at = rnd.randrange(1, 60)
    base = set(asyncio.all_tasks())
    async with (
        ScriptedModelServer(provider, [*script(), ScriptedResponse.text("again")]) as server,
        server.client(transport=transport) as client,
    ):
        w = Worker(client, tools=[add], early_tool_start=rnd.random() < 0.5)
        with anyio.fail_after(TIMEOUT):
            if how == "gc":
                await _drop_unclosed(w, at)
            elif how == "aclose_other":
                await _close_from_another_task(w, at)
            else:
                await _stop_in_the_loop(w, at, how)
            again = await w.run("again")
        assert again.status is RunStatus.FINISHED, again
    await anyio.wait_all_tasks_blocked()
    left = set(asyncio.all_tasks()) - base - {asyncio.current_task()}
    assert not left, left


async def read_all(stream: Any, into: list[RunEvent]) -> None:
    async with stream:
        async for event in stream:
            into.append(event)


async def test_otel_spans_parent_under_stream_as_under_run() -> None:
    def tree(t: Telemetry) -> list[tuple[str, str | None]]:
        spans = t.spans()
        names: dict[int | None, str] = {span_id(s): s.name for s in spans}
        return sorted((s.name, names.get(parent_of(s))) for s in spans)

    trees = []
    for mode in ("run", "stream"):
        t = Telemetry()
        c = ScriptedClient(script(), model="m", provider="anthropic")
        w = Worker(c, tools=[add], name="a", instrument=t.instrumentation(), early_tool_start=True)
        with anyio.fail_after(TIMEOUT):
            if mode == "run":
                await w.run("go")
            else:
                async with w.stream("go") as s:
                    async for _ in s:
                        pass
        trees.append(tree(t))
    assert trees[0] == trees[1]
    assert all(p is not None for n, p in trees[1] if not n.startswith("invoke_agent"))


async def test_after_tool_call_abort_while_answer_half_read(http_transport: str) -> None:
    # early tools: the after_tool_call hook aborts while the reader is mid-answer
    long = [
        ScriptedResponse(
            [ToolUsePart("c1", "add", {"a": 1, "b": 2}), TextPart("y" * 200)],
            chunk_size=1,
            delay=0.002,
        )
    ]
    async with (
        ScriptedModelServer("anthropic", [*long, ScriptedResponse.text("again")]) as server,
        server.client() as client,
    ):
        w = Worker(client, tools=[add], early_tool_start=True)
        w.add_after_tool_call_hook(lambda ctx: Abort("stop now"))
        seen: list[RunEvent] = []
        with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
            await read_all(w.stream("go"), seen)
        with anyio.fail_after(TIMEOUT):
            again = await w.run("again")
        assert again.text == "again"


async def test_before_request_hook_raises_on_second_request_mid_stream(http_transport: str) -> None:
    async with ScriptedModelServer("openai_chat", script()) as server, server.client() as client:
        w = Worker(client, tools=[add])
        n = 0

        def hook(ctx: Any) -> None:
            nonlocal n
            n += 1
            if n == 2:
                raise RuntimeError("hook bug")

        w.add_on_message_send_hook(hook)
        seen: list[RunEvent] = []
        with anyio.fail_after(TIMEOUT), pytest.raises(HookError):
            await read_all(w.stream("go"), seen)
        assert w._done is None  # pyright: ignore[reportPrivateUsage]


def text_of(events: list[RunEvent]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


async def test_abandoned_stream_gc_then_worker_usable() -> None:
    worker = Worker(
        ScriptedClient(
            [ScriptedResponse([TextPart("abcdefgh")], chunk_size=1), ScriptedResponse.text("next")]
        )
    )
    stream = worker.stream("go")
    seen = []
    with anyio.fail_after(TIMEOUT):
        async for e in stream:
            seen.append(e)
            if text_of(seen):
                break
    del stream
    gc.collect()
    for _ in range(5):
        await asyncio.sleep(0)
    gc.collect()
    with anyio.fail_after(TIMEOUT):
        again = await worker.run("again")
    assert again.text == "next"


async def test_two_readers_at_once() -> None:
    worker = Worker(
        ScriptedClient([ScriptedResponse([TextPart("abcdefgh")], chunk_size=1, delay=0.01)])
    )
    stream = worker.stream("go")
    got: dict[str, list[RunEvent]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    async def read(name: str) -> None:
        try:
            async for e in stream:
                got[name].append(e)
        except Exception as exc:
            errors.append(exc)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as g:
            g.start_soon(read, "a")
            g.start_soon(read, "b")
    # the second reader is refused (it used to wait forever); the first reads it all
    assert [type(e).__name__ for e in errors] == ["ConfigurationError"]
    assert sorted(text_of(got["a"]) + text_of(got["b"])) == list("abcdefgh")
    assert any(isinstance(e, RunCompleted) for e in got["a"] + got["b"])


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def test_handler_sets_contextvar_seen_by_later_hook() -> None:
    # before: handlers ran in the run's task, so a var a handler set was the run's
    worker = Worker(ScriptedClient([ScriptedResponse([TextPart("abcdefgh")], chunk_size=1)]))

    def handler(event: object) -> None:
        if isinstance(event, TextDelta) and event.text == "e":
            VAR.set("from-handler")

    worker.timeline.on_text_block(handler)
    seen_in_hook: list[str] = []
    worker.add_on_turn_end_hook(lambda ctx: seen_in_hook.append(VAR.get()))
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as s:
            async for _ in s:
                pass
    assert seen_in_hook == ["from-handler"], seen_in_hook


async def test_reader_contextvar_seen_by_handler() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse([TextPart("abcdefgh")], chunk_size=1)]))
    seen: list[str] = []
    worker.timeline.on_text_block(
        lambda e: seen.append(VAR.get()) if isinstance(e, TextDelta) else None
    )
    VAR.set("reader")
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("go") as s:
            async for _ in s:
                VAR.set("changed-by-reader")
    assert set(seen) == {"reader"}, seen


async def test_vercel_stream_abandoned(http_transport: str) -> None:
    async with (
        ScriptedModelServer(
            "anthropic",
            [
                ScriptedResponse.text("z" * 100, chunk_size=1, delay=0.001),
                ScriptedResponse.text("again"),
            ],
        ) as server,
        server.client() as client,
    ):
        w = Worker(client)
        sse = to_vercel_stream(w.stream("go"), message_id="m1")
        gen = cast("AsyncGenerator[str, None]", sse)
        del sse  # the browser goes away: its generator is closed, the RunStream dropped
        n = 0
        with anyio.fail_after(TIMEOUT):
            async for _ in gen:
                n += 1
                if n == 5:
                    break
            await gen.aclose()
            del gen
            done = w._done  # pyright: ignore[reportPrivateUsage]
            if done is not None:
                await done.wait()
            again = await w.run("again")
        assert again.text == "again"


@pytest.mark.parametrize("how", ["worker_cancel", "raise_cancelled"])
async def test_a_handler_cancelling_the_run_mid_answer(how: str, http_transport: str) -> None:
    # The handler runs in the reader's task now: what it does must still reach the run only.
    script = [
        ScriptedResponse.text("abcdefghij", chunk_size=1, delay=0.001),
        ScriptedResponse.text("again"),
    ]
    async with ScriptedModelServer("gemini", script) as server, server.client() as client:
        w = Worker(client)

        def h(e: object) -> None:
            if isinstance(e, TextDelta) and e.text == "d":
                if how == "worker_cancel":
                    w.cancel()
                else:
                    raise asyncio.CancelledError

        w.timeline.on_text_block(h)
        seen: list[RunEvent] = []
        with anyio.fail_after(TIMEOUT):
            await read_all(w.stream("go"), seen)  # the reader is not cancelled
            again = await w.run("again")
        assert again.text == "again"
        if how == "worker_cancel":
            last = seen[-1]
            assert isinstance(last, RunCompleted)
            assert last.result.status is RunStatus.CANCELLED
            assert texts(seen).startswith("abcd")
        else:
            assert texts(seen) == "abc"  # the event whose handler raised is not sent


async def test_stream_breaks_midway_retry() -> None:
    script = [
        ScriptedResponse.text(
            "abcdefghij",
            chunk_size=1,
            fail_with=OverloadedError("busy", error_type="overloaded_error", streamed=True),
        ),
        ScriptedResponse.text("klmno", chunk_size=1),
    ]
    w = Worker(ScriptedClient(script), stream_retry=StreamRetry(on_interrupted=True, delay=0.0))
    seen: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT):
        async with w.stream("go") as s:
            async for e in s:
                seen.append(e)
    assert s.result.text == "klmno", s.result
    assert texts(seen) == "abcdefghijklmno"


class Out(BaseModel):
    name: str
    items: list[int]


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_structured_partials(provider: str, http_transport: str) -> None:
    value = Out(name="n" * 30, items=list(range(20)))
    async with (
        ScriptedModelServer(provider, [ScriptedResponse.output(value, chunk_size=3)]) as server,
        server.client() as client,
    ):
        w = Worker(client, output_type=Out)
        seen: list[RunEvent] = []
        with anyio.fail_after(TIMEOUT):
            async with w.stream("go") as s:
                async for e in s:
                    seen.append(e)
        partials = [e for e in seen if isinstance(e, OutputPartial)]
        assert partials
        assert s.result.output == value


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_on_turn_end_pause_then_resume_stream_from_json(
    provider: str, http_transport: str
) -> None:
    script = [
        ScriptedResponse.text("draft " * 20, chunk_size=3),
        ScriptedResponse.text("final", chunk_size=1),
    ]
    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        w = Worker(client)
        w.add_on_turn_end_hook(lambda ctx: None if ctx.resumed else Pause("review"))
        seen: list[RunEvent] = []
        with anyio.fail_after(TIMEOUT):
            await read_all(w.stream("go"), seen)
        last = seen[-1]
        assert isinstance(last, RunCompleted)
        assert last.result.status is RunStatus.PAUSED
        assert last.result.state is not None
        assert texts(seen) == "draft " * 20
        state = PauseState.from_json(last.result.state.to_json())
        async with server.client() as again:
            fresh = Worker(again)
            fresh.add_on_turn_end_hook(lambda ctx: None if ctx.resumed else Pause("review"))
            resumed: list[RunEvent] = []
            with anyio.fail_after(TIMEOUT):
                await read_all(fresh.resume_stream(state), resumed)
        done = resumed[-1]
        assert isinstance(done, RunCompleted)
        assert done.result.status is RunStatus.FINISHED
        assert [m.role for m in fresh.history] == ["user", "assistant"]


class _BlockFirst(ScriptedClient):
    """A client whose answer starts with its first block (no status event before it)."""

    def stream(self, request: Any) -> Any:
        inner = super().stream(request)

        async def events() -> Any:
            async for event in inner:
                if type(event) is not StatusEvent:
                    yield event

        return events()


async def test_partials_of_an_output_call_that_is_the_answers_first_event() -> None:
    # The first event is processed by the run, the rest by the reader: one partial feed must
    # see them all (it learns the output call's block from its start, the first event).
    value = Out(name="n" * 300, items=list(range(200)))
    answer = ScriptedResponse.output(value, tool="final_result", chunk_size=50)
    w = Worker(_BlockFirst([answer]), output_type=Out, output_mode="tool")
    seen: list[RunEvent] = []
    with anyio.fail_after(TIMEOUT):
        await read_all(w.stream("go"), seen)
    partials = [e for e in seen if isinstance(e, OutputPartial)]
    assert len(partials) >= 2
    last = seen[-1]
    assert isinstance(last, RunCompleted)
    assert last.result.output == value
