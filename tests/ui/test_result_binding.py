"""A signed tool result proves only the call it was made for: its id, its tool and its
arguments as the browser carries them back (`ui/_parts.result_mac`).

Moved onto another call of its id (`call_0` each turn; Gemini's `gemini_call_0` after a
regenerate) it proves nothing, on both protocols; a legitimate round trip through JavaScript
(numbers, key order, unicode) and through the official clients stays proven, and so do a
resumed run's result and the result of a call whose arguments a hook rewrote.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from llm_worker import Message, TextPart, ToolResultPart, ToolUsePart, Worker, tool
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    InputJsonDelta,
    ResponseStatus,
    StatusEvent,
    ToolUseMetadata,
)
from llm_worker.hooks import ToolCallContext
from llm_worker.state import PauseState, ToolResultReady
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.tools import ToolResult
from llm_worker.ui import VercelAIAdapter, messages_to_agui, messages_to_ui, to_vercel_stream
from llm_worker.ui._agui_messages import read_agui, snapshot_messages
from llm_worker.ui._record import NO_RECORD, reconcile
from llm_worker.ui._vercel_messages import read_ui

from .conftest import CONSUMERS, booking, scripted, serve
from .test_review_adapters import chunks
from .test_security import ADAPTERS, USER, approve, pause, post

pytestmark = pytest.mark.anyio

PROTOCOLS = ["vercel", "agui"]


def booked(*cities: str) -> list[Message]:
    """A turn per city: `book` called as `call_0` each time (an id reused), and booked."""
    history: list[Message] = []
    for city in cities:
        history += [
            Message.user(f"Book {city}"),
            Message("assistant", [ToolUsePart("call_0", "book", {"city": city})]),
            Message("user", [ToolResultPart("call_0", f"booked {city}", name="book")]),
            Message("assistant", [TextPart("Booked.")]),
        ]
    return history


def to_wire(protocol: str, history: list[Message]) -> list[Any]:
    """The history as the browser holds it (through JSON)."""
    body = messages_to_ui(history) if protocol == "vercel" else messages_to_agui(history)
    return json.loads(json.dumps(body))


def read(protocol: str, body: list[Any]) -> tuple[list[Message], Any]:
    return read_ui(body) if protocol == "vercel" else read_agui(body)


def calls_of(protocol: str, body: list[Any]) -> list[dict[str, Any]]:
    """The wire's tool calls (Vercel tool parts, AG-UI `toolCalls`), in order."""
    if protocol == "vercel":
        parts = [p for m in body for p in m.get("parts", [])]
        return [p for p in parts if str(p["type"]).startswith("tool-")]
    return [c for m in body for c in m.get("toolCalls", [])]


def set_city(protocol: str, call: dict[str, Any], city: str) -> None:
    if protocol == "vercel":
        call["input"] = {"city": city}
    else:
        call["function"]["arguments"] = json.dumps({"city": city})


