"""A run tree traced: each sub-agent's spans sit under the tool span of the call that ran it."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import ToolUsePart, Worker
from llm_worker.testing import ScriptedClient, ScriptedResponse
from support.telemetry import Telemetry, attrs, parent_of, span_id

pytestmark = pytest.mark.anyio


async def test_child_spans_are_under_the_parents_tool_span() -> None:
    t = Telemetry()
    child = Worker(
        ScriptedClient(ScriptedResponse.text("found it"), model="kid-1"),
        name="kid",
        instrument=t.instrumentation(),
    )
    parent = Worker(
        ScriptedClient(
            [
                ScriptedResponse([ToolUsePart("c1", "research", {"input": "x"})]),
                ScriptedResponse.text("done"),
            ],
            model="root-1",
        ),
        tools=[child.as_tool(name="research", description="Researches.")],
        name="root",
        instrument=t.instrumentation(),
    )
    with anyio.fail_after(10):
        result = await parent.run("go")
    assert result.text == "done"
    root = t.one("invoke_agent root")
    call = t.one("execute_tool research")
    kid = t.one("invoke_agent kid")
    assert parent_of(root) is None
    assert parent_of(call) == span_id(root)
    assert parent_of(kid) == span_id(call)  # the child's run under the call that ran it
    assert parent_of(t.one("chat kid-1")) == span_id(kid)
    assert kid.context is not None and root.context is not None
    assert kid.context.trace_id == root.context.trace_id
    assert attrs(call)["llm_worker.tool.outcome"] == "done"
