"""Review probes of the run tree (issue 33): usage, handoff, back-pressure, hostile states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Decision, PauseState, RunStatus, ToolUsePart, Worker, handoff, tool
from llm_worker.errors import PauseStateError
from llm_worker.events import BlockDelta, TextDelta, UsageEvent
from llm_worker.state import TurnEnded
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.worker._stream import BUFFERED_MAX

pytestmark = pytest.mark.anyio

TIMEOUT = 10.0


def said(text: str, tokens: int = 10) -> ScriptedResponse:
    return ScriptedResponse.text(text, usage=UsageEvent(input_tokens=tokens, output_tokens=1))


def calls(*parts: ToolUsePart, tokens: int = 10) -> ScriptedResponse:
    return ScriptedResponse(list(parts), usage=UsageEvent(input_tokens=tokens, output_tokens=1))


def approving_child(log: Path, name: str = "kid") -> Worker:
    """A child that writes a line (approval needed) and then answers what it wrote."""

    @tool(requires_approval=True)
    async def write(line: str) -> str:
        """Append a line to the log."""
        with log.open("a") as f:
            f.write(line + "\n")
        return f"wrote {line}"

    return Worker(
        ScriptedClient(
            lambda r: (
                said(f"{name} done: {r.tool_results[0].content}")
                if r.tool_results
                else calls(
                    ToolUsePart("", "write", {"line": f"{name} {r.request.messages[0].text}"})
                )
            )
        ),
        tools=[write],
    )


async def test_a_child_that_raises_mid_answer_keeps_its_usage_in_the_roll_up() -> None:
    # The child's answer reported its usage, then a handler of the child raised: the server
    # saw (and billed) the request, and the tree's usage dropped it.
    child = Worker(ScriptedClient(said("x", tokens=200)))

    def broken(text: str) -> None:
        raise RuntimeError("handler broke")

    child.on_text_complete(broken)
    parent_client = ScriptedClient(
        [calls(ToolUsePart("c1", "kid", {"input": "x"}), tokens=1000), said("after", 10_000)]
    )
    parent = Worker(parent_client, tools=[child.as_tool(name="kid", description="K.")])
    with anyio.fail_after(TIMEOUT):
        result = await parent.run("go")
    assert result.status is RunStatus.FINISHED
    answer = parent.history[2].tool_results[0]
    assert answer.is_error and "handler broke" in answer.content
    assert result.usage.input_tokens == 1000 + 200 + 10_000
    assert [(c.path, c.usage.input_tokens) for c in result.children] == [(("c1",), 200)]
    assert sum(u.usage.input_tokens or 0 for u in result.request_usage) == 11_200


async def test_a_handoff_beside_a_child_that_pauses_is_taken_on_resume(tmp_path: Path) -> None:
    log = tmp_path / "lines.txt"

    def front(billing: Worker) -> Worker:
        script = ScriptedClient(
            calls(
                ToolUsePart("c1", "kid", {"input": "x"}),
                ToolUsePart("h1", "transfer_to_billing", {}),
            )
        )
        kid = approving_child(log).as_tool(name="kid", description="A child.")
        return Worker(script, tools=[kid, handoff(billing)])

    billing_client = ScriptedClient(said("Billing here.", tokens=5))
    billing = Worker(billing_client, name="billing")
    with anyio.fail_after(TIMEOUT):
        paused = await front(billing).run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    inner = state.children["c1"].pending[0].call.id
    again = front(billing)
    with anyio.fail_after(TIMEOUT):
        done = await again.resume(state, decisions={inner: Decision.approve()})
    assert done.status is RunStatus.FINISHED, done
    assert done.text == "Billing here."  # the calling Worker's model is never asked again
    assert len(billing_client.requests) == 1
    assert log.read_text() == "kid x\n"
    assert [c.path for c in done.children] == [("c1",), ("h1",)]


# -- back-pressure ------------------------------------------------------------------------------


def _chatty(text: str) -> ScriptedResponse:
    return ScriptedResponse.text(text, chunk_size=1, usage=UsageEvent(input_tokens=1))


@pytest.mark.parametrize("mode", ["child", "grandchild", "handoff"])
async def test_a_slow_reader_holds_a_chatty_child_back(mode: str) -> None:
    text = "x" * 6000  # 6,000 deltas: six times what a reader may leave unread
    if mode == "handoff":
        other = Worker(ScriptedClient(_chatty(text)), name="other")
        script = [calls(ToolUsePart("h1", "transfer_to_other", {}))]
        root = Worker(ScriptedClient(script), tools=[handoff(other)])
    else:
        kid = Worker(ScriptedClient(_chatty(text)))
        if mode == "grandchild":
            middle = Worker(
                ScriptedClient([calls(ToolUsePart("g1", "kid", {"input": "x"})), said("mid")]),
                tools=[kid.as_tool(name="kid", description="K.")],
            )
            kid = middle
        root = Worker(
            ScriptedClient([calls(ToolUsePart("c1", "kid", {"input": "x"})), said("done")]),
            tools=[kid.as_tool(name="kid", description="K.")],
        )
    deltas = 0
    with anyio.fail_after(TIMEOUT * 3):
        async with root.stream("go") as stream:
            async for event in stream:
                if type(event) is BlockDelta and type(event.delta) is TextDelta:
                    deltas += event.path != () or mode == "handoff"
                if deltas == 1:
                    await anyio.wait_all_tasks_blocked()  # the child ran as far as it may
                    unread = len(stream._channel.buffer)  # pyright: ignore[reportPrivateUsage]
                    assert unread <= BUFFERED_MAX + 16, unread
                    deltas += 1
    assert stream.result.status is RunStatus.FINISHED
    assert deltas >= 6000


# -- a hostile or stale tree state ------------------------------------------------------------


def _relay(tools: list[Any], ids: list[str], name: str) -> Worker:
    """A Worker that calls each of its sub-agents once, then answers their results."""
    return Worker(
        ScriptedClient(
            lambda r: (
                said(name + ":" + "|".join(p.content for p in r.tool_results))
                if r.tool_results
                else calls(
                    *(
                        ToolUsePart(i, t.name, {"input": "x"})
                        for i, t in zip(ids, tools, strict=True)
                    )
                )
            )
        ),
        tools=tools,
    )


def _two_branches(log: Path) -> Worker:
    """root -> c1 -> ma -> a (approval), root -> c2 -> mb -> b (approval): both leaves' calls
    get the same id (`call_0`), as ids made up per answer do."""
    a = approving_child(log, "a").as_tool(name="a", description="A.")
    b = approving_child(log, "b").as_tool(name="b", description="B.")
    m1 = _relay([a], ["ma"], "m1").as_tool(name="m1", description="M1.")
    m2 = _relay([b], ["mb"], "m2").as_tool(name="m2", description="M2.")
    return _relay([m1, m2], ["c1", "c2"], "root")


async def test_hostile_decisions_for_a_tree_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    log = tmp_path / "lines.txt"
    with anyio.fail_after(TIMEOUT):
        paused = await _two_branches(log).run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    leaf = state.children["c1"].children["ma"].pending[0].call.id
    assert leaf == state.children["c2"].children["mb"].pending[0].call.id
    hostile = [
        leaf,  # held by two branches: ambiguous
        "c1/zz",  # no such call below c1
        f"c1/mb/{leaf}",  # a path through the other branch
        f"c1/ma/{leaf}/deeper",
        "c1//",
        f"zz/{leaf}",
    ]
    for key in hostile:
        worker = _two_branches(log)
        with pytest.raises(PauseStateError):
            await worker.resume(state, decisions={key: Decision.approve()})
        assert not log.exists(), key  # nothing ran
    worker = _two_branches(log)
    with anyio.fail_after(TIMEOUT):
        done = await worker.resume(
            state, decisions={f"c1/ma/{leaf}": Decision.approve(), f"c2/mb/{leaf}": Decision.deny()}
        )
    assert done.status is RunStatus.FINISHED, done
    assert log.read_text() == "a x\n"


async def test_an_older_state_of_a_tree_paused_again_is_not_resumed_twice(tmp_path: Path) -> None:
    log = tmp_path / "lines.txt"
    worker = _two_branches(log)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("go")
    assert paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    leaf = state.children["c1"].children["ma"].pending[0].call.id
    with anyio.fail_after(TIMEOUT):
        again = await worker.resume(state, decisions={f"c1/ma/{leaf}": Decision.approve()})
    assert again.status is RunStatus.PAUSED and again.state is not None  # b still waits
    assert log.read_text() == "a x\n"
    with pytest.raises(PauseStateError, match="already resumed"):
        await worker.resume(state, decisions={f"c1/ma/{leaf}": Decision.approve()})
    assert log.read_text() == "a x\n"  # a's line once
    latest = PauseState.from_json(again.state.to_json())  # the latest state, as JSON: fine
    with anyio.fail_after(TIMEOUT):
        done = await worker.resume(latest, decisions={f"c2/mb/{leaf}": Decision.approve()})
    assert done.status is RunStatus.FINISHED, done
    assert log.read_text() == "a x\nb x\n"


async def test_a_worker_handed_over_to_cannot_run_itself_as_a_sub_agent() -> None:
    b_client = ScriptedClient(
        lambda r: (
            said("b: " + r.tool_results[-1].content)
            if r.tool_results and r.tool_results[-1].name == "myself"
            else calls(ToolUsePart("", "myself", {"input": "x"}))
        )
    )
    b = Worker(b_client, name="b")
    b.add_tool(b.as_tool(name="myself", description="B itself."))
    a = Worker(ScriptedClient(calls(ToolUsePart("h1", "transfer_to_b", {}))), tools=[handoff(b)])
    with anyio.fail_after(TIMEOUT):
        result = await a.run("go")
    assert result.status is RunStatus.FINISHED, result
    assert "its own descendant" in result.text
    assert [c.path for c in result.children] == [("h1",)]  # B never ran below itself
    assert len(b_client.requests) == 2


# -- cancel at any depth, a long child ----------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3])
async def test_cancel_mid_child_at_any_depth_leaves_no_task_and_the_root_goes_on(
    depth: int,
) -> None:
    inside = anyio.Event()

    @tool(effect="read_only")
    async def slow() -> str:
        """Take forever."""
        inside.set()
        await anyio.sleep_forever()
        return "never"

    worker = Worker(ScriptedClient([calls(ToolUsePart("", "slow", {}))]), tools=[slow])
    for level in range(depth):
        script = [calls(ToolUsePart(f"L{level}", "k", {"input": "x"})), said("after")]
        sub = worker.as_tool(name="k", description="K.")
        worker = Worker(ScriptedClient(script), tools=[sub])
    results: list[Any] = []
    tasks = len(anyio.get_running_tasks())

    async def read() -> None:
        async with worker.stream("go") as stream:
            async for _ in stream:
                pass
        results.append(stream.result)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await inside.wait()
            assert len(anyio.get_running_tasks()) > tasks
            worker.cancel()
    assert len(anyio.get_running_tasks()) == tasks  # nothing of the tree left running
    assert results[0].status is RunStatus.CANCELLED
    assert [c.status for c in results[0].children] == [RunStatus.CANCELLED] * depth
    with anyio.fail_after(TIMEOUT):
        again = await worker.run("again")
    assert again.status is RunStatus.FINISHED and again.text == "after"


async def test_a_thousand_turn_child_streams_through_the_parent() -> None:
    @tool(effect="read_only")
    async def step() -> str:
        """One step."""
        return "ok"

    script = [calls(ToolUsePart("", "step", {}), tokens=1) for _ in range(1000)]
    kid = Worker(
        ScriptedClient([*script, said("kid done", tokens=1)]), tools=[step], max_requests=2000
    )
    parent_client = ScriptedClient([calls(ToolUsePart("c1", "k", {"input": "x"})), said("done")])
    parent = Worker(parent_client, tools=[kid.as_tool(name="k", description="K.")])
    ended = 0
    with anyio.fail_after(TIMEOUT * 3):
        async with parent.stream("go") as stream:
            async for event in stream:
                ended += type(event) is TurnEnded and event.path == ("c1",)
    result = stream.result
    assert result.status is RunStatus.FINISHED and result.text == "done"
    assert result.children[0].requests == 1001
    assert result.usage.input_tokens == 10 + 1001 + 10
    assert ended == 1


# -- depth 3, parallel children on four wires and both transports ------------------------------


def _step(tokens: tuple[int, int], ask: Any, done: str) -> Any:
    """A scripted model: `ask` (the calls) first, then `done` once it reads results."""

    def answer(r: Any) -> ScriptedResponse:
        if r.tool_results:
            return ScriptedResponse.text(done, usage=UsageEvent(input_tokens=tokens[1]))
        return ScriptedResponse(ask(), usage=UsageEvent(input_tokens=tokens[0]))

    return answer


async def test_a_three_level_tree_on_four_wires_pauses_resumes_from_json_and_sums_usage(
    tmp_path: Path,
) -> None:
    from llm_worker.testing import ScriptedModelServer

    log = tmp_path / "lines.txt"

    def write_tool(name: str) -> Any:
        @tool(requires_approval=True)
        async def write(line: str) -> str:
            """Append a line."""
            with log.open("a") as f:
                f.write(f"{name} {line}\n")
            return f"{name} wrote {line}"

        return write

    def leaf_step(name: str) -> Any:
        return _step((2, 3), lambda: [ToolUsePart(f"w_{name}", "write", {"line": "x"})], name)

    mid_ask = lambda: [  # noqa: E731
        ToolUsePart("g", "gem", {"input": "x"}),
        ToolUsePart("r", "resp", {"input": "x"}),
    ]
    root_ask = lambda: [ToolUsePart("m", "mid", {"input": "x"})]  # noqa: E731
    async with (
        ScriptedModelServer("anthropic", _step((11, 13), root_ask, "root done")) as root_s,
        ScriptedModelServer("openai_chat", _step((5, 7), mid_ask, "mid done")) as mid_s,
        ScriptedModelServer("gemini", leaf_step("gem")) as gem_s,
        ScriptedModelServer("openai_responses", leaf_step("resp")) as resp_s,
        root_s.client(transport="aiohttp") as root_c,
        mid_s.client() as mid_c,
        gem_s.client(transport="aiohttp") as gem_c,
        resp_s.client() as resp_c,
    ):

        def tree() -> Worker:
            gem = Worker(gem_c, tools=[write_tool("gem")]).as_tool(name="gem", description="G.")
            resp = Worker(resp_c, tools=[write_tool("resp")]).as_tool(name="resp", description="R.")
            mid = Worker(mid_c, tools=[gem, resp]).as_tool(name="mid", description="M.")
            return Worker(root_c, tools=[mid])

        events: list[Any] = []
        with anyio.fail_after(TIMEOUT):
            async with tree().stream("go") as stream:
                async for event in stream:
                    events.append(event)
        paused = stream.result
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        assert {e.path for e in events} >= {(), ("m",), ("m", "g"), ("m", "r")}
        state = PauseState.from_json(paused.state.to_json())
        below = state.children["m"].children
        assert sorted(below) == ["g", "r"]
        ids = {k: below[k].pending[0].call.id for k in below}
        with anyio.fail_after(TIMEOUT):
            done = await tree().resume(
                state,
                decisions={
                    f"m/g/{ids['g']}": Decision.approve(),
                    f"m/r/{ids['r']}": Decision.approve(),
                },
            )
    assert done.status is RunStatus.FINISHED, done
    assert done.text == "root done"
    assert sorted(log.read_text().splitlines()) == ["gem x", "resp x"]  # once each
    # every request the four servers saw, once: root 11 + 13, mid 5 + 7, leaves 2 + 3 each
    assert done.usage.input_tokens == 11 + 13 + 5 + 7 + 2 * (2 + 3)
    assert len(done.request_usage) == 8
    assert sorted(c.path for c in done.children) == [("m",), ("m", "g"), ("m", "r")]


async def test_a_childs_failing_hook_is_its_calls_error_and_the_parent_goes_on() -> None:
    child = Worker(ScriptedClient([said("child answer", tokens=7)]))

    def broken(ctx: Any) -> None:
        raise RuntimeError("hook broke")

    child.add_on_turn_end_hook(broken)
    parent_client = ScriptedClient(
        [calls(ToolUsePart("c1", "kid", {"input": "x"})), said("parent goes on")]
    )
    parent = Worker(parent_client, tools=[child.as_tool(name="kid", description="K.")])
    with anyio.fail_after(TIMEOUT):
        result = await parent.run("go")
    assert result.status is RunStatus.FINISHED and result.text == "parent goes on"
    answer = parent.history[2].tool_results[0]
    assert answer.is_error and "HookError" in answer.content
    assert result.usage.input_tokens == 10 + 7 + 10  # the child's request counted
