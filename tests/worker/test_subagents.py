"""Sub-agents (`Worker.as_tool`): a child Worker run as a tool, one run tree."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import RunStatus, ToolUsePart, Worker, tool
from llm_worker.events import BlockDelta, TextDelta, UsageEvent
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
