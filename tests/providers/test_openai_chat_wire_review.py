"""Review probes of issue 28's Chat items: tool-call fragments told apart by id and index,
a stream complete at its finish reason, Mistral thinking (items 1, 2 and 4).

Each stream goes over HTTP on 127.0.0.1 through the real `OpenAIChatClient`.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_openai_chat_support import check_invariants, replay

from llm_worker.events import BlockDelta, BlockStart, Event, InputJsonDelta, ToolUseMetadata
from llm_worker.testing import WireResponse

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]

DONE = b"data: [DONE]\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"


def _fragment(
    index: int | None, args: str, call_id: str | None = None, name: str | None = None
) -> bytes:
    call: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        call["index"] = index
    if call_id is not None:
        call["id"] = call_id
    if name is not None:
        call["function"]["name"] = name
    return _chunk({"tool_calls": [call]})


def _calls(events: list[Event]) -> list[tuple[str, str, str]]:
    """(id, name, raw arguments) of each tool block, in order."""
    metas: dict[int, ToolUseMetadata] = {}
    args: dict[int, str] = {}
    for event in events:
        if isinstance(event, BlockStart) and isinstance(event.metadata, ToolUseMetadata):
            metas[event.index] = event.metadata
            args[event.index] = ""
        elif isinstance(event, BlockDelta) and isinstance(event.delta, InputJsonDelta):
            args[event.index] += event.delta.partial_json
    return [(metas[i].id, metas[i].name, args[i]) for i in sorted(metas)]


async def _read(body: bytes) -> tuple[list[Event], Exception | None]:
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    return events, error


async def test_an_id_arriving_on_a_later_fragment_continues_the_call() -> None:
    body = (
        _fragment(0, "", None, "lookup")
        + _fragment(0, '{"city": ', "call_late")
        + _fragment(0, '"Kyoto"}')
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error = await _read(body)
    assert error is None
    ((_, name, args),) = _calls(events)
    assert (name, orjson.loads(args)) == ("lookup", {"city": "Kyoto"})


async def test_an_id_changing_on_every_fragment_of_one_call_is_one_call() -> None:
    # A proxy that makes up a fresh id for each chunk of one call (the function's name only
    # in the first): the fragments without a name continue the unfinished call.
    body = (
        _fragment(0, '{"ci', "call_a", "lookup")
        + _fragment(0, 'ty": "Ky', "call_b")
        + _fragment(0, 'oto"}', "call_c")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error = await _read(body)
    assert error is None
    assert _calls(events) == [("call_a", "lookup", '{"city": "Kyoto"}')]


async def test_empty_string_ids_continue_the_call() -> None:
    body = (
        _fragment(0, '{"city": ', "", "lookup")
        + _fragment(0, '"Kyoto"}', "")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error = await _read(body)
    assert error is None
    ((call_id, name, args),) = _calls(events)
    assert call_id.startswith("call_") and name == "lookup"
    assert orjson.loads(args) == {"city": "Kyoto"}


@pytest.mark.parametrize("index", [0, None], ids=["index-0", "no-index"])
@pytest.mark.parametrize("call_id", ["", None], ids=["empty-id", "no-id"])
async def test_whole_calls_at_one_index_without_ids_are_separate_calls(
    call_id: str | None, index: int | None
) -> None:
    # Ollama's shape from a server that gives no ids: each call whole, each naming its
    # function, all at index 0. A complete object cannot grow: a named fragment after it is
    # the next call, not arguments glued on ('{"city":"Kyoto"}{"city":"Osaka"}').
    body = (
        _fragment(index, '{"city": "Kyoto"}', call_id, "lookup")
        + _fragment(index, '{"city": "Osaka"}', call_id, "lookup")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error = await _read(body)
    assert error is None
    calls = _calls(events)
    assert [(n, orjson.loads(a)) for _, n, a in calls] == [
        ("lookup", {"city": "Kyoto"}),
        ("lookup", {"city": "Osaka"}),
    ]
    assert calls[0][0] != calls[1][0]


async def test_fragments_without_index_are_told_apart_by_id() -> None:
    body = (
        _fragment(None, '{"city": ', "call_1", "lookup")
        + _fragment(None, '"Kyoto"}')
        + _fragment(None, '{"city": "Osaka"}', "call_2", "lookup")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error = await _read(body)
    assert error is None
    assert _calls(events) == [
        ("call_1", "lookup", '{"city": "Kyoto"}'),
        ("call_2", "lookup", '{"city": "Osaka"}'),
    ]


async def test_calls_interleaved_with_text_keep_their_order() -> None:
    body = (
        _chunk({"content": "First "})
        + _fragment(0, '{"city": "Kyoto"}', "call_1", "lookup")
        + _chunk({"content": "then "})
        + _fragment(0, '{"city": "Osaka"}', "call_2", "lookup")
        + _chunk({}, "tool_calls")
        + DONE
    )
    events, error = await _read(body)
    assert error is None
    assert [c[0] for c in _calls(events)] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    "bad",
    [
        {"index": 0, "id": 7, "function": {"name": "lookup", "arguments": "{}"}},
        {"index": 0, "id": "c", "function": {"name": ["x"], "arguments": "{}"}},
        {"index": 0, "id": "\ud800", "function": {"name": "lookup", "arguments": "{}"}},
        {"index": 0, "id": "c", "function": "lookup"},
        {"index": "0", "id": "c", "function": {"name": "lookup", "arguments": "{}"}},
        {"index": True, "id": "c", "function": {"name": "lookup", "arguments": "{}"}},
    ],
    ids=["int-id", "list-name", "lone-surrogate", "function-string", "index-string", "index-bool"],
)
async def test_hostile_fragments_end_typed(bad: dict[str, Any]) -> None:
    from llm_worker.errors import LLMWorkerError

    raw = (
        orjson.dumps(
            {"choices": [{"index": 0, "delta": {"tool_calls": [bad]}, "finish_reason": None}]},
            option=orjson.OPT_NON_STR_KEYS,
        )
        if bad.get("id") != "\ud800"
        else None
    )
    if raw is None:  # orjson refuses to write a lone surrogate: write the escape by hand
        raw = (
            b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"\\ud800",'
            b'"function":{"name":"lookup","arguments":"{}"}}]},"finish_reason":null}]}'
        )
    body = b"data: " + raw + b"\n\n" + _chunk({}, "tool_calls") + DONE
    events, error = await _read(body)
    assert error is None or isinstance(error, LLMWorkerError), repr(error)
    if error is None:  # read leniently: then it is the one call it says
        assert [name for _, name, _ in _calls(events)] == ["lookup"]


async def test_a_call_cut_by_length_then_eof_reaches_the_worker_as_a_call_it_can_refuse() -> None:
    # finish_reason "length" in a call's arguments, then the body ends (no usage, no [DONE]):
    # the answer is complete (the server said so) and cut by a limit; the Worker does not
    # run the cut call with made-up arguments, and the run ends typed or answered.
    from test_openai_chat_support import client_for

    from llm_worker import Worker, tool
    from llm_worker.errors import LLMWorkerError
    from llm_worker.messages import ToolUsePart
    from llm_worker.testing import WireServer

    ran: list[str] = []

    @tool
    async def lookup(city: str) -> str:
        """Look up a city."""
        ran.append(city)
        return "clear"

    cut = _fragment(0, '{"city": "Kyo', "call_1", "lookup") + _chunk({}, "length")
    final = _chunk({"content": "Sorry."}) + _chunk({}, "stop")
    async with WireServer([WireResponse(cut), WireResponse(final)]) as server:
        client = client_for(server)
        worker = Worker(client, tools=[lookup])
        try:
            with anyio.fail_after(10):
                await worker.run("Weather?")
        except LLMWorkerError:
            pass
        finally:
            await client.aclose()
    assert ran == []  # never run with arguments the model did not finish
    calls = [p for m in worker.history for p in m.content if isinstance(p, ToolUsePart)]
    answered = [r.tool_use_id for m in worker.history for r in m.tool_results]
    assert sorted(p.id for p in calls) == sorted(answered)


async def test_a_server_reusing_one_call_id_in_every_turn_still_pairs_each_result() -> None:
    # Some local servers number calls per answer (call_0 in every turn): each turn's result
    # answers its own turn's call, and the request after them is one the SDK types take.
    from test_openai_chat_support import client_for

    from llm_worker import Worker, tool
    from llm_worker.testing import WireServer
    from support.wire_bodies import assert_valid

    seen: list[str] = []

    @tool
    async def lookup(city: str) -> str:
        """Look up a city."""
        seen.append(city)
        return f"{city}: clear"

    def turn(city: str) -> WireResponse:
        args = orjson.dumps({"city": city}).decode()
        return WireResponse(_fragment(0, args, "call_0", "lookup") + _chunk({}, "tool_calls"))

    final = _chunk({"content": "Both clear."}) + _chunk({}, "stop") + DONE
    async with WireServer([turn("Kyoto"), turn("Osaka"), WireResponse(final)]) as server:
        client = client_for(server)
        try:
            worker = Worker(client, tools=[lookup])
            with anyio.fail_after(10):
                result = await worker.run("Kyoto, then Osaka.")
        finally:
            await client.aclose()
        bodies = [r.json() for r in server.requests]
    assert result.text == "Both clear." and seen == ["Kyoto", "Osaka"]
    last = bodies[2]["messages"]
    tools = [m for m in last if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        ("call_0", "Kyoto: clear"),
        ("call_0", "Osaka: clear"),
    ]
    assert_valid("openai_chat", bodies[2])


async def test_another_choices_finish_does_not_complete_the_answer() -> None:
    # n > 1: choice 1 finishing says nothing of choice 0, the one read; a body ending then
    # is an interrupted answer, not a complete one.
    from llm_worker.errors import StreamInterruptedError

    other = {"choices": [{"index": 1, "delta": {"content": "x"}, "finish_reason": "stop"}]}
    body = _chunk({"content": "Half an ans"}) + b"data: " + orjson.dumps(other) + b"\n\n"
    _, error = await _read(body)
    assert isinstance(error, StreamInterruptedError)
