"""Messages: lossless JSON round trip for any message, readable errors for bad input."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Citation,
    DocumentPart,
    ImagePart,
    Message,
    Origin,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
    messages_from_json,
    messages_to_json,
)

PART_CLASSES: tuple[type[Any], ...] = (
    TextPart,
    ImagePart,
    DocumentPart,
    ThinkingPart,
    ToolUsePart,
    ToolResultPart,
    ProviderPart,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=5)
origins = st.builds(Origin, provider=st.text(max_size=12), model=st.text(max_size=12))

optional_ints = st.none() | st.integers(0, 2**31)
citations = st.builds(
    Citation,
    data=json_objects,
    url=st.none() | st.text(),
    title=st.none() | st.text(),
    cited_text=st.none() | st.text(),
    start_index=optional_ints,
    end_index=optional_ints,
    origin=st.none() | origins,
)

# Strategies by field annotation: a field of a new type fails here until the test knows it.
FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(),
    "str | None": st.none() | st.text(),
    "bool": st.booleans(),
    "Origin | None": st.none() | origins,
    "dict[str, Any]": json_objects,
    "dict[str, Any] | None": st.none() | json_objects,
    "list[Citation]": st.lists(citations, max_size=3),
    "list[MediaPart]": st.lists(st.deferred(lambda: media_parts), max_size=2),
}

# An image or document holds bytes or a URL, never both: the source is drawn as one choice.
sources = st.one_of(
    st.fixed_dictionaries({"data": st.binary(max_size=64)}),
    st.fixed_dictionaries({"url": st.text()}),
)
images = st.builds(
    lambda source, media_type, detail: ImagePart(**source, media_type=media_type, detail=detail),
    sources,
    st.none() | st.text(),
    st.sampled_from([None, "low", "high", "auto"]),
)
documents = st.builds(
    lambda source, media_type, name: DocumentPart(**source, media_type=media_type, name=name),
    sources,
    st.none() | st.text(),
    st.none() | st.text(),
)
media_parts = images | documents
SPECIAL: dict[type[Any], st.SearchStrategy[Any]] = {ImagePart: images, DocumentPart: documents}


def part_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    if cls in SPECIAL:
        return SPECIAL[cls]
    args: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        if f.name == "type":
            continue  # the kind's fixed tag
        annotation = str(f.type)
        assert annotation in FIELD_STRATEGIES, f"{cls.__name__}.{f.name}: {annotation}"
        args[f.name] = FIELD_STRATEGIES[annotation]
    return st.fixed_dictionaries(args).map(lambda kwargs: cls(**kwargs))


parts: st.SearchStrategy[Part] = st.one_of(*(part_strategy(c) for c in PART_CLASSES))
messages = st.builds(
    Message, role=st.sampled_from(["user", "assistant"]), content=st.lists(parts, max_size=6)
)


@settings(max_examples=150, deadline=None)
@given(conversation=st.lists(messages, max_size=5))
def test_any_conversation_round_trips(conversation: list[Message]) -> None:
    text = messages_to_json(conversation)
    assert messages_from_json(text) == conversation
    assert messages_from_json(text.encode()) == conversation
    assert orjson.loads(text) == [m.to_dict() for m in conversation]


@settings(max_examples=100, deadline=None)
@given(message=messages)
def test_any_message_round_trips_alone(message: Message) -> None:
    assert Message.from_json(message.to_json()) == message
    assert Message.from_dict(message.to_dict()) == message
    assert Message.from_dict(orjson.loads(orjson.dumps(message.to_dict()))) == message


def test_every_part_kind_is_covered() -> None:
    # A new part kind must be added to the round-trip strategies above.
    assert set(PART_CLASSES) == set(Part.__args__)  # type: ignore[attr-defined]


def test_the_json_form_is_tagged_and_keeps_everything() -> None:
    message = Message(
        "assistant",
        [
            ThinkingPart("hmm", signature="sig", origin=Origin("anthropic", "claude")),
            TextPart("é\u2028漢😀\x00"),
            ToolUsePart("call_1", "search", {"q": None, "n": [1, 2.5, {"deep": True}]}),
        ],
    )
    data = message.to_dict()
    assert [p["type"] for p in data["content"]] == ["thinking", "text", "tool_use"]
    assert data["content"][0]["origin"] == {"provider": "anthropic", "model": "claude"}
    assert data["content"][2]["input"] == {"q": None, "n": [1, 2.5, {"deep": True}]}
    assert messages_from_json(messages_to_json([message, Message.user("hi")])) == [
        message,
        Message.user("hi"),
    ]


def test_a_provider_part_keeps_its_block_and_origin_in_json() -> None:
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "input": {"query": "x"}}
    part = ProviderPart(block, origin=Origin("anthropic", "claude"))
    data = Message("assistant", [part]).to_dict()
    assert data["content"] == [
        {"data": block, "origin": {"provider": "anthropic", "model": "claude"}, "type": "provider"}
    ]
    assert Message.from_dict(data).content == [part]


def test_a_hand_written_part_without_type_is_text() -> None:
    [message] = messages_from_json('[{"role": "user", "content": [{"text": "hi"}]}]')
    assert message == Message.user("hi")


def test_helpers() -> None:
    call = ToolUsePart("c", "f", {})
    result = ToolResultPart("c", "out", is_error=True, name="f")
    message = Message("assistant", [TextPart("a"), ThinkingPart("x"), call, TextPart("b")])
    assert message.text == "ab"
    assert message.tool_uses == [call]
    assert Message("user", [result]).tool_results == [result]
    assert Message.assistant("z") == Message("assistant", [TextPart("z")])
    assert Message("user").content == []


# --- bad input -------------------------------------------------------------------------------

BAD_INPUTS = [
    ("nope", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    ("", "not valid JSON"),
    ("{}", "messages: Input should be a valid list"),
    ("[1]", "messages[0]: Input should be a dictionary or an instance of Message"),
    ('[{"role": "bot", "content": []}]', "messages[0].role: Input should be 'user' or 'assistant'"),
    ('[{"content": []}]', "messages[0].role: Field required"),
    ('[{"role": "user", "content": "hi"}]', "messages[0].content: Input should be a valid list"),
    (
        '[{"role": "user", "content": [{"type": "video", "url": "x"}]}]',
        "messages[0].content[0]: unknown part type 'video' (known: text, image, document, "
        "thinking, tool_use, tool_result, provider)",
    ),
    (
        '[{"role": "user", "content": [{"type": ["text"]}]}]',
        "messages[0].content[0]: unknown part type ['text']",
    ),
    ('[{"role": "user", "content": [{"type": "text"}]}]', "messages[0].content[0].text: Field"),
    (
        '[{"role": "assistant", "content": [{"type": "provider", "data": []}]}]',
        "messages[0].content[0].data: Input should be a valid dictionary",
    ),
    (
        '[{"role": "user", "content": [{"type": "tool_use", "id": "c", "name": "f", '
        '"input": []}]}]',
        "messages[0].content[0].input: Input should be a valid dictionary",
    ),
    (
        '[{"role": "assistant", "content": [{"text": "a"}, {"type": "tool_result", '
        '"tool_use_id": 5, "content": "x"}]}]',
        "messages[0].content[1].tool_use_id: Input should be a valid string",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_INPUTS, ids=[str(t)[:40] for t, _ in BAD_INPUTS])
def test_bad_input_raises_a_readable_error(text: str | bytes, expected: str) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        messages_from_json(text)
    message = str(info.value)
    assert expected in message
    assert isinstance(info.value, ValueError)
    assert "errors.pydantic.dev" not in message
    assert len(message) < 600
    # Only the kind the part claims to be is reported, not every kind it failed.
    for name in ("TextPart", "ThinkingPart", "ToolUsePart", "ToolResultPart"):
        assert name not in message


def test_many_problems_are_summarized() -> None:
    text = orjson.dumps([{"role": n} for n in range(9)])
    with pytest.raises(InvalidMessagesError, match=r"; and \d+ more$"):
        messages_from_json(text)


def test_a_single_bad_message() -> None:
    with pytest.raises(InvalidMessagesError, match=r"not a valid message: message\.content\[0\]"):
        Message.from_dict({"role": "user", "content": [{"type": "thinking"}]})
    with pytest.raises(InvalidMessagesError, match="not valid JSON"):
        Message.from_json("{")


@pytest.mark.parametrize(
    "value", [2**70, object(), "\ud800"], ids=["bigint", "object", "lone-surrogate"]
)
def test_a_value_that_is_not_json_is_an_invalid_message(value: object) -> None:
    message = Message("assistant", [ToolUsePart("c", "f", {"x": value})])
    with pytest.raises(InvalidMessagesError, match="not JSON"):
        messages_to_json([message])
    with pytest.raises(InvalidMessagesError, match="not JSON"):
        message.to_json()
