"""The per-event hot path (issue 39): the events it builds, and the chunks it must leave alone.

`BlockEmitter.text` builds its `BlockDelta(TextDelta)` field by field rather than through the
dataclass constructors, and the Chat and Anthropic mappers read a plain text delta inline.
These tests hold that the events built so are the constructed ones (every field set, equal,
same repr, matched by pattern), and that a chunk carrying anything beside plain text (usage,
an error, another choice, logprobs, a delta of another block) still takes the full path.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from llm_worker.errors import MalformedStreamError, RateLimitError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    Event,
    StatusEvent,
    StopReason,
    TextDelta,
    TokenLogprob,
    UsageEvent,
)
from llm_worker.messages import Message, Request
from llm_worker.providers import AnthropicClient, GeminiClient, OpenAIChatClient
from llm_worker.providers._blocks import BlockEmitter, StreamMapper, drive
from llm_worker.providers.openai_chat import ChatStreamMapper

pytestmark = pytest.mark.anyio

_REQUEST = Request([Message.user("hi")])


def _every_field(event: object) -> dict[str, Any]:
    # An unset slot raises AttributeError here: a field added to the class but not to the
    # emitter's field-by-field build fails this test.
    assert dataclasses.is_dataclass(event)
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}


@pytest.mark.parametrize("logprobs", [None, [TokenLogprob("a", -0.5, [("a", -0.5), ("b", -1.0)])]])
def test_a_text_delta_is_the_constructed_event(logprobs: list[TokenLogprob] | None) -> None:
    emitter = BlockEmitter()
    emitter.text("a", logprobs)
    start, delta = emitter.out
    expected = BlockDelta(0, TextDelta("a", logprobs))
    assert isinstance(start, BlockStart)
    assert type(delta) is BlockDelta
    assert type(delta.delta) is TextDelta
    assert _every_field(delta) == _every_field(expected)
    assert _every_field(delta.delta) == _every_field(expected.delta)
    assert delta == expected
    assert repr(delta) == repr(expected)
    assert delta.path == ()
    match delta:
        case BlockDelta(0, TextDelta("a", found)):
            assert found is logprobs
        case _:
            pytest.fail("the built event does not match its class pattern")
    # Mutable as the constructed one (the Worker stamps `path` on sub-agent events).
    delta.path = ("sub",)
    assert delta.path == ("sub",)


def test_the_built_deltas_are_separate_objects() -> None:
    emitter = BlockEmitter()
    emitter.text("a")
    emitter.text("b")
    first, second = emitter.out[1:]
    assert isinstance(first, BlockDelta)
    assert isinstance(second, BlockDelta)
    assert first.delta is not second.delta
    assert (first.delta, second.delta) == (TextDelta("a"), TextDelta("b"))


async def _events(mapper: StreamMapper, body: bytes) -> list[Event]:
    async def chunks() -> AsyncIterator[bytes]:
        yield body

    return [event async for event in drive(chunks(), mapper, provider="p")]


def _chat_body(*chunks: dict[str, Any]) -> bytes:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m"}
    lines = [b"data: " + json.dumps({**head, **chunk}).encode() + b"\n\n" for chunk in chunks]
    return b"".join(lines) + b"data: [DONE]\n\n"


def _chat_mapper() -> StreamMapper:
    return OpenAIChatClient(model="m", api_key="k").mapper(_REQUEST)


def _texts(events: list[Event]) -> list[str]:
    return [
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    ]


def _choice(content: str, **more: Any) -> dict[str, Any]:
    return {"index": 0, "delta": {"content": content}, "finish_reason": None, **more}


async def test_chat_text_with_usage_in_the_same_chunk_keeps_both() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    body = _chat_body(
        {"choices": [_choice("a")]},
        {"choices": [_choice("b")], "usage": usage},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    events = await _events(_chat_mapper(), body)
    assert _texts(events) == ["a", "b"]
    assert [e.output_tokens for e in events if isinstance(e, UsageEvent)] == [2]


async def test_chat_text_of_a_second_choice_is_not_the_answer() -> None:
    second = {"index": 1, "delta": {"content": "other"}, "finish_reason": None}
    body = _chat_body(
        {"choices": [_choice("a")]},
        {"choices": [second]},
        {"choices": [second, _choice("b")]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    assert _texts(await _events(_chat_mapper(), body)) == ["a", "b"]


async def test_chat_text_with_logprobs_keeps_them() -> None:
    logprobs = {"content": [{"token": "b", "logprob": -0.25, "top_logprobs": []}]}
    body = _chat_body(
        {"choices": [_choice("a")]},
        {"choices": [_choice("b", logprobs=logprobs)]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    events = await _events(_chat_mapper(), body)
    deltas = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert deltas == [TextDelta("a"), TextDelta("b", [TokenLogprob("b", -0.25)])]


async def test_chat_an_error_beside_text_fails_the_stream() -> None:
    error = {"message": "slow down", "type": "rate_limit_exceeded", "code": 429}
    body = _chat_body({"choices": [_choice("a")]}, {"choices": [_choice("b")], "error": error})
    seen: list[Event] = []

    async def read() -> None:
        async for event in drive(_one(body), _chat_mapper(), provider="p"):
            seen.append(event)

    with pytest.raises(RateLimitError):
        await read()
    assert _texts(seen) == ["a"]


async def test_chat_a_whole_answer_with_a_delta_is_complete() -> None:
    # `object: chat.completion` marks a whole answer: complete without [DONE].
    chunk = {"object": "chat.completion", "choices": [_choice("a")]}
    body = b"data: " + json.dumps({"id": "c", "model": "m", **chunk}).encode() + b"\n\n"
    events = await _events(_chat_mapper(), body)
    assert _texts(events) == ["a"]
    assert isinstance(events[-1], StatusEvent)


async def test_chat_text_that_is_not_a_string_is_refused() -> None:
    body = _chat_body({"choices": [_choice("a")]}, {"choices": [_choice(7)]})  # type: ignore[arg-type]
    with pytest.raises(MalformedStreamError):
        await _events(_chat_mapper(), body)


async def _one(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _anthropic_body(*events: dict[str, Any]) -> bytes:
    start = {"type": "message_start", "message": {"id": "msg_1", "model": "m", "usage": {}}}
    stop = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
            {"type": "message_stop"}]  # fmt: skip
    lines = [
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in [start, *events, *stop]
    ]
    return b"".join(lines)


def _anthropic_mapper() -> StreamMapper:
    return AnthropicClient(model="m", api_key="k").mapper(_REQUEST)


def _text_delta(index: int, text: object) -> dict[str, Any]:
    delta = {"type": "text_delta", "text": text}
    return {"type": "content_block_delta", "index": index, "delta": delta}


async def test_anthropic_a_delta_of_no_open_block_is_passed_over() -> None:
    block = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}}  # fmt: skip
    body = _anthropic_body(
        block,
        _text_delta(0, "a"),
        _text_delta(5, "not ours"),
        # No `delta` at all, for a block that is not open: passed over, not read.
        {"type": "content_block_delta", "index": 6},
        _text_delta(0, "b"),
        {"type": "content_block_stop", "index": 0},
    )
    assert _texts(await _events(_anthropic_mapper(), body)) == ["a", "b"]


async def test_anthropic_text_that_is_not_a_string_is_refused() -> None:
    block = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}}  # fmt: skip
    body = _anthropic_body(block, _text_delta(0, ["a"]))
    with pytest.raises(MalformedStreamError, match=r"delta\.text"):
        await _events(_anthropic_mapper(), body)


# The Chat mapper reads a plain chunk's choice by subscript while every choice carries its
# keys (`ChatStreamMapper._keyed`; `logprobs` may be absent). Each stream below keeps every
# chunk's keys (and its choice's) the same and changes one value after two plain chunks: the
# events must be those of the `.get` path, which the mapper takes once a choice lacked a key.
_PLAIN = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "system_fingerprint": "fp",
    "usage": None,
}
_USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
_TOKEN = {"content": [{"token": "c", "logprob": -0.5, "top_logprobs": []}]}
_ERROR = {"message": "slow down", "type": "rate_limit_exceeded", "code": 429}
_ODD: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "usage": ({"usage": _USAGE}, {}),
    "whole answer": ({"object": "chat.completion"}, {}),
    "second choice": ({}, {"index": 1}),
    "finish": ({}, {"finish_reason": "stop"}),
    "logprobs": ({}, {"logprobs": _TOKEN}),
    "a delta with a role": ({}, {"delta": {"role": "assistant", "content": "c"}}),
    "text not a string": ({}, {"delta": {"content": 7}}),
    "error in place of a key": ({"error": _ERROR}, {}),
}


def _same_keys_body(odd: str, logprobs: bool = True) -> bytes:
    # `logprobs=False`: the choices lack the key, as many third-party servers send them.
    top, choice_more = _ODD[odd]
    chunks: list[dict[str, Any]] = []
    for text in ("a", "b", "c", "d"):
        choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
        if not logprobs:
            del choice["logprobs"]
        chunk: dict[str, Any] = {**_PLAIN, "choices": [choice]}
        if text == "c":  # the third chunk: the odd one
            choice.update(choice_more)
            chunk.update(top)
            if "error" in top:
                del chunk["system_fingerprint"]  # as many keys as a plain chunk
        chunks.append(chunk)
    last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    chunks.append({**_PLAIN, "choices": [last]})
    lines = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    return b"".join(lines) + b"data: [DONE]\n\n"


async def _outcome(mapper: StreamMapper, body: bytes) -> tuple[list[Event], str]:
    seen: list[Event] = []
    try:
        async for event in drive(_one(body), mapper, provider="p"):
            seen.append(event)
    except Exception as exc:  # the failure itself is compared
        return seen, type(exc).__name__
    return seen, ""


def _keyed(keyed: bool) -> ChatStreamMapper:
    mapper = _chat_mapper()
    assert isinstance(mapper, ChatStreamMapper)
    mapper._keyed = keyed  # pyright: ignore[reportPrivateUsage]
    return mapper


@pytest.mark.parametrize("logprobs", [True, False], ids=["logprobs", "no logprobs key"])
@pytest.mark.parametrize("odd", sorted(_ODD))
async def test_chat_a_chunk_of_the_plain_keys_is_read_as_the_get_path_reads_it(
    odd: str, logprobs: bool
) -> None:
    body = _same_keys_body(odd, logprobs)
    keyed = _keyed(True)
    fast = await _outcome(keyed, body)
    assert keyed._keyed  # pyright: ignore[reportPrivateUsage]
    assert fast == await _outcome(_keyed(False), body)
    assert _texts(fast[0])[:2] == ["a", "b"]


async def test_chat_a_choice_without_a_finish_reason_is_read_by_get() -> None:
    # A choice lacking a key the subscript path reads turns that path off for the stream,
    # and its text is not lost. (`logprobs` alone may be absent: see above.)
    lacking = {"index": 0, "delta": {"content": "b"}}
    body = _chat_body(*({"choices": [choice]} for choice in (_choice("a"), lacking, _choice("c"))))
    mapper = _keyed(True)
    events, failure = await _outcome(mapper, body)
    assert (_texts(events), failure) == (["a", "b", "c"], "")
    assert not mapper._keyed  # pyright: ignore[reportPrivateUsage]


async def test_chat_the_plain_keys_carry_usage_and_a_whole_answer() -> None:
    # Two values the subscript path must still read, with their effect checked directly.
    events, failure = await _outcome(_chat_mapper(), _same_keys_body("usage"))
    assert failure == ""
    assert [e.output_tokens for e in events if isinstance(e, UsageEvent)] == [2]
    _, failure = await _outcome(_chat_mapper(), _same_keys_body("error in place of a key"))
    assert failure == "RateLimitError"


# Gemini hands a chunk's one text part to `drive` when its candidate holds nothing else;
# a candidate with more (a finish reason, a second part, a call) takes the parts loop.
def _gemini_body(*candidates: dict[str, Any]) -> bytes:
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4}
    chunks = [
        {"candidates": [c], "usageMetadata": usage, "modelVersion": "m", "responseId": "r"}
        for c in candidates
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def _text_part(*texts: str) -> dict[str, Any]:
    return {"content": {"parts": [{"text": t} for t in texts], "role": "model"}, "index": 0}


async def test_gemini_a_lone_text_part_and_the_parts_loop_keep_the_order() -> None:
    call = {"functionCall": {"name": "f", "args": {}}}
    body = _gemini_body(
        _text_part("a"),
        _text_part("b", "c"),  # two parts: the loop
        {"content": {"parts": [{"text": "d"}], "role": "model"}},  # no index: still lone
        {"content": {"parts": [call], "role": "model"}, "index": 0},  # a lone part, not text
        {**_text_part("e"), "finishReason": "STOP"},  # the text, then the finish
    )
    mapper = GeminiClient(model="m", api_key="k").mapper(_REQUEST)
    events, failure = await _outcome(mapper, body)
    assert failure == ""
    assert _texts(events) == ["a", "b", "c", "d", "e"]
    kinds = [type(e).__name__ for e in events if isinstance(e, BlockStart | BlockStop)]
    assert kinds == [
        "BlockStart",
        "BlockStop",
        "BlockStart",
        "BlockStop",
        "BlockStart",
        "BlockStop",
    ]
    last_text = max(i for i, e in enumerate(events) if isinstance(e, BlockDelta))
    last_stop = max(i for i, e in enumerate(events) if isinstance(e, BlockStop))
    assert last_text < last_stop  # "e" before its block's stop
    assert [e.input_tokens for e in events if isinstance(e, UsageEvent)] == [3]


# `drive` builds the event of returned text itself while a text block is open and the answer
# has room (`BlockEmitter.text_event`'s common case); anything else goes through the method.
# A scripted mapper returns each data's text, or sends it through `emitter.text` (the general
# path) or opens a thinking block (`~`): the two must give the same events and the same failure.
class _Scripted:
    def __init__(self, returned: bool) -> None:
        self._returned = returned
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    def on_event(self, event: str, data: bytes, emitter: BlockEmitter, /) -> str | None:
        text = data.decode()
        if text == "END":
            self._done = True
        elif text.startswith("~"):
            emitter.thinking(text)
        elif self._returned:
            return text
        else:
            emitter.text(text)
        return None

    def on_end(self, emitter: BlockEmitter) -> None:
        emitter.finish(StopReason.END_TURN, "end_turn")


_SCRIPTS = {
    "first text opens the block": ["ab", "c", "END"],
    "text after thinking": ["~x", "ab", "~y", "c", "d", "END"],
    "answer exactly at the bound": ["abc", "defg", "hij", "END"],
    "one past the bound": ["abc", "defg", "hijk", "END"],
    "the first text past the bound": ["abcdefghijk", "END"],
}


@pytest.mark.parametrize("script", sorted(_SCRIPTS))
async def test_drive_builds_returned_text_as_the_emitter_does(script: str) -> None:
    body = b"".join(b"data: " + line.encode() + b"\n\n" for line in _SCRIPTS[script])

    async def outcome(returned: bool) -> tuple[list[Event], str]:
        seen: list[Event] = []
        try:
            async for event in drive(
                _one(body), _Scripted(returned), provider="p", max_answer_chars=10
            ):
                seen.append(event)
        except Exception as exc:  # the failure itself is compared
            return seen, type(exc).__name__
        return seen, ""

    inline = await outcome(True)
    assert inline == await outcome(False)
    texts = [text for text in _SCRIPTS[script][:-1] if not text.startswith("~")]
    assert _texts(inline[0]) == (texts[:-1] if "past" in script else texts)
    for event in inline[0]:  # every field set, as the constructors set them
        if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
            assert _every_field(event) == _every_field(BlockDelta(event.index, event.delta))
            assert _every_field(event.delta) == _every_field(TextDelta(event.delta.text))
    assert inline[1] == ("AnswerTooLargeError" if "past" in script else "")
