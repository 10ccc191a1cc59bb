"""DurableWorker in one process on SQLite: runs, idempotent starts, pauses, progress, steps."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.durable import DecisionConflictError, DurableWorker, step
from llm_worker.errors import ConfigurationError, MissingExtraError
from llm_worker.events import UsageEvent
from llm_worker.hooks import ToolCallContext
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)

pytestmark = pytest.mark.anyio

TIMEOUT = 30.0
Engine = Callable[..., Any]  # conftest's `engine`: (worker, name=...) -> DBOS's or Temporal's
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)
SIDE_EFFECTS: list[str] = []


@tool
def book(city: str) -> str:
    """Book a hotel (a side effect)."""
    SIDE_EFFECTS.append(city)
    return f"booked {city}"


@tool(effect="read_only")
def weather(city: str) -> str:
    """Read the weather."""
    return f"sunny in {city}"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    SIDE_EFFECTS.append(f"pay {amount}")
    return f"paid {amount}"


def answer(*parts: Any) -> ScriptedResponse:
    return ScriptedResponse(list(parts), usage=USAGE)


def trip_script() -> list[ScriptedResponse]:
    return [
        answer(ToolUsePart("c1", "book", {"city": "Kyoto"})),
        answer(ToolUsePart("c2", "weather", {"city": "Kyoto"})),
        ScriptedResponse.text("Booked, and sunny.", usage=USAGE),
    ]


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    SIDE_EFFECTS.clear()


async def test_a_durable_run_returns_what_a_plain_run_returns(engine: Engine) -> None:
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        plain = await Worker(c, tools=[book, weather]).run("Trip to Kyoto")
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        worker = Worker(c, tools=[book, weather])
        durable = engine(worker, name="trips")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                result = await durable.run("Trip to Kyoto", run_id="trip-1")
    assert result.status is RunStatus.FINISHED
    assert result.text == plain.text == "Booked, and sunny."
    assert result.usage == plain.usage
    assert result.requests == plain.requests == 3
    assert [m.to_dict() for m in result.messages] == [m.to_dict() for m in plain.messages]
    assert SIDE_EFFECTS == ["Kyoto", "Kyoto"]  # one per run: the plain one and the durable one


async def test_a_second_start_of_a_run_id_returns_the_first_runs_result(engine: Engine) -> None:
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        durable = engine(Worker(c, tools=[book, weather]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                first = await durable.run("Trip to Kyoto", run_id="trip-1")
                again = await durable.run("Trip to Osaka", run_id="trip-1")
                by_id = await durable.result("trip-1")
        assert len(server.requests) == 3  # the second start made no request
    assert again.text == by_id.text == first.text
    assert SIDE_EFFECTS == ["Kyoto"]


async def test_a_pause_waits_for_a_decision_sent_with_the_run_id(engine: Engine) -> None:
    script = [
        answer(ToolUsePart("p1", "pay", {"amount": 5}), ToolUsePart("p2", "pay", {"amount": 7})),
        ScriptedResponse.text("Paid what you approved.", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = engine(Worker(c, tools=[pay]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay both", run_id="pay-1")
                state = await durable.paused(run_id)
                assert state is not None
                assert [p.call.id for p in state.pending] == ["p1", "p2"]
                assert await durable.status(run_id) == "paused"
                with pytest.raises(ConfigurationError, match="not waiting"):
                    await durable.decide("no-such-run", {"p1": Decision.approve()})
                await durable.decide(
                    run_id, {"p1": Decision.approve(input={"amount": 6}), "p2": Decision.deny("no")}
                )
                result = await durable.result(run_id)
                assert await durable.paused(run_id, wait=0) is None
                assert await durable.status(run_id) == "finished"
                # A decision second to one that already ended the run lost a race: a conflict,
                # whether it arrived a moment before the end or after it.
                with pytest.raises(DecisionConflictError, match="already answered"):
                    await durable.decide(run_id, {"p1": Decision.approve()})
    assert result.status is RunStatus.FINISHED
    assert result.text == "Paid what you approved."
    assert SIDE_EFFECTS == ["pay 6"]
    results = {r.tool_use_id: r for r in result.messages[2].tool_results}
    assert results["p2"].is_error
    assert results["p2"].content == "Denied: no"


async def test_decisions_that_do_not_fit_leave_the_run_waiting_for_others(engine: Engine) -> None:
    script = [
        answer(ToolUsePart("p1", "pay", {"amount": 5})),
        ScriptedResponse.text("ok", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = engine(Worker(c, tools=[pay]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Pay", run_id="pay-2")
                assert await durable.paused(run_id) is not None
                await durable.decide(run_id, {"p1": Decision.approve(input={"amount": "five"})})
                progress = durable.follow(run_id)
                kinds = [entry["kind"] async for entry in _until(progress, "refused")]
                assert kinds[-1] == "refused"
                assert await durable.paused(run_id) is not None  # still waiting
                await durable.decide(run_id, {"p1": Decision.approve()})
                result = await durable.result(run_id)
    assert result.text == "ok"
    assert SIDE_EFFECTS == ["pay 5"]


async def _until(
    entries: AsyncIterator[dict[str, Any]], kind: str
) -> AsyncIterator[dict[str, Any]]:
    async for entry in entries:
        yield entry
        if entry["kind"] == kind:
            return


async def test_a_client_elsewhere_follows_the_runs_steps(engine: Engine) -> None:
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        durable = engine(Worker(c, tools=[book, weather]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                run_id = await durable.start("Trip to Kyoto")
                entries = [entry async for entry in durable.follow(run_id)]
    assert [(e["kind"], e.get("name"), e.get("text")) for e in entries] == [
        ("answer", None, ""),
        ("tool_result", "book", None),
        ("answer", None, ""),
        ("tool_result", "weather", None),
        ("answer", None, "Booked, and sunny."),
    ]
    assert entries[0]["calls"] == [{"id": "c1", "name": "book", "input": {"city": "Kyoto"}}]
    assert entries[1]["content"] == "booked Kyoto"


async def test_handlers_of_the_worker_see_the_steps_this_process_runs(engine: Engine) -> None:
    texts: list[str] = []
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        worker = Worker(c, tools=[book, weather])
        worker.on_text_complete(texts.append)
        durable = engine(worker, name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                await durable.run("Trip to Kyoto")
    assert texts == ["Booked, and sunny."]


async def test_a_hooks_side_effect_runs_once_as_a_step(tmp_path: Path) -> None:
    calls: list[int] = []

    def stamp() -> int:
        calls.append(1)
        return 42

    seen: list[int] = []

    async def before(ctx: ToolCallContext) -> None:
        seen.append(await step(stamp, name="stamp"))

    assert await step(stamp, name="outside") == 42  # outside a durable run: simply called
    calls.clear()
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        worker = Worker(c, tools=[book, weather])
        worker.add_before_tool_call_hook(before)
        durable = DurableWorker(worker, name="t", database_url=url(tmp_path))
        with anyio.fail_after(TIMEOUT):
            async with durable:
                await durable.run("Trip to Kyoto", run_id="stamped")
                from dbos import DBOS

                steps = [
                    s["function_name"] for s in await DBOS.list_workflow_steps_async("stamped")
                ]
    assert seen == [42, 42]
    assert calls == [1, 1]
    assert steps.count("stamp") == 2


async def test_an_unknown_run_id_is_a_configuration_error(engine: Engine) -> None:
    async with ScriptedModelServer("anthropic", []) as server, server.client() as c:
        durable = engine(Worker(c), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                with pytest.raises(ConfigurationError, match="no durable run"):
                    await durable.result("nope")
            with pytest.raises(ConfigurationError, match=r"enter the \w+Worker first"):
                await durable.start("hi")


async def test_a_second_database_in_one_process_is_refused_with_the_password_hidden(
    tmp_path: Path,
) -> None:
    async with ScriptedModelServer("anthropic", []) as server, server.client() as c:
        one = DurableWorker(Worker(c), name="one", database_url=url(tmp_path))
        two = DurableWorker(Worker(c), name="two", database_url="postgresql://u:secret@db/x")
        with anyio.fail_after(TIMEOUT):
            async with one:
                with pytest.raises(ConfigurationError, match="one system database") as caught:
                    await two.__aenter__()
    assert "secret" not in str(caught.value)


def test_a_missing_dbos_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_worker.durable import _engine

    monkeypatch.setitem(sys.modules, "dbos", None)
    monkeypatch.setattr(_engine.engine, "dbos", None)
    with pytest.raises(MissingExtraError, match=r"llm-worker\[dbos\]"):
        DurableWorker(Worker(ScriptedClient([])), name="t")


async def test_a_paused_run_outlives_its_process_and_resumes_after_a_restart(
    engine: Engine,
) -> None:
    script = [
        answer(ToolUsePart("p1", "pay", {"amount": 5})),
        ScriptedResponse.text("ok", usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        with anyio.fail_after(TIMEOUT):
            async with engine(Worker(c, tools=[pay]), name="t") as d:
                await d.start("Pay", run_id="pay-3")
                assert await d.paused("pay-3") is not None
            # a new engine in its place: it recovers the run, which waits for the decision again
            async with engine(Worker(c, tools=[pay]), name="t") as d:
                state = await d.paused("pay-3")
                assert state is not None
                await d.decide("pay-3", {"p1": Decision.approve()})
                result = await d.result("pay-3")
        assert len(server.requests) == 2  # the answer that paused was not asked for again
    assert result.text == "ok"
    assert SIDE_EFFECTS == ["pay 5"]


@pytest.mark.parametrize(
    ("limits", "most"),
    [({"worker_concurrency": 1}, 1), ({"provider_concurrency": 2}, 2), ({}, 4)],
)
async def test_the_run_queue_holds_runs_to_its_limits(
    tmp_path: Path, limits: dict[str, Any], most: int
) -> None:
    running = [0, 0]  # now, most at once

    @tool(effect="read_only")
    async def work() -> str:
        """Work a while."""
        running[0] += 1
        running[1] = max(running)
        await anyio.sleep(0.3)  # a window in which another run could overlap, not a sync
        running[0] -= 1
        return "worked"

    script = [answer(ToolUsePart("", "work", {})) for _ in range(4)]
    script += [ScriptedResponse.text("done", usage=USAGE) for _ in range(4)]

    def by_turn(call: ScriptedRequest) -> ScriptedResponse:
        return script[4 if call.tool_results else 0]

    async with ScriptedModelServer("anthropic", [by_turn] * 8) as server, server.client() as c:
        worker = Worker(c, tools=[work])
        durable = DurableWorker(worker, name="t", database_url=url(tmp_path), **limits)
        with anyio.fail_after(TIMEOUT):
            async with durable:
                ids = [await durable.start(f"run {i}") for i in range(4)]
                results = [await durable.result(i) for i in ids]
    assert [r.text for r in results] == ["done"] * 4
    assert running[1] == most


async def test_a_request_step_records_the_assembled_answer_never_its_deltas(
    tmp_path: Path,
) -> None:
    text = "word " * 400
    script = [ScriptedResponse.text(text, usage=USAGE, chunk_size=1)]  # 2,000 deltas
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = DurableWorker(Worker(c), name="t", database_url=url(tmp_path))
        with anyio.fail_after(TIMEOUT):
            async with durable:
                await durable.run("Talk", run_id="long")
                from dbos import DBOS

                steps = await DBOS.list_workflow_steps_async("long")
    names = [s["function_name"] for s in steps]
    assert names.count("llm-worker request 1") == 1
    assert len(names) < 10  # a handful of records, whatever the number of deltas
    [record] = [s["output"] for s in steps if s["function_name"] == "llm-worker request 1"]
    assert record is not None
    assert [part["text"] for part in record["message"]["content"]] == [text]  # once, whole


async def test_the_worker_itself_still_runs_and_streams_outside_durable_runs(
    tmp_path: Path,
) -> None:
    async with ScriptedModelServer("anthropic", trip_script()) as server, server.client() as c:
        worker = Worker(c, tools=[book, weather])
        DurableWorker(worker, name="t", database_url=url(tmp_path))  # never entered
        with anyio.fail_after(TIMEOUT):
            async with worker.stream("Trip to Kyoto") as stream:
                events = [event async for event in stream]
    assert stream.result.text == "Booked, and sunny."
    assert len(events) > 10
    assert SIDE_EFFECTS == ["Kyoto"]


def test_a_tool_record_keeps_the_results_media() -> None:
    from llm_worker.durable._records import tool_from, tool_record
    from llm_worker.messages import ImagePart
    from llm_worker.tools import ToolResult

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    result = ToolResult("c1", "shot", "a screenshot", media=[ImagePart(png, "image/png")])
    again = tool_from(json.loads(json.dumps(tool_record(result))))
    assert again == result
    assert again.media == result.media


async def test_list_runs_gives_the_runs_of_the_name_with_their_status(engine: Engine) -> None:
    script = [answer(ToolUsePart("p1", "pay", {"amount": 5}))]
    async with ScriptedModelServer("anthropic", script) as server, server.client() as c:
        durable = engine(Worker(c, tools=[pay]), name="t")
        with anyio.fail_after(TIMEOUT):
            async with durable:
                await durable.start("Pay", run_id="listed")
                assert await durable.paused("listed") is not None
                runs: list[Any] = []
                for _ in range(200):  # Temporal's visibility store lags the run a moment
                    runs = await durable.list_runs()
                    if runs:
                        break
                    await anyio.sleep(0.05)  # bounded: 10 s; no "wait until listed" exists
                await durable.cancel("listed")
    assert [(r.run_id, r.status) for r in runs] == [("listed", "paused")]
