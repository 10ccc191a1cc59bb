"""Sub-agents (`Worker.as_tool`): a child Worker run as a tool, one run tree."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import (
    Decision,
    PauseState,
    RunStatus,
    TextPart,
    ToolUsePart,
    Worker,
    handoff,
    tool,
)
from llm_worker.errors import OverloadedError, PauseStateError
from llm_worker.events import BlockDelta, BlockStart, BlockStop, TextDelta, UsageEvent
from llm_worker.state import RunCompleted, ToolResultReady, TurnEnded, TurnStarted
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.timeline import TextBlockStart, TextBlockStop
from llm_worker.tools import tool_meta

pytestmark = pytest.mark.anyio

TIMEOUT = 10.0


def said(text: str, tokens: int = 10) -> ScriptedResponse:
    return ScriptedResponse.text(text, usage=UsageEvent(input_tokens=tokens, output_tokens=1))


def calls(*parts: ToolUsePart, tokens: int = 10) -> ScriptedResponse:
    return ScriptedResponse(list(parts), usage=UsageEvent(input_tokens=tokens, output_tokens=1))


class Ticket(BaseModel):
    title: str
    priority: int


async def test_two_children_run_in_parallel_and_their_answers_are_the_results() -> None:
    started: list[str] = []
    both = anyio.Event()

    @tool(effect="read_only")
    async def look(topic: str) -> str:
        """Look something up."""
        started.append(topic)
        if len(started) == 2:
            both.set()
        with anyio.fail_after(TIMEOUT):
            await both.wait()  # each child waits for the other: they run at once
        return f"facts on {topic}"

    child = Worker(
        ScriptedClient(
            lambda request: (
                said(f"summary of {request.tool_results[0].content}")
                if request.tool_results
                else calls(ToolUsePart("", "look", {"topic": request.request.messages[0].text}))
            )
        ),
        tools=[look],
        name="researcher",
    )
    research = child.as_tool(name="research", description="Researches a topic.")
    assert tool_meta(research).effect == "read_only"  # the strongest of its tools' effects
    parent_client = ScriptedClient(
        [
            calls(
                ToolUsePart("a", "research", {"input": "tea"}),
                ToolUsePart("b", "research", {"input": "coffee"}),
                tokens=100,
            ),
            said("Both done.", tokens=200),
        ]
    )
    parent = Worker(parent_client, tools=[research])
    with anyio.fail_after(TIMEOUT):
        result = await parent.run("compare tea and coffee")
    assert result.status is RunStatus.FINISHED
    results = parent_client.requests[1].messages[-1].tool_results
    assert [p.content for p in results] == [
        "summary of facts on tea",
        "summary of facts on coffee",
    ]
    assert child.history == []  # each call ran in a fork of its own
    # usage: the parent's two requests (100 + 200) and each child's two (10 + 10)
    assert result.usage.input_tokens == 100 + 200 + 4 * 10
    assert len(result.request_usage) == 6
    assert sorted(c.path for c in result.children) == [("a",), ("b",)]
    assert all(c.usage.input_tokens == 20 and c.requests == 2 for c in result.children)


async def test_the_stream_carries_each_childs_events_with_its_path() -> None:
    child = Worker(ScriptedClient(said("child answer")), name="kid")
    parent = Worker(
        ScriptedClient([calls(ToolUsePart("c1", "kid", {"input": "go"})), said("parent answer")]),
        tools=[child.as_tool(name="kid", description="A child.")],
    )
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with parent.stream("hi") as stream:
            async for event in stream:
                events.append(event)
    texts = [
        (e.path, e.delta.text)
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]
    assert texts == [(("c1",), "child answer"), ((), "parent answer")]
    turns = [(type(e).__name__, e.path) for e in events if isinstance(e, TurnStarted | TurnEnded)]
    assert turns == [
        ("TurnStarted", ()),
        ("TurnStarted", ("c1",)),
        ("TurnEnded", ("c1",)),
        ("TurnEnded", ()),
    ]
    ready = [e for e in events if isinstance(e, ToolResultReady)]
    assert [(e.path, e.result.content) for e in ready] == [((), "child answer")]
    assert isinstance(events[-1], RunCompleted) and events[-1].path == ()
    # the child's own events all come before its result, never after
    last_child = max(i for i, e in enumerate(events) if e.path)
    assert last_child < events.index(ready[0])


async def test_timeline_handlers_get_a_scope_per_child_block_unless_root_only() -> None:
    child = Worker(ScriptedClient(said("from the child")))
    parent = Worker(
        ScriptedClient([calls(ToolUsePart("c1", "kid", {"input": "go"})), said("root")]),
        tools=[child.as_tool(name="kid", description="A child.")],
    )
    seen: list[tuple[tuple[str, ...], str]] = []
    roots: list[str] = []

    class Texts:
        def new_scope(self) -> list[str]:
            return []

        def on_event(self, scope: list[str], event: object) -> None:
            if isinstance(event, TextBlockStart):
                scope.append("|".join(event.path))
            elif isinstance(event, TextDelta):
                scope.append(event.text)
            elif isinstance(event, TextBlockStop):
                seen.append((event.path, "".join(scope[1:])))

    parent.on_text_block(Texts())
    parent.on_text_block(
        lambda e: roots.append(e.text) if isinstance(e, TextDelta) else None, root_only=True
    )
    with anyio.fail_after(TIMEOUT):
        await parent.run("hi")
    assert seen == [(("c1",), "from the child"), ((), "root")]
    assert roots == ["root"]


async def test_structured_input_and_output() -> None:
    child = Worker(
        ScriptedClient(
            lambda request: ScriptedResponse.output(
                Ticket(title=request.request.messages[0].text, priority=2)
            )
        ),
        output_type=Ticket,
    )
    agent = child.as_tool(
        name="ticket", description="Files a ticket.", input_type=Ticket, output="structured"
    )
    assert agent.input_schema["required"] == ["title", "priority"]
    client = ScriptedClient(
        [calls(ToolUsePart("t", "ticket", {"title": "x", "priority": 1})), said("ok")]
    )
    parent = Worker(client, tools=[agent])
    with anyio.fail_after(TIMEOUT):
        await parent.run("file it")
    content = client.requests[1].messages[-1].tool_results[0]
    assert Ticket.model_validate_json(content.content) == Ticket(
        title='{"title":"x","priority":1}', priority=2
    )


async def test_depth_past_the_limit_and_a_worker_below_itself_are_error_results() -> None:
    # a -> a: a Worker may not be its own descendant
    looping = Worker(
        ScriptedClient(
            lambda r: (
                said("gave up") if r.tool_results else calls(ToolUsePart("", "me", {"input": "x"}))
            )
        )
    )
    looping.add_tool(looping.as_tool(name="me", description="Myself."))
    with anyio.fail_after(TIMEOUT):
        result = await looping.run("go")
    assert result.status is RunStatus.FINISHED
    part = result.messages[-2].tool_results[0]
    assert part.is_error and "its own descendant" in part.content

    # a chain of four distinct Workers with max_depth=2: the third level is refused
    leaf = Worker(ScriptedClient(said("leaf")))
    tool_of = leaf.as_tool(name="w3", description="x", max_depth=2)
    workers: list[Worker] = []
    for name in ("w2", "w1"):
        w = Worker(
            ScriptedClient(
                lambda r, inner=tool_of.name: (
                    said(r.tool_results[0].content)
                    if r.tool_results
                    else calls(ToolUsePart("", inner, {"input": "x"}))
                )
            ),
            tools=[tool_of],
        )
        workers.append(w)
        tool_of = w.as_tool(name=name, description="x", max_depth=2)
    root = Worker(
        ScriptedClient(
            lambda r: (
                said(r.tool_results[0].content)
                if r.tool_results
                else calls(ToolUsePart("", "w1", {"input": "x"}))
            )
        ),
        tools=[tool_of],
    )
    with anyio.fail_after(TIMEOUT):
        result = await root.run("go")
    assert "past its limit of 2" in result.text


# -- nested pause ---------------------------------------------------------------------------


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


def parent_over(*tools: Any, ids: tuple[str, ...] = ("c1",)) -> Worker:
    return Worker(
        ScriptedClient(
            lambda r: (
                said(" | ".join(p.content for p in r.tool_results))
                if r.tool_results
                else calls(
                    *(
                        ToolUsePart(i, t.name, {"input": "x"})
                        for i, t in zip(ids, tools, strict=True)
                    )
                )
            )
        ),
        tools=list(tools),
    )


async def test_a_child_pausing_pauses_the_tree_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    log = tmp_path / "lines.txt"
    kid = approving_child(log).as_tool(name="kid", description="A child.")
    parent = parent_over(kid)
    with anyio.fail_after(TIMEOUT):
        paused = await parent.run("go")
    assert paused.status is RunStatus.PAUSED
    assert paused.state is not None
    assert "write requires approval" in (paused.reason or "")
    state = PauseState.from_json(paused.state.to_json())
    assert [p.status for p in state.pending] == ["allowed"]
    assert list(state.children) == ["c1"]
    child_call = state.children["c1"].pending[0].call.id
    assert not log.exists()
    # a fresh tree of Workers (as in another process) resumes it; the decision by call id
    again = parent_over(approving_child(log).as_tool(name="kid", description="A child."))
    with anyio.fail_after(TIMEOUT):
        done = await again.resume(state, decisions={child_call: Decision.approve()})
    assert done.status is RunStatus.FINISHED, done
    assert done.text == "kid done: wrote kid x"
    assert log.read_text() == "kid x\n"
    assert [c.path for c in done.children] == [("c1",)]
    assert done.children[0].requests == 2  # before and after the pause, once each


async def test_decisions_route_by_path_and_a_paused_sibling_beside_a_failed_one(
    tmp_path: Path,
) -> None:
    log = tmp_path / "lines.txt"
    broken = Worker(ScriptedClient(ScriptedResponse.text("x", fail_with=OverloadedError("down"))))
    tools = (
        approving_child(log, "a").as_tool(name="a", description="A."),
        broken.as_tool(name="b", description="B."),
    )
    parent = parent_over(*tools, ids=("ca", "cb"))
    with anyio.fail_after(TIMEOUT):
        paused = await parent.run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    assert [(p.call.id, p.status) for p in state.pending] == [("ca", "allowed"), ("cb", "done")]
    failed = state.pending[1].result
    assert failed is not None and failed.is_error and "OverloadedError" in failed.content
    inner = state.children["ca"].pending[0].call.id
    with pytest.raises(PauseStateError):
        await parent.resume(state, decisions={"nobody": Decision.approve()})
    with anyio.fail_after(TIMEOUT):
        done = await parent.resume(state, decisions={f"ca/{inner}": Decision.deny("no")})
    assert done.status is RunStatus.FINISHED
    assert done.text.startswith("a done: ") and "no" in done.text
    assert not log.exists()  # denied: never written


# -- cancellation ---------------------------------------------------------------------------


async def test_cancel_mid_child_cancels_the_tree_and_every_history_stays_valid() -> None:
    inside = anyio.Event()

    @tool(effect="read_only")
    async def slow() -> str:
        """Take forever."""
        inside.set()
        await anyio.sleep_forever()
        return "never"

    child_client = ScriptedClient(calls(ToolUsePart("", "slow", {})))
    child = Worker(child_client, tools=[slow])
    seen: list[str] = []
    child.add_on_abort_hook(lambda ctx: seen.append(ctx.kind))
    parent_client = ScriptedClient(
        [calls(ToolUsePart("c1", "kid", {"input": "x"})), said("after"), said("next run")]
    )
    parent = Worker(parent_client, tools=[child.as_tool(name="kid", description="A child.")])
    results: list[Any] = []

    async def run() -> None:
        results.append(await parent.run("go"))

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await inside.wait()
            parent.cancel()
    assert results[0].status is RunStatus.CANCELLED
    assert seen == ["cancelled"]  # the child's run was cancelled and cleaned up
    answer = parent.history[-1].tool_results[0]
    assert answer.is_error and "cancelled" in answer.content
    # the parent goes on: its next request is valid (every call answered)
    with anyio.fail_after(TIMEOUT):
        nxt = await parent.run("again")
    assert nxt.status is RunStatus.FINISHED and nxt.text == "after"


# -- handoff --------------------------------------------------------------------------------


async def test_handoff_after_a_tool_call_the_other_worker_answers_on_the_same_stream() -> None:
    @tool(effect="read_only")
    async def lookup() -> str:
        """Look the account up."""
        return "account 7"

    billing_client = ScriptedClient(said("Billing here: refunded.", tokens=5))
    billing = Worker(billing_client, name="billing", system="Billing desk.")
    front_client = ScriptedClient(
        [
            calls(ToolUsePart("l1", "lookup", {})),
            calls(ToolUsePart("h1", "transfer_to_billing", {})),
        ]
    )
    front = Worker(front_client, tools=[lookup, handoff(billing)])
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with front.stream("I was charged twice") as stream:
            async for event in stream:
                events.append(event)
    result = stream.result
    assert result.status is RunStatus.FINISHED
    assert result.text == "Billing here: refunded."
    texts = [
        (e.path, e.delta.text)
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]
    assert {path for path, _ in texts} == {()}  # the conversation's own answer
    assert "".join(text for _, text in texts) == "Billing here: refunded."
    # billing saw the whole conversation, handoff included, and its own system prompt
    sent = billing_client.requests[0]
    assert sent.system == "Billing desk."
    assert [m.role for m in sent.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert front.history[-1].text == "Billing here: refunded."
    assert result.messages[-1].text == "Billing here: refunded."
    assert [c.path for c in result.children] == [("h1",)]
    assert result.usage.input_tokens == 10 + 10 + 5


async def test_handoff_filter_decides_what_the_other_worker_reads() -> None:
    billing_client = ScriptedClient(said("ok"))
    billing = Worker(billing_client, name="billing")
    front = Worker(
        ScriptedClient(calls(ToolUsePart("h1", "go", {}))),
        tools=[handoff(billing, name="go", filter=lambda history: history[:1])],
    )
    with anyio.fail_after(TIMEOUT):
        result = await front.run("hello")
    assert result.text == "ok"
    assert [m.text for m in billing_client.requests[0].messages] == ["hello"]


async def test_a_paused_tree_resumes_in_a_second_process_and_nothing_runs_twice(
    tmp_path: Path,
) -> None:
    from subagent_tree import tree

    log = tmp_path / "lines.txt"
    with anyio.fail_after(TIMEOUT):
        paused = await tree(log).run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    assert log.read_text() == "a x\n"  # `a` finished before the pause; `b` waits
    state = paused.state
    assert [(p.call.id, p.status) for p in state.pending] == [("ca", "done"), ("cb", "allowed")]
    saved = tmp_path / "state.json"
    saved.write_text(state.to_json())
    waiting = state.children["cb"].pending[0].call.id
    script = Path(__file__).with_name("subagent_tree.py")
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, str(script), str(log), str(saved), waiting], check=True
        )
    status, text, tokens = done.stdout.decode().splitlines()
    assert (status, text) == ("finished", "a: wrote a x | b: wrote b x")
    assert log.read_text() == "a x\nb x\n"  # each side effect once, across both processes
    # the root's 2 requests, a's 2, b's 2 (one before the pause, one after): 6 x 10 tokens
    assert tokens == "60"


# -- blobs ----------------------------------------------------------------------------------


async def test_a_childs_large_answer_is_stored_once_and_the_parent_model_inspects_it() -> None:
    import re

    from llm_worker.blobs import MemoryBlobStore

    big = "".join(f"line {i}: {'x' * 90}\n" for i in range(10_000))  # 1 MB
    child = Worker(ScriptedClient(ScriptedResponse.text(big, chunk_size=65_536)))
    store = MemoryBlobStore()
    ids: list[str] = []

    def parent_step(r: Any) -> ScriptedResponse:
        results = r.tool_results
        if not results:
            return calls(ToolUsePart("c1", "kid", {"input": "dump"}))
        if results[0].name == "kid":
            uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
            ids.extend(re.findall(uuid, results[0].content))
            selector = {"blob_id": ids[0], "selector": "lines:4242-4242"}
            return calls(ToolUsePart("c2", "inspect", selector))
        return said(results[0].content)

    parent = Worker(
        ScriptedClient(parent_step),
        tools=[child.as_tool(name="kid", description="Dumps.")],
        blob_store=store,
    )
    with anyio.fail_after(TIMEOUT):
        result = await parent.run("go")
    assert len(store) == 1  # stored once, by the parent's store
    assert len(set(ids)) == 1
    assert "line 4241: xxx" in result.text  # lines are 1-based: line 4242 is "line 4241"
    sent = parent.client.requests  # type: ignore[attr-defined]
    results = [p for req in sent for m in req.messages for p in m.tool_results]
    assert results and all(len(p.content) < 20_000 for p in results)  # never the 1 MB itself


# -- combinations ---------------------------------------------------------------------------


async def test_two_children_on_two_other_wires_stream_in_order_with_their_own_scopes() -> None:
    from llm_worker.testing import ScriptedModelServer

    def kid_script(text: str) -> list[ScriptedResponse]:
        return [ScriptedResponse([TextPart(text)], chunk_size=4)] * 2

    script = [
        ScriptedResponse(
            [
                ToolUsePart("g", "gem", {"input": "x"}),
                ToolUsePart("o", "oai", {"input": "x"}),
            ]
        ),
        ScriptedResponse.text("root done"),
    ]
    blocks: list[tuple[tuple[str, ...], str]] = []

    class Texts:
        def new_scope(self) -> list[str]:
            return []

        def on_event(self, scope: list[str], event: object) -> None:
            if isinstance(event, TextDelta):
                scope.append(event.text)
            elif isinstance(event, TextBlockStop):
                blocks.append((event.path, "".join(scope)))

    async with (
        ScriptedModelServer("gemini", kid_script("from gemini")) as gem_server,
        ScriptedModelServer("openai_responses", kid_script("from responses")) as oai_server,
        ScriptedModelServer("anthropic", script) as root_server,
        gem_server.client() as gem_client,
        oai_server.client() as oai_client,
        root_server.client() as root_client,
    ):
        gem = Worker(gem_client).as_tool(name="gem", description="Gemini.")
        oai = Worker(oai_client).as_tool(name="oai", description="Responses.")
        parent = Worker(root_client, tools=[gem, oai])
        parent.on_text_block(Texts())
        events: list[Any] = []
        with anyio.fail_after(TIMEOUT):
            async with parent.stream("go") as stream:
                async for event in stream:
                    events.append(event)
    assert sorted(blocks) == [
        ((), "root done"),
        (("g",), "from gemini"),
        (("o",), "from responses"),
    ]
    # per child, its block's events are in order and never interleaved with another of its own
    for path, text in ((("g",), "from gemini"), (("o",), "from responses")):
        mine = [e for e in events if e.path == path]
        kinds = [
            type(e).__name__ for e in mine if isinstance(e, BlockStart | BlockDelta | BlockStop)
        ]
        assert kinds[0] == "BlockStart" and kinds[-1] == "BlockStop"
        assert set(kinds[1:-1]) == {"BlockDelta"}
        deltas = [e.delta for e in mine if isinstance(e, BlockDelta)]
        assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == text
    assert stream.result.text == "root done"
    assert {c.path for c in stream.result.children} == {("g",), ("o",)}


async def test_a_three_level_tree_streams_with_full_paths() -> None:
    leaf = Worker(ScriptedClient(said("leaf says hi")))
    tool_below = leaf.as_tool(name="l3", description="x")
    for name in ("l2", "l1"):
        inner = tool_below.name
        w = Worker(
            ScriptedClient(
                lambda r, inner=inner: (
                    said(r.tool_results[0].content)
                    if r.tool_results
                    else calls(ToolUsePart(f"id_{inner}", inner, {"input": "x"}))
                )
            ),
            tools=[tool_below],
        )
        tool_below = w.as_tool(name=name, description="x")
    root = Worker(
        ScriptedClient(
            lambda r: (
                said(r.tool_results[0].content)
                if r.tool_results
                else calls(ToolUsePart("id_l1", "l1", {"input": "x"}))
            )
        ),
        tools=[tool_below],
    )
    paths: set[tuple[str, ...]] = set()
    with anyio.fail_after(TIMEOUT):
        async with root.stream("go") as stream:
            async for event in stream:
                if isinstance(event, BlockDelta):
                    paths.add(event.path)
    assert stream.result.text == "leaf says hi"
    assert paths == {(), ("id_l1",), ("id_l1", "id_l2"), ("id_l1", "id_l2", "id_l3")}
    assert sorted(c.path for c in stream.result.children) == [
        ("id_l1",),
        ("id_l1", "id_l2"),
        ("id_l1", "id_l2", "id_l3"),
    ]
    assert stream.result.usage.input_tokens == 4 * 10 + 3 * 10  # 2 + 2 + 2 + 1 requests


async def test_a_parent_hook_that_aborts_while_a_child_runs_cancels_the_child() -> None:
    from llm_worker.errors import Aborted
    from llm_worker.hooks import Abort

    inside = anyio.Event()

    @tool(effect="read_only")
    async def slow() -> str:
        """Take forever."""
        inside.set()
        await anyio.sleep_forever()
        return "never"

    child = Worker(ScriptedClient(calls(ToolUsePart("", "slow", {}))), tools=[slow])
    kinds: list[str] = []
    child.add_on_abort_hook(lambda ctx: kinds.append(ctx.kind))

    async def refuse_the_second(ctx: Any) -> Abort | None:
        if ctx.call.name != "other":
            return None
        with anyio.fail_after(TIMEOUT):
            await inside.wait()  # the child (started early) is running its tool
        return Abort("policy says no")

    @tool
    async def other() -> str:
        """Another tool."""
        return "x"

    first = ScriptedResponse(
        [ToolUsePart("c1", "kid", {"input": "x"}), ToolUsePart("c2", "other", {})]
    )
    parent = Worker(
        ScriptedClient([first, said("next")]),
        tools=[child.as_tool(name="kid", description="A child."), other],
        early_tool_start=True,
    )
    parent.add_before_tool_call_hook(refuse_the_second)
    with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
        await parent.run("go")
    assert kinds == ["cancelled"]  # the running child was cancelled and cleaned up
    from llm_worker.worker._history import repair

    assert repair(parent.history)[0] == parent.history  # every call answered, nothing half
    with anyio.fail_after(TIMEOUT):
        assert (await parent.run("again")).text == "next"


def test_every_event_of_a_stream_carries_a_path() -> None:
    import dataclasses
    import typing

    from llm_worker.state import RunEvent

    kinds = [typing.get_origin(k) or k for k in typing.get_args(RunEvent)]
    assert len(kinds) > 10
    for kind in kinds:
        path = {f.name: f for f in dataclasses.fields(kind)}.get("path")
        assert path is not None, f"{kind.__name__} has no path: a sub-agent's would be unmarked"
        assert path.default == () and path.kw_only, kind


async def test_a_childs_tools_read_its_path_in_their_tool_context() -> None:
    from llm_worker.tools import ToolContext

    seen: list[tuple[str, ...]] = []

    @tool(effect="read_only")
    async def where(ctx: ToolContext) -> str:
        """Say where the call runs."""
        seen.append(ctx.path)
        return "here"

    child = Worker(
        ScriptedClient(
            lambda r: said("ok") if r.tool_results else calls(ToolUsePart("w", "where", {}))
        ),
        tools=[where],
    )
    parent = Worker(
        ScriptedClient(
            lambda r: (
                said("done")
                if r.tool_results
                else calls(ToolUsePart("c1", "kid", {"input": "x"}), ToolUsePart("w0", "where", {}))
            )
        ),
        tools=[child.as_tool(name="kid", description="A child."), where],
    )
    with anyio.fail_after(TIMEOUT):
        await parent.run("go")
    assert sorted(seen) == [(), ("c1",)]


async def test_a_run_tree_shares_the_parents_limits() -> None:
    from llm_worker import Limits
    from llm_worker.errors import LimitExceededError

    child = Worker(
        ScriptedClient(
            lambda r: said("ok") if r.tool_results else calls(ToolUsePart("", "noop", {}))
        ),
        tools=[noop],
    )
    budget = Limits(requests=3)
    parent = Worker(
        ScriptedClient([calls(ToolUsePart("c1", "kid", {"input": "x"})), said("never")]),
        tools=[child.as_tool(name="kid", description="A child.")],
        limits=budget,
    )
    # the parent's first request and the child's two spend the budget: the parent's second
    # request would be the fourth
    with anyio.fail_after(TIMEOUT), pytest.raises(LimitExceededError) as caught:
        await parent.run("go")
    assert caught.value.limit == "requests"


@tool(effect="read_only")
async def noop() -> str:
    """Do nothing."""
    return "done"