def is_book(name: str | None) -> bool:
    return name == "book"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_result_shown_on_other_arguments_proves_nothing(protocol: str) -> None:
    body = to_wire(protocol, booked("Kyoto"))
    history, proven = read(protocol, body)
    assert history[2].tool_results[0] in proven  # the server's own, on its own call
    set_city(protocol, calls_of(protocol, body)[0], "Paris")
    history, proven = read(protocol, body)
    assert len(proven) == 0
    out = reconcile(history, {}, proven, is_book)
    assert out[2].tool_results[0].content == NO_RECORD


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_result_moved_to_a_later_call_of_its_id_proves_nothing(protocol: str) -> None:
    # Kyoto booked under call_0; the answer that called book(Paris) under call_0 again was
    # stopped before the call ran. The browser moves Kyoto's signed result onto it.
    history = [*booked("Kyoto"), Message.user("Now Paris")]
    history.append(Message("assistant", [ToolUsePart("call_0", "book", {"city": "Paris"})]))
    body = to_wire(protocol, history)
    if protocol == "vercel":
        kyoto, paris = calls_of(protocol, body)
        moved = {k: kyoto.pop(k) for k in ("output", "resultProviderMetadata")}
        paris.update(moved | {"state": "output-available"})
        kyoto["state"] = "input-available"
    else:
        tool_message = next(m for m in body if m["role"] == "tool")
        body.remove(tool_message)
        body.append(tool_message)
    back, proven = read(protocol, body)
    assert back[-1].tool_results[0].content == "booked Kyoto"  # shown after the Paris call
    assert len(proven) == 0
    out = reconcile(back, {}, proven, is_book)
    assert out[-1].tool_results[0].content == NO_RECORD


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_turn_of_a_reused_call_id_shows_and_proves_its_own_result(protocol: str) -> None:
    history = booked("Kyoto", "Paris")
    body = to_wire(protocol, history)
    if protocol == "vercel":  # one tool part per call, each with its own output
        assert [c["output"] for c in calls_of(protocol, body)] == ["booked Kyoto", "booked Paris"]
    back, proven = read(protocol, body)
    assert back == history
    assert len(proven) == 2
    assert reconcile(back, {}, proven, is_book) == history


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_result_whose_call_is_not_known_goes_unsigned(protocol: str) -> None:
    # A converter given the results without their call (a slice of the history) cannot say
    # which call they answer: it signs none, rather than one the browser may move anywhere.
    result = Message("user", [ToolResultPart("call_0", "booked Kyoto", name="book")])
    if protocol == "vercel":
        shown = messages_to_ui([result])
        assert shown == []  # a result without its call has no tool part to show it on
        return
    tool_message = snapshot_messages([result])[0]
    assert "mac" not in tool_message["encryptedValue"]
    calls = {"call_0": {"city": "Kyoto"}}
    signed = snapshot_messages([result], calls=calls)[0]
    assistant = messages_to_agui([booked("Kyoto")[1]])
    _, proven = read_agui([*assistant, signed])
    assert len(proven) == 1


async def test_the_encoder_signs_no_result_of_a_call_it_was_not_told_of() -> None:
    async def events() -> AsyncIterator[object]:
        yield ToolResultReady(ToolResult("call_9", "book", "booked Kyoto"))

    text = "".join([e async for e in to_vercel_stream(events(), message_id="m1")])
    (output,) = [c for c in chunks(text) if c["type"] == "tool-output-available"]
    assert "providerMetadata" not in output


async def test_the_error_result_of_a_call_with_broken_arguments_is_proven() -> None:
    # The model's arguments are not JSON: the history keeps the call with `{}`, the browser
    # shows the raw text (`rawInput`, no `input`); the tool's error result is the server's.
    async def events() -> AsyncIterator[object]:
        yield StatusEvent(ResponseStatus.STARTED)
        yield BlockStart(0, BlockType.TOOL_USE, ToolUseMetadata("call_0", "book"))
        yield BlockDelta(0, InputJsonDelta('{"city": '))
        yield BlockStop(0, BlockType.TOOL_USE)
        yield ToolResultReady(ToolResult("call_0", "book", "not JSON", is_error=True))

    text = "".join([e async for e in to_vercel_stream(events(), message_id="m1")])
    sent = {c["type"]: c for c in chunks(text)}
    part = {
        "type": "tool-book",
        "toolCallId": "call_0",
        "state": "output-error",
        "rawInput": sent["tool-input-error"]["input"],
        "errorText": sent["tool-output-error"]["errorText"],
        "resultProviderMetadata": sent["tool-output-error"]["providerMetadata"],
    }
    _, proven = read_ui([{"id": "a1", "role": "assistant", "parts": [part]}])
    assert len(proven) == 1


def test_hostile_arguments_nested_past_any_depth_prove_nothing() -> None:
    body = to_wire("vercel", booked("Kyoto"))
    deep: Any = "Kyoto"
    for _ in range(5_000):
        deep = {"d": deep}
    calls_of("vercel", body)[0]["input"] = {"city": deep}
    _, proven = read_ui(body)
    assert len(proven) == 0


