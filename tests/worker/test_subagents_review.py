"""Review probes of the run tree (issue 33): usage, handoff, back-pressure, hostile states."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import Decision, PauseState, RunStatus, ToolUsePart, Worker, handoff, tool
from llm_worker.events import BlockDelta, TextDelta, UsageEvent
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
