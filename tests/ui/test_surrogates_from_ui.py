"""A lone surrogate in what a browser sent, given to the converters by a caller's own server.

The adapters parse a body with orjson, which refuses `"\\ud800"`; the stdlib's `json.loads`
reads it as a lone surrogate. `messages_from_ui` / `messages_from_agui` refuse one where it is
read (`InvalidMessagesError` naming message and field, never the text), as `messages_to_*`
refuse one in a history: let through, the next provider request would refuse the history,
far from the cause.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from llm_worker import Message
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from llm_worker.ui import messages_from_agui, messages_from_ui, messages_to_agui, messages_to_ui

LONE = "SECRET-\ud800-TEXT"  # the text around it must not reach the error either
Reader = Callable[[list[Any]], list[Message]]


def _parsed(messages: list[dict[str, Any]]) -> list[Any]:
    """`messages` as a caller's server reads a body: written, then parsed by the stdlib."""
    body = json.dumps(messages)  # a lone surrogate written as its `\\ud800` escape
    if "\\ud800" in body:
        with pytest.raises(orjson.JSONDecodeError):  # what the adapters' own parser does
            orjson.loads(body)
    return json.loads(body)


def _ui(*parts: dict[str, Any], role: str = "assistant", **fields: Any) -> dict[str, Any]:
    return {"id": "m", "role": role, "parts": list(parts), **fields}


def _tool(**fields: Any) -> dict[str, Any]:
    return {"type": "tool-files", "toolCallId": "c1", "state": "input-available", "input": {}} | (
        fields
    )


