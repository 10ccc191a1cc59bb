"""Chat's byte template (`providers/_template.py`): a stream's text chunk read by its content alone.

The invariant: for any bytes, the Chat mapper with its template gives exactly the events of
the general path (`GeneralChat`, every chunk parsed in full by `_chunk`). And the template is
really taken: a matched chunk is not parsed whole.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_stream_path_review import GeneralChat

from llm_worker.messages import Origin
from llm_worker.providers import openai_chat
from llm_worker.providers._openai_chat_template import chat_text_template, placed
from llm_worker.providers._template import ByteTemplate
from llm_worker.providers.openai_chat import ChatStreamMapper
from support import recorded
from support.mapped_streams import mapped_events

pytestmark = pytest.mark.anyio

# OpenAI's own chunk (gpt-5, recorded): `service_tier`, `usage: null` and the padding.
_OPENAI = {
    "id": "chatcmpl-E4Rjs6IxaJVge9Ntk5keJsaeDy6vS",
    "object": "chat.completion.chunk",
    "created": 1784728648,
    "model": "gpt-5-2025-08-07",
    "service_tier": "default",
    "system_fingerprint": None,
}
# vLLM's and most compatible servers': `logprobs: null` in the choice, no padding.
_COMPATIBLE = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 7, "model": "m"}


def _chunk(base: dict[str, Any], text: str, pad: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    if pad is None:
        choice["logprobs"] = None
        return {**base, "choices": [choice]}
    return {**base, "choices": [choice], "usage": None, "obfuscation": pad}


def _encoded(chunk: dict[str, Any], ascii_only: bool) -> bytes:
    # `json.dumps` writes `\uXXXX` escapes (lone surrogates too) where orjson writes UTF-8.
    if ascii_only:
        return json.dumps(chunk, separators=(",", ":")).encode()
    return orjson.dumps(chunk)


def _body(events: list[bytes]) -> bytes:
    role = {**_OPENAI, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    end = {**_OPENAI, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    every = [orjson.dumps(role), *events, orjson.dumps(end)]
    return b"".join(b"data: " + data + b"\n\n" for data in every) + b"data: [DONE]\n\n"


async def _both(body: bytes, size: int = 10**7) -> tuple[list[str], list[str]]:
    origin = Origin("p", "m")
    fast = await mapped_events(ChatStreamMapper(origin=origin), body, size)
    general = await mapped_events(GeneralChat(origin=origin), body, size)
    return fast, general


@pytest.mark.parametrize(("base", "pad"), [(_OPENAI, "CVQ55DocFW"), (_COMPATIBLE, None)])
def test_a_template_reads_any_content_and_refuses_any_other_chunk(
    base: dict[str, Any], pad: str | None
) -> None:
    data = orjson.dumps(_chunk(base, "The ", pad))
    template = ByteTemplate.of(data, b'"content":', b'"obfuscation":', placed)
    assert template is not None
    texts = [
        "x",
        "",
        'quo"te',
        "back\\slash",
        "ends\\",
        '\\"',
        "😄 é",
        "\x00\n",
        '},"finish_reason":null}]',
    ]
    for text in texts:
        for ascii_only in (False, True):
            assert (
                template.text(_encoded(_chunk(base, text, pad and pad[::-1]), ascii_only)) == text
            )
    # The same bytes but anywhere else than in a string: not this template's chunk.
    others = [
        _chunk({**base, "created": 8}, "x", pad),
        {**_chunk(base, "x", pad), "x_groq": {"id": "q"}},
        _chunk({**base, "model": "n"}, "x", pad),
    ]
    finish = _chunk(base, "x", pad)
    finish["choices"][0]["finish_reason"] = "stop"
    others.append(finish)
    # The same length but another value (`null` → `true`), before the hole and after it.
    others.append({**_chunk(base, "x", pad), "system_fingerprint": True} if pad else
                  {**_chunk(base, "x", pad), "model": "n"})  # fmt: skip
    late = _chunk(base, "x", pad)
    if pad is None:
        late["choices"][0]["logprobs"] = True
    else:
        late["usage"] = True
    others.append(late)
    for other in others:
        assert template.text(orjson.dumps(other)) is None
    good = orjson.dumps(_chunk(base, "hole", pad))
    for near in (
        good.replace(b'"hole"', b"null"),
        good.replace(b'"hole"', b"5"),
        good.replace(b'"hole"', b'["hole"]'),
        good.replace(b'"hole"', b'"ho"le"'),
        good.replace(b'"hole"', b'"\\ud800"'),  # a lone surrogate: orjson refuses it
        good.replace(b'"hole"', b'"h\xffe"'),  # not UTF-8
        good.replace(b'"hole"', b'"a","refusal":null'),
        good[:-1],
        good + b" x",
        b"",
    ):
        assert template.text(near) is None, near
    if pad is not None:
        assert template.text(good.replace(b'"CVQ55DocFW"', b"7")) is None
        assert template.text(good.replace(b'"CVQ55DocFW"', b'"a"}')) is None


def test_no_template_where_the_holes_cannot_be_proven() -> None:
    text_first = orjson.dumps({"note": {"content": "The "}, **_chunk(_COMPATIBLE, "The ", None)})
    # `"content":` first found in another object: the proof (the holes are exactly the
    # placed fields) fails, and no template is made.
    assert ByteTemplate.of(text_first, b'"content":', None, placed) is None
    assert ByteTemplate.of(b'{"content":5}', b'"content":', None, placed) is None
    unfinished = orjson.dumps(_chunk(_COMPATIBLE, "The ", None))[:-3]
    assert ByteTemplate.of(unfinished, b'"content":', None, placed) is None


@pytest.mark.parametrize("text", ["ends\\", 'a\\"b', '\\\\"', "x" * 100])
def test_a_template_is_learnt_from_any_content_it_can_end(text: str) -> None:
    # The content's end found past escaped quotes and backslashes of any run length.
    template = chat_text_template(orjson.dumps(_chunk(_COMPATIBLE, text, None)))
    assert template is not None
    assert template.text(orjson.dumps(_chunk(_COMPATIBLE, "other", None))) == "other"


async def test_no_template_of_a_chunk_over_16_kib_and_its_stream_reads_alike() -> None:
    # Finding a content's end costs a step per escaped quote: a large chunk is never a
    # template (a hostile one of millions of them would cost seconds), and is read whole.
    large = orjson.dumps(_chunk(_COMPATIBLE, '"' * 9_000, None))
    assert len(large) > 16 * 1024
    assert chat_text_template(large) is None
    fast, general = await _both(_body([large, large, orjson.dumps(_chunk(_COMPATIBLE, "x", None))]))
    assert fast == general


def test_a_templates_repr_shows_no_byte_of_the_answer() -> None:
    data = orjson.dumps(_chunk({**_OPENAI, "id": "chatcmpl-SECRET"}, "private words", "PAD"))
    template = ByteTemplate.of(data, b'"content":', b'"obfuscation":', placed)
    assert template is not None
    assert "SECRET" not in repr(template)
    assert "gpt-5" not in repr(template)


async def test_matched_chunks_are_not_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # The template is really taken: of 200 text chunks, only those before it is learnt (and
    # the role, finish and `[DONE]` events) go through the whole-chunk parse.
    parsed: list[bytes] = []

    def counted(data: bytes) -> Any:
        parsed.append(data)
        return orjson.loads(data)

    monkeypatch.setattr(openai_chat, "_loads", counted)
    texts = [f"w{i} " for i in range(200)]
    body = _body([orjson.dumps(_chunk(_OPENAI, t, f"p{i}")) for i, t in enumerate(texts)])
    events = await mapped_events(ChatStreamMapper(), body, 10**7)
    assert sum(e.startswith("BlockDelta(") for e in events) == 200
    assert "".join(texts) in "".join(events) or all(repr(t) in "".join(events) for t in texts)
    assert len(parsed) <= 5, len(parsed)


async def test_learning_stops_after_its_tries_when_chunks_keep_changing() -> None:
    # `created` changes in every chunk: no template matches, a few are proven, then the
    # mapper reads the rest by the plain path; the events are the general path's.
    events = [orjson.dumps(_chunk({**_COMPATIBLE, "created": i}, f"t{i}", None)) for i in range(40)]
    body = _body(events)
    mapper = ChatStreamMapper()
    fast = await mapped_events(mapper, body, 10**7)
    assert mapper._tries == 0  # pyright: ignore[reportPrivateUsage]
    _, general = await _both(body)
    assert fast == general


async def test_a_template_waits_while_a_tool_call_is_live() -> None:
    # Text, then two tool calls' first fragments (the second buffered), then a chunk of the
    # text's exact template: with a call live the hot path is closed, and so is the
    # template — the text must go through the general path, which finishes the live call.
    def call(index: int) -> dict[str, Any]:
        return {"index": index, "id": f"call_{index}", "type": "function",
                "function": {"name": "f", "arguments": '{"a":'}}  # fmt: skip

    tool = {**_OPENAI, "choices": [{"index": 0, "delta": {"tool_calls": [call(0), call(1)]},
                                    "finish_reason": None}]}  # fmt: skip
    late = {**_OPENAI, "choices": [{"index": 0, "finish_reason": None, "delta": {
        "tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]}  # fmt: skip
    events = [orjson.dumps(_chunk(_OPENAI, t, "pad")) for t in ("a", "b", "c")]
    text = orjson.dumps(_chunk(_OPENAI, "d", "pad2"))
    body = _body([*events, orjson.dumps(tool), text, orjson.dumps(late)])
    fast, general = await _both(body)
    assert fast == general
    # The text finished call 0 (the general path's `_text`), so its late fragment is refused.
    assert "after it was finished" in fast[-1], fast[-1]


_TEXTS = st.text(st.characters(codec="utf-16", exclude_categories=()), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(_TEXTS, min_size=1, max_size=8),
    ascii_only=st.booleans(),
    openai=st.booleans(),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    seed=st.integers(0, 2**32),
)
def test_any_stream_of_text_chunks_with_flipped_bytes_gives_the_general_paths_events(
    texts: list[str], ascii_only: bool, openai: bool, flips: list[tuple[int, int]], seed: int
) -> None:
    # Lone surrogates come as `\uXXXX` escapes (ascii) or make orjson refuse the chunk (UTF-8
    # of a surrogate cannot be encoded: those texts are written as escapes either way).
    rng = random.Random(seed)
    base, pad = (_OPENAI, "CVQ55DocFW") if openai else (_COMPATIBLE, None)
    chunks: list[bytes] = []
    for i, text in enumerate(["first", *texts]):
        chunk = _chunk(base, text, pad and pad[: i % 10 + 1])
        try:
            chunks.append(_encoded(chunk, ascii_only))
        except orjson.JSONEncodeError:
            chunks.append(_encoded(chunk, True))
    for at, value in flips:  # a byte changed in one of the later chunks (not the first)
        which = 1 + at % max(1, len(chunks) - 1) if len(chunks) > 1 else 0
        data = bytearray(chunks[which])
        if value in b"\r\n":
            continue  # a line break would make it another SSE event: tested elsewhere
        data[at % len(data)] = value
        chunks[which] = bytes(data)
    body = _body(chunks)
    size = rng.choice([1, 7, 64, 10**7])
    fast, general = asyncio.run(_both(body, size))
    assert fast == general


_BESIDE = ["role", "reasoning_content", "reasoning", "refusal", "tool_calls", "annotations",
           "audio", "function_call", "x"]  # fmt: skip
_VALUES: list[Any] = [None, "", "assistant", "think", [], [{}], 0, 1, False, True, {}, {"a": 1}]


async def test_a_text_delta_with_keys_beside_its_content_reads_as_the_general_path() -> None:
    # DeepSeek sends `reasoning_content: null` and OpenRouter `role: "assistant"` in every
    # text delta: the hot path (and so the template) takes them; any other key, or one of
    # those holding something, goes to the general path as before.
    for key in _BESIDE:
        for value in _VALUES:
            odd = _chunk(_OPENAI, "t", "pad")
            odd["choices"][0]["delta"][key] = value
            plain = [orjson.dumps(_chunk(_OPENAI, t, "pad")) for t in ("a", "b")]
            body = _body([*plain, orjson.dumps(odd), *plain])
            for size in (10**7, 9):
                fast, general = await _both(body, size)
                assert _made_up(fast) == _made_up(general), (key, value, size)


def _made_up(events: list[str]) -> list[str]:
    # A call without an id gets a random one (`tool_calls: [{}]`): the same on both paths.
    return [re.sub(r"call_[0-9a-f]{24}", "call_?", event) for event in events]


@pytest.mark.parametrize("name", ["deepseek_reasoning_content", "openrouter_cached_tokens"])
async def test_deepseek_and_openrouter_text_deltas_take_the_template(name: str) -> None:
    response = recorded.load("openai_chat", name)["response"]
    body = response["body"].encode()
    mapper = ChatStreamMapper()
    fast = await mapped_events(mapper, body, 10**7)
    assert mapper._template is not None  # pyright: ignore[reportPrivateUsage]
    _, general = await _both(body)
    assert fast == general
