"""A lone surrogate at every place llm_worker.ui writes history or a caller's text as JSON.

No UTF-8 stream can carry one (orjson refuses it). The library's rule: the history a caller
gives is refused with `InvalidMessagesError` naming the place, never the text (as a request
is before it is sent); a tool's result is made valid where it enters the history (U+FFFD).
So the converters refuse, naming message, part and field; a run's stream shows a tool's
result as the history keeps it; a stream that meets one anyway (a hand-made event, a
caller's id) ends with its protocol's error chunk, never a broken connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import orjson
import pytest

from llm_worker import MemoryBlobStore, Message, Worker, tool
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Citation,
    DocumentPart,
    Origin,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import (
    AGUIAdapter,
    VercelAIAdapter,
    messages_from_agui,
    messages_from_ui,
    messages_to_agui,
    messages_to_ui,
    to_agui_events,
    to_vercel_stream,
)
from llm_worker.ui._agui_messages import read_agui
from llm_worker.ui._vercel_messages import read_ui

from .conftest import serve

LONE = "SECRET-\ud800-TEXT"  # the text around it must not reach the error either
ORIGIN = Origin("anthropic", "claude")
CALL = Message("assistant", [ToolUsePart("c1", "files", {})])
Converter = Callable[[list[Message]], list[dict[str, Any]]]
CONVERTERS: list[Converter] = [messages_to_agui, messages_to_ui]


def _in(part: Part) -> list[Message]:
    """`part` as the second message of a history (at index 1, part 1)."""
    if isinstance(part, ToolResultPart):
        return [CALL, Message("user", [ToolResultPart("c0", "ok", name="files"), part])]
    role = "user" if isinstance(part, DocumentPart) else "assistant"
    return [Message.user("hi"), Message(role, [TextPart("before"), part])]


PLACES: dict[str, tuple[Part, str, str]] = {
    "user text": (TextPart(LONE), "text", "text"),
    "assistant text": (TextPart(LONE, origin=ORIGIN), "text", "text"),
    "thinking": (ThinkingPart(LONE, signature="s", origin=ORIGIN), "thinking", "text"),
    "a signature": (ThinkingPart("t", signature=LONE, origin=ORIGIN), "thinking", "signature"),
    "an item id": (TextPart("t", item_id=LONE, origin=ORIGIN), "text", "item_id"),
    "a citation": (
        TextPart("t", citations=[Citation({"n": 1}, title=LONE)], origin=ORIGIN),
        "text",
        "citations",
    ),
    "call arguments": (ToolUsePart("c1", "files", {"path": LONE}), "tool_use", "input"),
    "an argument's key": (ToolUsePart("c1", "files", {LONE: 1}), "tool_use", "input"),
    "a call's name": (ToolUsePart("c1", LONE, {}), "tool_use", "name"),
    "a tool result": (ToolResultPart("c1", LONE, name="files"), "tool_result", "content"),
    "a result's name": (ToolResultPart("c1", "ok", name=LONE), "tool_result", "name"),
    "provider data": (ProviderPart({"x": LONE}, origin=ORIGIN), "provider", "data"),
    "a document's name": (
        DocumentPart(data=b"hi", media_type="text/plain", name=LONE),
        "document",
        "name",
    ),
}


@pytest.mark.parametrize("converter", CONVERTERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("place", list(PLACES))
def test_the_converters_refuse_a_lone_surrogate_naming_its_place(
    converter: Converter, place: str
) -> None:
    part, kind, field = PLACES[place]
    if converter is messages_to_ui and place == "a result's name":
        # Not written (a tool part is named by its call): what is sent is JSON, the result
        # unsigned (its signature binds the name).
        sent = orjson.dumps(converter(_in(part))).decode()
        assert '"mac"' not in sent.split('"toolCallId":"c1"')[1]
        return
    with pytest.raises(InvalidMessagesError) as caught:
        converter(_in(part))
    text = str(caught.value)
    assert f"message 1, part 1 ({kind}): its `{field}` holds text that is not valid" in text
    assert "SECRET" not in text and "TEXT" not in text
    assert caught.value.__cause__ is None  # nothing of orjson's chained, nor the value
    assert not isinstance(caught.value, TypeError)


@pytest.mark.parametrize("converter", CONVERTERS, ids=lambda c: c.__name__)
def test_a_value_that_is_not_json_is_refused_by_message(converter: Converter) -> None:
    deep: list[Any] = []
    for _ in range(300):  # past orjson's (and pydantic's) nesting
        deep = [deep]
    history = [Message.user("hi"), Message("assistant", [ToolUsePart("c1", "f", {"n": deep})])]
    with pytest.raises(InvalidMessagesError, match=r"^message 1: .* not JSON"):
        converter(history)


@pytest.mark.parametrize("converter", CONVERTERS, ids=lambda c: c.__name__)
def test_an_integer_past_64_bits_is_not_taken_for_text_json_cannot_carry(
    converter: Converter,
) -> None:
    # The streams write it with its digits (_wide_json): the check lets it through.
    history = [Message.user("hi"), Message("assistant", [ToolUsePart("c1", "f", {"n": 2**70})])]
    assert str(2**70) in str(converter(history))


@pytest.mark.parametrize("converter", CONVERTERS, ids=lambda c: c.__name__)
def test_a_valid_history_converts_and_encodes_as_before(converter: Converter) -> None:
    history = [
        Message.user("caf\u00e9 \U0001f600 \ufffd"),
        CALL,
        _in(PLACES["a tool result"][0])[1],
    ]
    history[-1].content[1] = ToolResultPart("c1", "\U0001f600", name="files")
    assert orjson.loads(orjson.dumps(converter(history))) == converter(history)


def test_reading_a_tool_output_that_json_cannot_carry_names_the_message_and_call() -> None:
    part = {
        "type": "tool-files",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {},
        "output": {"path": LONE},
    }
    messages = [{"role": "user", "parts": []}, {"role": "assistant", "parts": [part]}]
    with pytest.raises(InvalidMessagesError) as caught:
        messages_from_ui(messages)
    assert "UI message 1 is not valid: the output of tool call 'c1' is not JSON" in str(
        caught.value
    )
    assert "SECRET" not in str(caught.value)


def test_reading_call_arguments_that_are_not_unicode_is_refused_not_emptied() -> None:
    def assistant(arguments: str) -> dict[str, Any]:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
        return {"id": "a", "role": "assistant", "content": "", "toolCalls": [call]}

    with pytest.raises(InvalidMessagesError) as caught:
        messages_from_agui([assistant('{"path": "' + LONE + '"}')])
    assert "AG-UI message 0 is not valid: the arguments of tool call 'c1' hold text" in str(
        caught.value
    )
    assert "SECRET" not in str(caught.value)
    # Broken JSON is still read as empty arguments, as the Worker keeps such a call.
    [message] = messages_from_agui([assistant('{"path": ')])
    assert message.tool_uses[0].input == {}


# -- a run's stream ----------------------------------------------------------------------

FILE_NAME = "report-\udcff.txt"  # a name `os.fsdecode` escaped
SHOWN = "report-\ufffd.txt"  # as the history keeps it


@tool
def files() -> str:
    """Lists the files."""
    return FILE_NAME


def _worker() -> Worker:
    script = [ScriptedResponse([ToolUsePart("c1", "files", {})]), ScriptedResponse.text("Done.")]
    return Worker(ScriptedClient(script), tools=[files])


def _chunks(lines: list[str]) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in lines if line != "data: [DONE]\n\n"]


async def _lines(stream: AsyncIterator[str]) -> list[str]:
    with anyio.fail_after(10):
        return [line async for line in stream]


@pytest.mark.anyio
async def test_a_tool_result_streams_to_vercel_as_the_history_keeps_it_and_reads_back_signed() -> (
    None
):
    run = _worker().stream([Message.user("ls")])
    chunks = _chunks(await _lines(to_vercel_stream(run, message_id="m1")))
    [output] = [c for c in chunks if c["type"] == "tool-output-available"]
    assert output["output"] == SHOWN
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "stop"
    # The browser sends the part back: its signature is the history's text's, so the
    # server takes it as its tool's result.
    part = {
        "type": "tool-files",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {},
        "output": output["output"],
        "resultProviderMetadata": output["providerMetadata"],
    }
    history, proven = read_ui([{"role": "assistant", "parts": [part]}])
    [result] = history[1].tool_results
    assert result.content == SHOWN
    assert result in proven


@pytest.mark.anyio
async def test_a_tool_result_streams_to_agui_as_the_history_keeps_it_and_reads_back_signed() -> (
    None
):
    run = _worker().stream([Message.user("ls")])
    events = _chunks(await _lines(to_agui_events(run, thread_id="t", run_id="r")))
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == SHOWN
    assert events[-1]["type"] == "RUN_FINISHED"
    [snapshot] = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    history, proven = read_agui(snapshot["messages"])
    [kept] = history[2].tool_results
    assert kept.content == SHOWN
    assert kept in proven


@tool
def listing() -> str:
    """Lists many files."""
    return f"{FILE_NAME}\n" * 20_000  # past the blob store's threshold


@pytest.mark.anyio
async def test_a_stored_result_streams_to_vercel_with_the_size_of_its_blob() -> None:
    script = [ScriptedResponse([ToolUsePart("c1", "listing", {})]), ScriptedResponse.text("ok")]
    store = MemoryBlobStore()
    worker = Worker(ScriptedClient(script), tools=[listing], blob_store=store)
    chunks = _chunks(
        await _lines(to_vercel_stream(worker.stream([Message.user("ls")]), message_id="m1"))
    )
    [blob] = [c["data"] for c in chunks if c["type"] == "data-llm-worker-blob"]
    # The store keeps the text as UTF-8 with the lone surrogate passed through (3 bytes).
    assert blob["size"] == len(f"{FILE_NAME}\n".encode("utf-8", "surrogatepass")) * 20_000
    assert chunks[-1]["type"] == "finish" and chunks[-1]["finishReason"] == "stop"


def _last(protocol: str, lines: list[str]) -> list[dict[str, Any]]:
    if protocol == "vercel":
        assert lines[-1] == "data: [DONE]\n\n"
        return _chunks(lines)[-2:]
    return _chunks(lines)[-1:]


ERROR_END = {
    "vercel": [
        {"type": "error", "errorText": "An error occurred."},
        {"type": "finish", "finishReason": "error"},
    ],
    "ag-ui": [{"type": "RUN_ERROR", "message": "An error occurred.", "code": "RunError"}],
}


def _stream(protocol: str, run: Any, ident: str, **more: Any) -> AsyncIterator[str]:
    if protocol == "vercel":
        return to_vercel_stream(run, message_id=ident)
    return to_agui_events(run, thread_id=ident, run_id="r", **more)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
async def test_an_id_no_utf8_carries_ends_the_stream_with_its_error_chunk(protocol: str) -> None:
    # The stream opened with the id raised out of the generator: a broken connection.
    run = Worker(ScriptedClient([ScriptedResponse.text("hi")])).stream([Message.user("x")])
    lines = await _lines(_stream(protocol, run, "chat-\ud800"))
    assert _last(protocol, lines) == ERROR_END[protocol]


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
async def test_call_arguments_a_hand_made_client_streams_end_with_the_error_chunk(
    protocol: str,
) -> None:
    # A provider's parser makes a lone surrogate U+FFFD; a client of one's own may not.
    script = [ScriptedResponse([ToolUsePart("c1", "files", {"path": LONE})])]
    run = Worker(ScriptedClient(script), tools=[files]).stream([Message.user("x")])
    lines = await _lines(_stream(protocol, run, "chat-1"))
    assert _last(protocol, lines) == ERROR_END[protocol]
    assert not any("SECRET" in line for line in lines)


@pytest.mark.anyio
async def test_an_agui_history_no_utf8_carries_ends_the_run_with_run_error() -> None:
    run = Worker(ScriptedClient([ScriptedResponse.text("hi")])).stream([Message.user("x")])
    history = [{"id": "h-0", "role": "user", "content": LONE}]
    lines = await _lines(_stream("ag-ui", run, "chat-1", history=history, skip=1))
    assert _last("ag-ui", lines) == ERROR_END["ag-ui"]


# -- the adapters, over HTTP -------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter], ids=lambda a: a.__name__)
async def test_an_adapters_run_whose_tool_returns_a_lone_surrogate_finishes(adapter: Any) -> None:
    if adapter is VercelAIAdapter:
        user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "ls"}]}
        body: dict[str, Any] = {"id": "c1", "messages": [user], "trigger": "submit-message"}
    else:
        user = {"id": "u1", "role": "user", "content": "ls"}
        body = {"threadId": "t1", "runId": "r1", "messages": [user], "tools": []}
    async with serve(adapter(_worker)) as url, httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(10):
            response = await http.post(url, json=body)
    assert response.status_code == 200
    chunks = [orjson.loads(line[6:]) for line in response.text.split("\n\n") if line[6:7] == "{"]
    assert any(SHOWN in orjson.dumps(c).decode() for c in chunks)
    last = chunks[-1]["type"]
    assert last == ("finish" if adapter is VercelAIAdapter else "RUN_FINISHED"), chunks[-1]
