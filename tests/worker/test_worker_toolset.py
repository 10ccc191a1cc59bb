"""Toolsets (tools that change while a Worker runs) and progress reports of tool calls."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from llm_worker import ConfigurationError, ToolProgress, Worker, tool
from llm_worker.messages import ToolUsePart
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.tools import Tool, report_progress


@tool(effect="read_only")
def alpha() -> str:
    """The first tool."""
    return "a"


@tool(effect="read_only")
def beta() -> str:
    """The second tool."""
    return "b"


class Changing:
    """A toolset whose list the test changes; counts how often it is asked."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools: Sequence[Tool] = list(tools)
        self.asked = 0

    async def list_tools(self) -> Sequence[Tool]:
        self.asked += 1
        return self.tools


def offered(request: ScriptedRequest) -> list[str]:
    return [spec.name for spec in request.request.tools]


@pytest.mark.anyio
async def test_the_toolset_is_asked_before_each_request_and_changes_apply() -> None:
    toolset = Changing([alpha])
    seen: list[list[str]] = []

    def second(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(offered(call))
        return ScriptedResponse.text("done")

    def first(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(offered(call))
        toolset.tools = [alpha, beta]  # e.g. after notifications/tools/list_changed
        return ScriptedResponse([ToolUsePart("c1", "alpha", {})])

    worker = Worker(ScriptedClient([first, second]), tools=[toolset])
    result = await worker.run("go")
    assert result.text == "done"
    assert seen == [["alpha"], ["alpha", "beta"]]
    assert toolset.asked == 2
    assert worker.tools.names == ("alpha", "beta")


@pytest.mark.anyio
async def test_a_toolset_tool_clashing_with_a_local_one_is_named() -> None:
    worker = Worker(ScriptedClient([ScriptedResponse.text("x")]), tools=[alpha, Changing([alpha])])
    with pytest.raises(ConfigurationError, match="two tools are named 'alpha'"):
        await worker.run("go")


@pytest.mark.anyio
async def test_report_progress_in_a_tool_reaches_the_stream() -> None:
    @tool(effect="read_only")
    async def crunch() -> str:
        """Crunch numbers."""
        report_progress(1, 2, "half")
        report_progress(2, 2)
        return "crunched"

    script = [ScriptedResponse([ToolUsePart("c7", "crunch", {})]), ScriptedResponse.text("ok")]
    worker = Worker(ScriptedClient(script), tools=[crunch])
    events = [e async for e in worker.stream("go")]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert progress == [
        ToolProgress("c7", "crunch", 1, 2, "half"),
        ToolProgress("c7", "crunch", 2, 2),
    ]
