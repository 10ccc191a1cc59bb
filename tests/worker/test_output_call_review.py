"""Review probes: a pause state's accepted output call, tampered, cancelled and resumed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import Message, PauseState, RunStatus, ToolUsePart, Worker
from llm_worker.collectors import ToolCall
from llm_worker.errors import PauseStateError
from llm_worker.messages import ToolResultPart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

TOOL = "final_result"


class Invoice(BaseModel):
    number: str
    total: float


def _state(call: dict[str, Any]) -> dict[str, Any]:
    history = [
        Message.user("Read it."),
        Message("assistant", [ToolUsePart("c1", TOOL, {"number": "a-1", "total": 4})]),
        Message("user", [ToolResultPart("c1", "The final answer was accepted.", name=TOOL)]),
    ]
    data = PauseState(history, at="on_turn_end", output_call=ToolCall("c1", TOOL, {})).to_dict()
    data["output_call"] = call
    return data


@pytest.mark.parametrize(
    "call",
    [
        {"id": "c1", "name": TOOL, "input": "garbage"},
        {"id": "c1", "name": TOOL, "input": [1, 2]},
        {"id": "c1", "name": TOOL},
        [],
        "c1",
    ],
    ids=["str-input", "list-input", "no-input", "list", "str"],
)
def test_an_output_call_whose_arguments_are_not_an_object_is_refused(call: Any) -> None:
    with pytest.raises(PauseStateError, match="output call"):
        PauseState.from_dict(_state(call))


async def test_a_tampered_output_that_does_not_fit_ends_typed_and_bounded() -> None:
    state = PauseState.from_dict(_state({"id": "c1", "name": TOOL, "input": {"number": 5}}))
    script = [ScriptedResponse.output({"number": "b-2", "total": 1}, tool=TOOL)]
    async with ScriptedModelServer("anthropic", script) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        with anyio.fail_after(10):
            result = await worker.resume(state)
        await client.aclose()
    # The accepted output no longer fits: the model is asked again, as after any misfit.
    assert result.status is RunStatus.FINISHED
    assert result.output == Invoice(number="b-2", total=1)


async def test_a_unicode_and_large_output_call_survives_the_json_round_trip() -> None:
    number = "Ünïcødé-\u0000-\U0001f600-" + "x" * 200_000
    data = _state({"id": "c1", "name": TOOL, "input": {"number": number, "total": 1}})
    state = PauseState.from_json(PauseState.from_dict(data).to_json())
    async with ScriptedModelServer("gemini", []) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        with anyio.fail_after(10):
            result = await worker.resume(state)
        await client.aclose()
    assert result.output == Invoice(number=number, total=1)
    assert server.requests == []


async def test_discarding_a_turn_end_pause_with_an_output_call_cancels_it() -> None:
    state = PauseState.from_dict(_state({"id": "c1", "name": TOOL, "input": {"number": "Z"}}))
    async with ScriptedModelServer("anthropic", []) as server:
        client = server.client()
        worker = Worker(client, output_type=Invoice, output_mode="tool")
        with anyio.fail_after(10):
            await worker.discard_pause("no", state=state)
        await client.aclose()
    assert worker.history == state.history
    assert server.requests == []
