"""Review probe (issue 32): a lone surrogate in a tool call's arguments, as the model wrote them.

JSON may spell a lone surrogate as an escape (`"\\udce9"`, a file name a model copied from a
listing, a cut emoji). Python's parser decodes it, so the call's input held a lone surrogate:
the tool ran, and every later request of the run failed with `InvalidMessagesError` (no wire
can carry it) — as one odd tool result did before it was cleaned where it entered the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from llm_worker import Worker, tool
from llm_worker.events import Event, ResponseStatus, StatusEvent, StopReason, UsageEvent
from llm_worker.messages import Request, ToolUsePart
from llm_worker.providers._blocks import BlockEmitter
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

RAW = r'{"path": "caf\udce9.txt", "deep": {"k\ud800": ["\udfff", "\ud83d\ude00"]}}'
seen: list[object] = []


@tool
async def find(path: str, deep: dict[str, list[str]]) -> str:
    """Find a file."""
    seen.append((path, deep))
    return "found"


class RawArguments(ScriptedClient):
    """Answers first with one call whose arguments are `RAW`, as a wire streams them."""

    def stream(self, request: Request) -> AsyncIterator[Event]:
        if self.requests:
            return super().stream(request)
        self.requests.append(request)
        return self._raw()

    async def _raw(self) -> AsyncIterator[Event]:
        yield StatusEvent(ResponseStatus.STARTED)
        emitter = BlockEmitter()
        emitter.tool_use("call_1", "find")
        emitter.input_json(RAW)
        yield UsageEvent(input_tokens=5, output_tokens=5)
        emitter.finish(StopReason.TOOL_USE, None)
        for event in emitter.out:
            yield event
        yield StatusEvent(ResponseStatus.COMPLETED)


@pytest.mark.parametrize("wire", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_a_lone_surrogate_the_model_escaped_in_arguments_never_fails_the_run(
    wire: str,
) -> None:
    worker = Worker(RawArguments([ScriptedResponse.text("done")]), tools=[find])
    with anyio.fail_after(30):
        result = await worker.run("find it")
    assert result.text == "done"
    (call,) = [p for m in worker.history for p in m.content if isinstance(p, ToolUsePart)]
    assert call.input == {"path": "caf\ufffd.txt", "deep": {"k\ufffd": ["\ufffd", "\U0001f600"]}}
    assert seen[-1] == ("caf\ufffd.txt", {"k\ufffd": ["\ufffd", "\U0001f600"]})
    # The history goes on over a wire: its next request is sent, valid UTF-8.
    async with ScriptedModelServer(wire, ScriptedResponse.text("on")) as server:
        async with server.client() as client:
            going_on = Worker(client, tools=[find])
            going_on.history = worker.history
            with anyio.fail_after(30):
                again = await going_on.run("and then?")
        assert again.text == "on"
        (sent,) = server.requests
        sent.body.decode("utf-8")