def _call(**function: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    call["function"] |= function
    return {"id": "a", "role": "assistant", "content": "", "toolCalls": [call]}


_SIGNED = {"providerMetadata": {"llmWorker": {"signature": LONE}}}

# (reader, the message at index 1, the error's place)
PLACES: dict[str, tuple[Reader, dict[str, Any], str]] = {
    "ui user text": (
        messages_from_ui,
        _ui({"type": "text", "text": LONE}, role="user"),
        "text in its `parts[0].text`",
    ),
    "ui file name": (
        messages_from_ui,
        _ui(
            {"type": "file", "mediaType": "text/plain", "url": "data:,hi", "filename": LONE},
            role="user",
        ),
        "text in its `parts[0].filename`",
    ),
    "ui reasoning": (
        messages_from_ui,
        _ui({"type": "reasoning", "text": LONE}),
        "text in its `parts[0].text`",
    ),
    "ui opaque data": (
        messages_from_ui,
        _ui({"type": "text", "text": "t", **_SIGNED}),
        "text in its `parts[0].providerMetadata`",
    ),
    "ui call arguments": (
        messages_from_ui,
        _ui(_tool(input={"path": LONE})),
        "text in its `parts[0].input`",
    ),
    "ui an argument's key": (
        messages_from_ui,
        _ui(_tool(input={LONE: 1})),
        "a key in its `parts[0].input`",
    ),
    "ui call id": (messages_from_ui, _ui(_tool(toolCallId=LONE)), "its `parts[0].toolCallId`"),
    "ui error text": (
        messages_from_ui,
        _ui(_tool(state="output-error", errorText=LONE)),
        "text in its `parts[0].errorText`",
    ),
    "ui a field no model reads": (
        messages_from_ui,
        _ui({"type": "text", "text": "t"}, metadata={"note": LONE}),
        "text in its `metadata`",
    ),
    "ag-ui user text": (
        messages_from_agui,
        {"id": "u", "role": "user", "content": LONE},
        "text in its `content`",
    ),
    "ag-ui user part": (
        messages_from_agui,
        {"id": "u", "role": "user", "content": [{"type": "text", "text": LONE}]},
        "text in its `content[0].text`",
    ),
    "ag-ui assistant text": (
        messages_from_agui,
        {"id": "a", "role": "assistant", "content": LONE},
        "text in its `content`",
    ),
    "ag-ui reasoning": (
        messages_from_agui,
        {"id": "r", "role": "reasoning", "content": LONE},
        "text in its `content`",
    ),
    "ag-ui a call's name": (
        messages_from_agui,
        _call(name=LONE),
        "text in its `toolCalls[0].function`",
    ),
    "ag-ui a tool's output": (
        messages_from_agui,
        {"id": "t", "role": "tool", "toolCallId": "c1", "content": LONE},
        "text in its `content`",
    ),
    "ag-ui a message key": (
        messages_from_agui,
        {"id": "u", "role": "user", "content": "hi", LONE: 1},
        "a key in it",
    ),
}


@pytest.mark.parametrize("place", list(PLACES))
def test_a_lone_surrogate_a_stdlib_parse_let_through_is_refused_naming_its_place(
    place: str,
) -> None:
    reader, message, where = PLACES[place]
    first = _ui({"type": "text", "text": "hi"}, role="user")
    if reader is messages_from_agui:
        first = {"id": "u0", "role": "user", "content": "hi"}
    with pytest.raises(InvalidMessagesError) as caught:
        reader(_parsed([first, message]))
    text = str(caught.value)
    protocol = "UI" if reader is messages_from_ui else "AG-UI"
    assert text.startswith(f"{protocol} message 1: "), text
    assert f"{where} is not valid Unicode (a lone surrogate)" in text
    assert "SECRET" not in text and "TEXT" not in text
    assert caught.value.__cause__ is None  # nothing of orjson's chained, nor the value


def test_a_place_is_named_deep_down_without_recursing() -> None:
    deep: Any = {"n": LONE}
    for _ in range(900):  # as deep as the stdlib parses (past orjson's 255 levels)
        deep = [deep]
    body = json.dumps([_ui({"type": "text", "text": "t"}, role="user", metadata=deep)])
    named = r"^UI message 0: text in its `metadata\[0\]` is not valid"
    with pytest.raises(InvalidMessagesError, match=named):
        messages_from_ui(json.loads(body))


def test_what_the_adapters_parse_reads_as_it_did() -> None:
    history = [
        Message.user("caf\u00e9 \U0001f600 \ufffd"),
        Message(
            "assistant",
            [
                ThinkingPart("hmm", signature="sig"),
                TextPart("\U0001f600 done"),
                ToolUsePart("c1", "f", {"n": 2**70, "s": "\u00e9"}),
            ],
        ),
        Message("user", [ToolResultPart("c1", "ok \U0001f600", name="f")]),
    ]
    for to, reader in ((messages_to_ui, messages_from_ui), (messages_to_agui, messages_from_agui)):
        sent = json.dumps(to(history))  # astral characters written as surrogate pairs
        assert reader(json.loads(sent)) == reader(orjson.loads(sent))
        assert reader(iter(json.loads(sent))) == reader(orjson.loads(sent))  # any iterable


def test_a_value_no_json_has_is_left_to_the_reader_as_before() -> None:
    # A caller's own object in a field no model reads (a cycle, a set): not text, not refused
    # here; the walk visits each container once.
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    ui = _ui({"type": "text", "text": "hi"}, role="user", metadata={"c": cycle, "s": {1}})
    assert messages_from_ui([ui]) == [Message.user("hi")]
    agui = {"id": "u", "role": "user", "content": "hi", "extra": cycle}
    assert messages_from_agui([agui]) == [Message.user("hi")]


@pytest.mark.parametrize("reader", [messages_from_ui, messages_from_agui])
@pytest.mark.parametrize("given", [None, 3, "hi", {"messages": []}, b"[]"])
def test_messages_that_are_not_a_list_are_refused_typed(reader: Reader, given: Any) -> None:
    # A body's `messages` missing (None), or the body itself: not a bare TypeError, nor
    # its characters or keys refused one by one as messages.
    with pytest.raises(InvalidMessagesError, match=r"messages must be a list of messages, not"):
        reader(given)
