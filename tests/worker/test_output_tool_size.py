"""Tool output mode takes an answer as large as native mode does.

The output tool's arguments are the run's answer: they are bounded as a native answer's
text is (the client's `max_answer_chars`), not by `max_tool_arguments`, which still bounds
every other tool's input. A 1.5 MiB answer used to be refused in tool mode ("send a
reference") and accepted in native mode.
"""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.worker._output import OutputMode

pytestmark = pytest.mark.anyio

BIG = 1_500_000  # characters: over the default max_tool_arguments (1 MiB)


class Report(BaseModel):
    title: str
    body: str


@tool
async def note(text: str) -> str:
    """Keep a note."""
    return f"kept {len(text)} characters"


def _answer(mode: OutputMode) -> ScriptedResponse:
    value = {"title": "t", "body": "é" * BIG}
    if mode == "tool":
        return ScriptedResponse([ToolUsePart("c1", "final_result", value)])
    import orjson

    return ScriptedResponse.text(orjson.dumps(value).decode())


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_large_valid_answer_is_accepted_in_both_modes(mode: OutputMode) -> None:
    worker = Worker(ScriptedClient([_answer(mode)]), output_type=Report, output_mode=mode)
    with anyio.fail_after(30):
        result = await worker.run("write it")
    assert result.status is RunStatus.FINISHED
    assert result.output is not None and len(result.output.body) == BIG


async def test_other_tools_keep_the_argument_cap_in_tool_mode() -> None:
    script = [
        ScriptedResponse([ToolUsePart("n1", "note", {"text": "x" * BIG})]),
        ScriptedResponse([ToolUsePart("c1", "final_result", {"title": "t", "body": "b"})]),
    ]
    worker = Worker(ScriptedClient(script), tools=[note], output_type=Report, output_mode="tool")
    with anyio.fail_after(30):
        result = await worker.run("write it")
    assert result.output is not None and result.output.body == "b"
    [note_result] = [
        part
        for message in result.messages
        for part in message.tool_results
        if part.tool_use_id == "n1"
    ]
    assert note_result.is_error and "send a reference" in note_result.content
