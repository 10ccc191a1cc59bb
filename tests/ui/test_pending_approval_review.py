"""Review: of a paused batch, only the calls that really wait on a decision ask for one.

A batch stops at the first call that pauses (a front-end call, a tool that asks for
approval); the calls after it are undecided, not waiting on a person. A `weather` call there
was shown as "Approve the call of weather?" (an AG-UI interrupt, a Vercel
`tool-approval-request`): the AG-UI client got an interrupt instead of its
`pendingToolCallIds`, and the Vercel card asked a question nothing waited for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import TextPart, ToolUsePart
from llm_worker.collectors import ToolCall
from llm_worker.state import PauseState, PendingCall
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter
from llm_worker.ui._frontend import awaiting_decision

from .conftest import AGUI, VERCEL, consumed, scripted, serve
from .test_review_adapters import chunks
from .test_session_frontend import AG_TOOL, SPEC

pytestmark = pytest.mark.anyio


def asking_then_weather() -> list[ScriptedResponse]:
    """A front-end `pick_color` call, then a `weather` call, in one answer."""
    step = ScriptedResponse(
        [
            TextPart("Let me ask."),
            ToolUsePart("", "pick_color", {"of": "car"}),
            ToolUsePart("", "weather", {"city": "Kyoto"}),
        ]
    )
    return [step, ScriptedResponse.text("Sunny, and red.")]


def booking_around_weather() -> list[ScriptedResponse]:
    """`book`, `weather`, `book` in one answer: the two `book` calls wait for approval."""
    step = ScriptedResponse(
        [
            TextPart("Booking."),
            ToolUsePart("", "book", {"city": "Kyoto"}),
            ToolUsePart("", "weather", {"city": "Kyoto"}),
            ToolUsePart("", "book", {"city": "Oslo"}),
        ]
    )
    return [step, ScriptedResponse.text("Booked both.")]


@pytest.mark.parametrize("kind", ["vercel", "ag-ui"])
async def test_only_the_calls_of_tools_asking_approval_are_asked_about(
    kind: str, node_modules: Path
) -> None:
    # book (the pause) - weather (undecided, runs on resume) - book (asks too): two questions.
    consumer = VERCEL if kind == "vercel" else AGUI
    plan: list[dict[str, Any]] = [{"send": "Book Kyoto and Oslo"}, {"approve": True}]
    async with consumed(consumer, node_modules, "anthropic", booking_around_weather(), plan) as run:
        out, server, _, _ = run
    if kind == "vercel":
        asked = [c["toolCallId"] for c in out["chunks"] if c["type"] == "tool-approval-request"]
        parts = out["messages"][1]["parts"]
        outputs = {p["toolCallId"][-6:]: p.get("output") for p in parts if "toolCallId" in p}
    else:
        asked = [i["toolCallId"] for i in out["finished"][0]["outcome"]["interrupts"]]
        tools = [m for m in out["messages"] if m["role"] == "tool"]
        outputs = {m["toolCallId"][-6:]: m["content"] for m in tools}
    assert [i[-6:] for i in asked] == ["call_0", "call_2"]
    assert outputs == {
        "call_0": "booked Kyoto",
        "call_1": "Kyoto: sunny",
        "call_2": "booked Oslo",
    }
    assert len(server.requests) == 2  # approved once: no second pause for weather


def test_without_the_tools_known_every_undecided_call_is_shown() -> None:
    # A direct user of the encoders who passes no `approval` keeps the former behaviour.
    calls = [ToolCall(f"c{n}", name, {}) for n, name in enumerate(["book", "weather"])]
    state = PauseState([], [PendingCall(c) for c in calls])
    assert [p.call.id for p in awaiting_decision(state, (), None)] == ["c0", "c1"]
    assert [p.call.id for p in awaiting_decision(state, (), {"book"})] == ["c0"]
    assert [p.call.id for p in awaiting_decision(state, {"book"}, {"book"})] == []


@pytest.mark.parametrize("auto", [True, False])
async def test_the_server_call_beside_a_front_end_call_runs_once_its_output_comes(
    auto: bool, node_modules: Path
) -> None:
    # The `weather` call after the browser's call waited undecided; the browser's output
    # goes on with the paused batch, so weather runs (it was given "interrupted" before, the
    # browser's output starting a new run). With `auto`, the app's sendAutomaticallyWhen
    # (lastAssistantMessageIsCompleteWithToolCalls) sends the output on its own: the server
    # call is not left for the browser to answer.
    plan: list[dict[str, Any]] = [
        {"send": "Weather and a color?"},
        {"clientTool": "red", "tool": "pick_color", "auto": auto},
    ]
    script = asking_then_weather()
    async with consumed(
        VERCEL, node_modules, "openai_chat", script, plan, frontend_tools=[SPEC]
    ) as run:
        out, server, factory, _ = run
    assert len(server.requests) == 2
    parts = out["messages"][1]["parts"]
    tools = {p["type"]: (p["state"], p.get("output")) for p in parts if "toolCallId" in p}
    assert tools == {
        "tool-pick_color": ("output-available", "red"),
        "tool-weather": ("output-available", "Kyoto: sunny"),
    }
    results = [(r.name, r.content) for m in factory.workers[1].history for r in m.tool_results]
    assert results == [("pick_color", "red"), ("weather", "Kyoto: sunny")]
    assert out["messages"][1]["parts"][-1]["text"] == "Sunny, and red."


async def test_the_ag_ui_clients_tool_message_runs_the_server_call_beside_it(
    node_modules: Path,
) -> None:
    plan = [{"send": "Weather and a color?", "tools": [AG_TOOL]}, {"toolResult": "red"}]
    async with consumed(AGUI, node_modules, "gemini", asking_then_weather(), plan) as run:
        out, server, factory, _ = run
    first = out["finished"][0]["outcome"]  # not an interrupt "Approve the call of weather?"
    assert first["type"] == "success"
    assert [i[-6:] for i in first["pendingToolCallIds"]] == ["call_0"]
    assert len(server.requests) == 2
    results = [(r.name, r.content) for m in factory.workers[1].history for r in m.tool_results]
    assert results == [("pick_color", "red"), ("weather", "Kyoto: sunny")]
    tools = {m["toolCallId"][-6:]: m["content"] for m in out["messages"] if m["role"] == "tool"}
    assert tools == {"call_0": "red", "call_1": "Kyoto: sunny"}


@pytest.mark.parametrize("later", [False, True])
async def test_an_ag_ui_tool_message_followed_by_a_new_message_starts_a_new_run(
    later: bool,
) -> None:
    # Only a request ending with the outputs alone goes on with the pause; one whose client
    # wrote a new message after them starts a new run from it, as any new message does.
    script = [*asking_then_weather(), ScriptedResponse.text("Fine.")]
    async with (
        scripted("anthropic", script) as (server, factory),
        serve(AGUIAdapter(factory)) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        ask = {"threadId": "t1", "runId": "r1", "tools": [AG_TOOL]}
        first = [{"id": "u1", "role": "user", "content": "Weather and a color?"}]
        with anyio.fail_after(10):
            asked = await http.post(url, json={**ask, "messages": first})
        calls = {
            c["toolCallName"]: c["toolCallId"]
            for c in chunks(asked.text)
            if c["type"] == "TOOL_CALL_START"
        }
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
            for n, i in calls.items()
        ]
        history = [
            *first,
            {"id": "a1", "role": "assistant", "content": "Let me ask.", "toolCalls": tool_calls},
            {"id": "t1", "role": "tool", "toolCallId": calls["pick_color"], "content": "red"},
        ]
        if later:
            history.append({"id": "u2", "role": "user", "content": "Never mind the weather."})
        with anyio.fail_after(10):
            done = await http.post(url, json={**ask, "runId": "r2", "messages": history})
        assert done.status_code == 200, done.text
        request = server.requests[1].body.decode()
    assert ("Never mind the weather." in request) is later
    assert ("Kyoto: sunny" in request) is not later