# Values a browser's JSON round trip changes: JavaScript numbers (1.0 → 1, -0.0 → 0, an
# integer past 2**53 rounded, 1e300 → 1e+300), integer-like keys moved first, unicode and
# escapes, nested objects and lists.
ODD: dict[str, Any] = {
    "city": 'Zürich \U0001f600 \u2028 "quoted" \\ é',
    "nights": 2.0,
    "rate": 0.1,
    "zero": -0.0,
    "big": 2**53 + 1,
    "wide": 2**63 - 1,
    "far": 1e300,
    "when": {"b": [1.5, 2.0, {"10": 1, "a": None, "2": True}], "a": "x", "1": []},
}


async def through_javascript(value: Any) -> Any:
    """`value` after `JSON.parse` and `JSON.stringify` in node, as a browser sends it back."""
    script = (
        "let s='';process.stdin.on('data',d=>s+=d)"
        ".on('end',()=>process.stdout.write(JSON.stringify(JSON.parse(s))))"
    )
    with anyio.fail_after(30):
        done = await anyio.run_process(["node", "-e", script], input=orjson.dumps(value))
    return orjson.loads(done.stdout)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_round_trip_through_javascript_keeps_the_result_proven(
    protocol: str, node_modules: Path
) -> None:
    del node_modules  # needs node, as the consumers do
    history = [
        Message.user("Plan it"),
        Message("assistant", [ToolUsePart("call_0", "plan", ODD)]),
        Message("user", [ToolResultPart("call_0", "planned", name="plan")]),
    ]
    body = await through_javascript(to_wire(protocol, history))
    if protocol == "vercel":
        assert calls_of(protocol, body)[0]["input"]["big"] == 2**53  # rounded on the way
    _, proven = read(protocol, body)
    assert len(proven) == 1
    odder = json.loads(json.dumps(ODD) + " ")
    odder["big"] += 2  # another number than the call's, even past 2**53
    if protocol == "vercel":
        calls_of(protocol, body)[0]["input"] = odder
    else:
        calls_of(protocol, body)[0]["function"]["arguments"] = json.dumps(odder)
    _, proven = read(protocol, body)
    assert len(proven) == 0


# -- through the adapters ------------------------------------------------------------------


class Forgetful:
    """A `ToolRecord` that keeps nothing: each result must prove itself by its signature."""

    async def add(self, key: str, results: Sequence[Any]) -> None:
        del key, results

    async def results(self, key: str) -> Mapping[str, Any]:
        del key
        return {}


class JsonPauses:
    """A `PauseStore` keeping each pause as JSON, as one over a database does."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    async def put(self, chat_id: str, state: PauseState) -> None:
        self.kept[chat_id] = state.to_json()

    async def take(self, chat_id: str) -> PauseState | None:
        text = self.kept.pop(chat_id, None)
        return None if text is None else PauseState.from_json(text)


def signed_result(adapter: Any, text: str, call_id: str) -> Any:
    """The signed result of `call_id` an approval's answer carried, as the browser keeps it."""
    events = chunks(text)
    if adapter is VercelAIAdapter:
        (output,) = [
            c for c in events if c["type"] == "tool-output-available" and c["toolCallId"] == call_id
        ]
        return output["providerMetadata"]
    (snapshot,) = [c for c in events if c["type"] == "MESSAGES_SNAPSHOT"]
    return snapshot["messages"]


def next_turn(adapter: Any, signed: Any, call_id: str, city: str) -> dict[str, Any]:
    """The browser's next message, showing the signed result on a `book(city)` call."""
    if adapter is VercelAIAdapter:
        part = {
            "type": "tool-book",
            "toolCallId": call_id,
            "state": "output-available",
            "input": {"city": city},
            "output": "booked Kyoto",
            "resultProviderMetadata": signed,
        }
        answer = {"id": "a1", "role": "assistant", "parts": [part]}
        user = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "So?"}]}
        return {"id": "c1", "messages": [USER, answer, user], "trigger": "submit-message"}
    messages = json.loads(json.dumps(signed))
    for call in calls_of("agui", messages):
        if call["id"] == call_id and call["function"]["name"] == "book":
            call["function"]["arguments"] = json.dumps({"city": city})
    messages.append({"id": "u2", "role": "user", "content": "So?"})
    return {"threadId": "c1", "runId": "r3", "messages": messages, "tools": []}


