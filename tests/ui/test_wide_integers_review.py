"""An integer past 64 bits in a call's arguments or a tool's output (orjson writes none).

The tool-call parser keeps a model's digits exactly; the web streams broke on them (the run
ended in "An error occurred." after the call was shown) and so did the next request's body.
Both now write the exact digits; what orjson refuses for another reason still fails as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from pydantic import BaseModel

from llm_worker import Message, TextPart, ToolResultPart, ToolUsePart, Worker, tool
from llm_worker._wide_json import json_bytes
from llm_worker.errors import InvalidMessagesError
from llm_worker.providers._body import encoded
from llm_worker.state import Decision, PauseState
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter, messages_to_agui, messages_to_ui
from llm_worker.ui._agui_messages import read_agui
from llm_worker.ui._encoder import sse
from llm_worker.ui._vercel_messages import read_ui

from .conftest import PROVIDERS, serve
from .test_review_adapters import chunks
from .test_security import AG_USER, USER

pytestmark = pytest.mark.anyio

WIDE = 2**70 + 1  # no double holds it: a float on the way would show
DIGITS = b"1180591620717411303425"


@tool(effect="read_only")
def count(n: int) -> str:
    """Count to n."""
    return f"counted {n}"


@tool(effect="read_only")
def tally() -> dict[str, Any]:
    """A tally whose total is past 64 bits."""
    return {"total": -WIDE}


def script() -> list[ScriptedResponse]:
    call = ToolUsePart("", "count", {"n": orjson.Fragment(DIGITS)})  # the model's own digits
    return [
        ScriptedResponse([TextPart("Counting."), call, ToolUsePart("", "tally", {})]),
        ScriptedResponse.text("Counted."),
    ]


async def run(adapter: Any, provider: str) -> str:
    async with (
        ScriptedModelServer(provider, script()) as server,
        server.client() as client,
        serve(adapter(lambda: Worker(client, tools=[count, tally]))) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        if adapter is VercelAIAdapter:
            body: dict[str, Any] = {"id": "c1", "messages": [USER], "trigger": "submit-message"}
        else:
            body = {"threadId": "c1", "runId": "r1", "messages": [AG_USER], "tools": []}
        with anyio.fail_after(20):
            response = await http.post(url, json=body)
        assert response.status_code == 200
        return response.text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_wide_integer_streams_with_its_digits_on_vercel(provider: str) -> None:
    text = await run(VercelAIAdapter, provider)
    out = chunks(text)  # the stdlib parser: exact digits
    assert [c for c in out if c["type"] == "error"] == []
    assert out[-1]["type"] == "finish" and out[-1]["finishReason"] == "stop"
    called = next(
        c for c in out if c["type"] == "tool-input-available" and c["toolName"] == "count"
    )
    outputs = [c["output"] for c in out if c["type"] == "tool-output-available"]
    if provider != "gemini":  # Gemini's parser reads the arguments as a float (outside ui)
        assert called["input"] == {"n": WIDE}
        assert f"counted {WIDE}" in outputs
    assert any(isinstance(o, dict) and o.get("total") == -WIDE for o in outputs) or any(
        isinstance(o, str) and str(-WIDE) in o for o in outputs
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_wide_integer_streams_with_its_digits_on_agui(provider: str) -> None:
    text = await run(AGUIAdapter, provider)
    out = chunks(text)
    assert [e for e in out if e["type"] == "RUN_ERROR"] == []
    assert out[-1]["type"] == "RUN_FINISHED"
    snapshot = next(e for e in out if e["type"] == "MESSAGES_SNAPSHOT")
    calls = [c for m in snapshot["messages"] for c in m.get("toolCalls", [])]
    arguments = json.loads(
        next(c for c in calls if c["function"]["name"] == "count")["function"]["arguments"]
    )
    results = [m["content"] for m in snapshot["messages"] if m["role"] == "tool"]
    if provider != "gemini":
        assert arguments == {"n": WIDE}
        assert f"counted {WIDE}" in results
    assert any(str(-WIDE) in r for r in results)


def test_the_next_request_carries_the_models_digits() -> None:
    body = {"messages": [{"input": {"n": WIDE, "m": -(2**200), "x": float("nan")}}]}
    assert json.loads(encoded(body)) == {
        "messages": [{"input": {"n": WIDE, "m": -(2**200), "x": None}}]
    }  # a non-finite float written as orjson writes it (null)
    with pytest.raises(InvalidMessagesError, match=r"messages\[0\]\.text"):
        encoded({"messages": [{"input": {"n": WIDE}, "text": "\ud800"}]})  # named, not shown


def test_what_orjson_refuses_for_another_reason_still_fails() -> None:
    assert sse({"n": WIDE}) == f'data: {{"n":{WIDE}}}\n\n'
    for bad in ({"n": WIDE, "s": "\ud800"}, {"n": WIDE, "o": object()}, {"n": 1, "s": "\ud800"}):
        with pytest.raises(orjson.JSONEncodeError):
            json_bytes(bad)
        with pytest.raises(orjson.JSONEncodeError):
            sse(bad)
    deep: Any = WIDE
    for _ in range(300):  # past orjson's depth: refused, the wide integer under it unseen
        deep = [deep]
    with pytest.raises(orjson.JSONEncodeError):
        json_bytes(deep)


def history() -> list[Message]:
    return [
        Message.user("Count"),
        Message("assistant", [ToolUsePart("call_0", "count", {"n": WIDE})]),
        Message("user", [ToolResultPart("call_0", f"counted {WIDE}", name="count")]),
    ]


@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_a_wide_integers_result_stays_proven_through_javascript(
    protocol: str, node_modules: Path
) -> None:
    del node_modules  # needs node, as the consumers do
    wire = messages_to_ui(history()) if protocol == "vercel" else messages_to_agui(history())
    script = (
        "let s='';process.stdin.on('data',d=>s+=d)"
        ".on('end',()=>process.stdout.write(JSON.stringify(JSON.parse(s))))"
    )
    with anyio.fail_after(30):
        done = await anyio.run_process(["node", "-e", script], input=json_bytes(wire))
    back = orjson.loads(done.stdout)  # the browser rounded WIDE to a double
    _, proven = read_ui(back) if protocol == "vercel" else read_agui(back)
    assert len(proven) == 1


paid: list[int] = []


@tool(requires_approval=True)
def pay(n: int) -> str:
    """Pay n (a person approves each payment)."""
    paid.append(n)
    return f"paid {n}"


async def test_a_paused_call_resumes_from_json_with_its_exact_digits() -> None:
    # orjson would read the saved digits back as the nearest float: 2**70, one off.
    call = ToolUsePart("", "pay", {"n": orjson.Fragment(DIGITS)})
    script = [ScriptedResponse([call]), ScriptedResponse.text("Paid.")]
    paid.clear()
    async with ScriptedModelServer("anthropic", script) as server, server.client() as client:
        first = await Worker(client, tools=[pay]).run("Pay")
        assert first.state is not None
        text = first.state.to_json()
        assert DIGITS.decode() in text
        state = PauseState.from_json(text)
        [pending] = state.pending
        done = await Worker(client, tools=[pay]).resume(
            state, decisions={pending.call.id: Decision.approve()}
        )
    assert paid == [WIDE]
    assert done.text == "Paid."


class Total(BaseModel):
    """A structured answer holding a number past 64 bits."""

    n: int


@pytest.mark.parametrize("mode", ["tool", "native"])
async def test_a_structured_answers_wide_integer_is_accepted_exactly(mode: str) -> None:
    # The output check raised an untyped TypeError in tool mode, and read the digits as a
    # float it then refused ("exceeded maximum size") in both modes.
    if mode == "tool":
        answer = ScriptedResponse([ToolUsePart("", "final_result", {"n": orjson.Fragment(DIGITS)})])
    else:
        answer = ScriptedResponse.text(f'{{"n": {WIDE}}}')
    async with ScriptedModelServer("anthropic", [answer]) as server, server.client() as client:
        worker = Worker(client, output_type=Total, output_mode=mode)  # type: ignore[arg-type]
        result = await worker.run("Total?")
    assert result.output == Total(n=WIDE)
