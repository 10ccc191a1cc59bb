"""Review of Chat's plain-delta subscript path (issue 39): hostile values in plain-keyed chunks.

A chunk whose keys are those of a plain text delta but whose values are not what they seem
must give exactly what the general path (`_chunk`) gives: the same events, the same typed
error with the same message.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import orjson
import pytest
from test_stream_path_review import GeneralChat

from llm_worker._json import json_type
from llm_worker.messages import Origin
from llm_worker.providers.openai_chat import ChatStreamMapper
from support.mapped_streams import mapped_events, recorded_chat_streams

pytestmark = pytest.mark.anyio

_BASE: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt-x",
    "system_fingerprint": "fp",
}


def _plain(text: str) -> dict[str, Any]:
    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
    return {**_BASE, "choices": [choice]}


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    chunk = _plain("h")
    at: Any = chunk
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return chunk


_CHOICE = ("choices", 0)
_ODD: list[Any] = [
    None, 0, 1, -1, 2**70, 1.5, 0.0, True, False, "", "0", "x", "\ud800", [], ["x"], {}, {"a": 1},
]  # fmt: skip


def _hostile() -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    for value in _ODD:
        chunks.append(_with(("choices",), [value]))
        chunks.append(_with(("choices",), value))  # not a list of one: "x", {"a": 1}, []
        chunks.append(_with((*_CHOICE, "delta"), value))
        chunks.append(_with((*_CHOICE, "index"), value))
        chunks.append(_with((*_CHOICE, "delta", "content"), value))
        chunks.append(_with((*_CHOICE, "logprobs"), value))
        chunks.append(_with((*_CHOICE, "finish_reason"), value))
        chunks.append(_with(("object",), value))
        chunks.append(_with(("usage",), value))
        chunks.append(_with(("x_groq",), value))
        chunks.append(_with(("error",), value))
        chunks.append(_with(("id",), value))
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    chunks.append(_with(("usage",), usage))
    chunks.append(_with((*_CHOICE, "finish_reason"), "stop"))
    chunks.append(_with(("error",), {"message": "overloaded", "code": 503}))
    two = _plain("a")
    two["choices"].append({"index": 1, "delta": {"content": "b"}, "finish_reason": None})
    chunks.append(two)
    reordered = _plain("r")
    reordered = {"choices": reordered.pop("choices"), **reordered}
    reordered["choices"][0] = dict(reversed(list(reordered["choices"][0].items())))
    chunks.append(reordered)
    chunks.append({**_plain("u"), "unknown": {"k": 1}, "service_tier": "default"})
    extra = _plain("e")
    extra["choices"][0]["delta"]["refusal"] = None
    chunks.append(extra)
    no_choices = _plain("n")
    del no_choices["choices"]
    chunks.append(no_choices)
    for key in ("logprobs", "finish_reason", "index", "delta"):
        missing = _plain("m")
        del missing["choices"][0][key]
        chunks.append(missing)
    return chunks


def _body(chunks: list[dict[str, Any]]) -> bytes:
    role = {**_BASE, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    end = {**_BASE, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    every = [role, _plain("a"), _plain("b"), *chunks, _plain("c"), end]
    lines = (b"data: " + orjson.dumps(c, option=orjson.OPT_PASSTHROUGH_DATACLASS) for c in every)
    return b"".join(line + b"\n\n" for line in lines) + b"data: [DONE]\n\n"


def _dumps_ok(chunk: dict[str, Any]) -> bool:
    try:
        orjson.dumps(chunk)
    except orjson.JSONEncodeError:
        return False
    return True


async def test_each_hostile_value_in_a_plain_keyed_chunk_gives_the_general_paths_result() -> None:
    origin = Origin("p", "gpt-x")
    for chunk, size in itertools.product(_hostile(), (10_000, 7)):
        body = _body([chunk]) if _dumps_ok(chunk) else None
        if body is None:
            continue
        fast = await mapped_events(ChatStreamMapper(origin=origin), body, size)
        general = await mapped_events(GeneralChat(origin=origin), body, size)
        assert fast == general, chunk


async def test_a_lone_surrogate_in_plain_text_is_what_the_general_path_gives() -> None:
    origin = Origin("p", "gpt-x")
    good = orjson.dumps(_plain("X")).decode()
    hostile = good.replace('"X"', '"\\ud800"').encode()
    body = _body([_plain("X")]).replace(good.encode(), hostile)
    fast = await mapped_events(ChatStreamMapper(origin=origin), body, 10_000)
    general = await mapped_events(GeneralChat(origin=origin), body, 10_000)
    assert fast == general


def _third_party(body: bytes, drop: str) -> bytes:
    # The same stream as a server that leaves a key out of every chunk (or choice) sends it.
    lines: list[bytes] = []
    for line in body.split(b"\n"):
        if not line.startswith(b"data: {"):
            lines.append(line)
            continue
        chunk = orjson.loads(line[6:])
        chunk.pop(drop, None)
        for choice in chunk.get("choices") or []:
            choice.pop(drop, None)
        lines.append(b"data: " + orjson.dumps(chunk))
    return b"\n".join(lines)


async def test_every_recorded_stream_and_its_third_party_shapes_in_many_chunkings() -> None:
    # Chunks of 5 bytes, of two seeded random sizes and the whole body: the fast path and
    # the general one agree on every recorded Chat stream, as recorded and with logprobs /
    # object / index / system_fingerprint left out (third-party servers' shapes).
    origin = Origin("p", "m")
    rng = random.Random(40)
    streams = recorded_chat_streams()
    assert len(streams) >= 15
    for name, body in streams:
        for drop in ("", "logprobs", "object", "index", "system_fingerprint"):
            shaped = _third_party(body, drop) if drop else body
            for size in (5, rng.randint(6, 64), rng.randint(64, 4096), 10**6):
                fast = await mapped_events(ChatStreamMapper(origin=origin), shaped, size)
                general = await mapped_events(GeneralChat(origin=origin), shaped, size)
                assert fast == general, (name, drop, size)


_NOT_OBJECTS = [b"5", b"-1.5", b"null", b"true", b"false", b'"error"', b'"choices"', b"[]", b"[{}]"]


@pytest.mark.parametrize("state", ["plain", "by_get", "first"])
async def test_a_chunk_that_is_no_json_object_is_a_typed_error_on_every_path(state: str) -> None:
    # The plain path tests a chunk's type only where its first subscript fails: a number,
    # null, a boolean, a string (even one that holds "error" or "choices") or a list must
    # still fail the stream with the general path's typed error, after the text before it.
    no_index = _plain("g")
    del no_index["choices"][0]["index"]  # the `.get` path for the rest of the stream
    before = {"plain": [_plain("a")], "by_get": [no_index, _plain("a")], "first": []}[state]
    for value in _NOT_OBJECTS:
        # The answer's finish chunk left out: the hostile chunk comes mid-answer.
        head = _body(before).split(b"data: [DONE]")[0]
        head = b"" if state == "first" else head[: head.rindex(b"data: ")]
        body = head + b"data: " + value + b"\n\n"
        for size in (10_000, 3):
            seen = await mapped_events(ChatStreamMapper(origin=Origin("p", "gpt-x")), body, size)
            kind = json_type(orjson.loads(value))
            assert seen[-1] == (
                f"MalformedStreamError: openai_chat: a stream chunk is {kind}, not a JSON object"
            ), (state, value, size)
            assert value.decode() not in seen[-1] or value in (b"null", b"[]"), seen[-1]
            texts = [e for e in seen if "TextDelta(text=" in e]
            assert len(texts) == {"plain": 4, "by_get": 5, "first": 0}[state], seen