@pytest.mark.parametrize(("provider", "city"), [("anthropic", "Kyoto"), ("gemini", "Paris")])
@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_an_approved_calls_signed_result_proves_that_call_alone(
    adapter: Any, provider: str, city: str
) -> None:
    # No record to fall back on: the booking the resumed run signed is the server's only by
    # its signature, which holds on the Kyoto call it answers and on no other (Gemini's
    # client numbers it `gemini_call_<n>`, and a later call the same after a regenerate).
    # The pause went through JSON before the resume (its calls are what the signature binds).
    script = [*booking("Booked."), ScriptedResponse.text("ok")]
    options = {"record": Forgetful(), "store": JsonPauses()}
    async with (
        scripted(provider, script) as (server, factory),
        serve(adapter(factory, **options)) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        call_id = await pause(adapter, http, url, "c1")
        answer = await approve(adapter, http, url, "c1", call_id)
        assert "booked Kyoto" in answer.text
        signed = signed_result(adapter, answer.text, call_id)
        response = await post(http, url, next_turn(adapter, signed, call_id, city))
        assert response.status_code == 200
        last = server.requests[-1].body.decode()
    if city == "Kyoto":
        assert "booked Kyoto" in last
        assert NO_RECORD[:30] not in last
    else:
        assert "booked Kyoto" not in last
        assert NO_RECORD[:30] in last


@tool(effect="read_only")
def plan(trip: dict[str, Any]) -> str:
    """Plan a trip."""
    return f"planned {trip['city'][:6]} for {trip['nights']} nights"


@tool(requires_approval=True)
def approved_plan(trip: dict[str, Any]) -> str:
    """Plan a trip, once a person allows it."""
    return f"planned {trip['city'][:6]} for {trip['nights']} nights"


def shorten(ctx: ToolCallContext) -> None:
    # A sanitizing rewrite: the tool gets other arguments than the model's (and the
    # browser's) call shows, in a new dict and in place.
    trip = dict(ctx.call.input["trip"])
    trip["nights"] = 3
    ctx.call.input = {"trip": trip}
    ctx.call.input["trip"]["city"] = "ZURICH"


@pytest.mark.parametrize("protocol", CONSUMERS)
@pytest.mark.parametrize("approval", [False, True])
async def test_a_result_round_trips_through_the_official_client_proven(
    protocol: str, approval: bool, node_modules: Path
) -> None:
    # Odd arguments (JavaScript numbers, key order, unicode), a hook rewriting them for the
    # tool, no record, every server tool's result to prove: the client's history comes back
    # with the result proven by its signature over the model's arguments. With approval the
    # result is a resumed run's (the call paused; the client's answer resumed it).
    consumer = CONSUMERS[protocol]
    name = "approved_plan" if approval else "plan"
    script = [
        ScriptedResponse([ToolUsePart("", name, {"trip": ODD})]),
        ScriptedResponse.text("Planned."),
        ScriptedResponse.text("Still planned."),
    ]
    plan_steps: list[dict[str, Any]] = [{"send": "Plan it"}]
    plan_steps += [{"approve": True}] if approval else []
    plan_steps += [{"send": "And now?"}]

    def worker(client: Any) -> Worker:
        made = Worker(client, tools=[plan, approved_plan])
        made.add_before_tool_call_hook(shorten)
        return made

    async with ScriptedModelServer("anthropic", script) as server, server.client() as client:
        adapter = consumer.adapter(
            lambda: worker(client), record=Forgetful(), trust_client_history=False
        )
        async with serve(adapter) as url:
            await consumer.consume(node_modules, url, plan_steps)
    third = server.requests[2].body.decode()
    assert "planned ZURICH for 3 nights" in third
    assert NO_RECORD[:30] not in third
