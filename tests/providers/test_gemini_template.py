"""Gemini's byte template (`providers/_gemini_template.py`): a text chunk read by its holes alone.

The holes are the part's `text` and the running `usageMetadata` object. The invariant: for
any bytes, the mapper with its template gives exactly the events of the same mapper that
never learns one (`_tries = 0`: every chunk parsed whole). And the template is really
taken on the recorded streams and the benchmark's shape.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.messages import Origin
from llm_worker.providers import gemini
from llm_worker.providers._gemini_ids import CallIds
from llm_worker.providers._gemini_template import gemini_text_template
from llm_worker.providers.gemini import _GeminiMapper  # pyright: ignore[reportPrivateUsage]
from support import recorded
from support.mapped_streams import mapped_events

pytestmark = pytest.mark.anyio


def _chunk(text: str, count: int, *, usage: bool = True, **more: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"},
                                 "index": 0}  # fmt: skip
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if usage:
        chunk["usageMetadata"] = {
            "promptTokenCount": 18, "candidatesTokenCount": count, "totalTokenCount": 53 + count,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 18}],
        }  # fmt: skip
    return {**chunk, "modelVersion": "gemini-2.5-flash", "responseId": "r1", **more}


def _spaced(chunk: dict[str, Any]) -> bytes:
    # As the API writes it: `": "` and `","` separators.
    return json.dumps(chunk, ensure_ascii=False, separators=(",", ": ")).encode()


def _sse(events: list[bytes]) -> bytes:
    return b"".join(b"data: " + data + b"\r\n\r\n" for data in events)


async def _events(body: bytes, size: int, learns: bool) -> tuple[list[str], _GeminiMapper]:
    mapper = _GeminiMapper(CallIds([]), Origin("gemini", "m"))
    if not learns:
        mapper._tries = 0  # pyright: ignore[reportPrivateUsage]
    return await mapped_events(mapper, body, size, provider="gemini"), mapper


async def _same(body: bytes, size: int = 10**7) -> _GeminiMapper:
    fast, mapper = await _events(body, size, learns=True)
    reference, _ = await _events(body, size, learns=False)
    assert fast == reference
    return mapper


def test_a_template_reads_any_text_and_usage_and_refuses_any_other_chunk() -> None:
    template = gemini_text_template(_spaced(_chunk("The ", 1)))
    assert template is not None
    for text in ["x", 'quo"te', "ends\\", "😄", '}],"role": "model"},"index": 1}']:
        for count in (2, 2**62):
            found = template.text_and_value(_spaced(_chunk(text, count)))
            assert found == (text, _chunk(text, count)["usageMetadata"]), text
    good = _spaced(_chunk("hole", 5))
    usage = json.dumps(_chunk("hole", 5)["usageMetadata"], separators=(",", ": ")).encode()
    assert usage in good
    for near in (
        good.replace(usage, b"null"),
        good.replace(usage, b"[1]"),
        good.replace(usage, b'"usage"'),
        good.replace(usage, b'{}, "x": 1'),  # a key after the usage: not the tail
        good.replace(usage, usage[:-1]),
        good.replace(b'"hole"', b"7"),
        good.replace(b'"hole"', b'"\\ud800"'),
        good.replace(b'"r1"', b'"r2"'),
        good.replace(b'"index": 0', b'"index": 1'),
        good[:-1],
        b"",
    ):
        assert template.text_and_value(near) is None, near
    # Another shape: a finish reason, a second part, thought, grounding.
    finished = _chunk("x", 2)
    finished["candidates"][0]["finishReason"] = "STOP"
    assert template.text_and_value(_spaced(finished)) is None


def test_no_template_of_a_chunk_it_cannot_prove() -> None:
    # Two parts (the first a thought): the mapper's hot path reads one part only.
    two = _chunk("b", 1)
    two["candidates"][0]["content"]["parts"].insert(0, {"text": "a", "thought": True})
    assert gemini_text_template(_spaced(two)) is None
    # A first candidate of another index: the mapper reads candidate 0, not the first.
    other = _chunk("a", 1)
    other["candidates"][0]["index"] = 1
    assert gemini_text_template(_spaced(other)) is None
    # A usage object whose braces close more than 16 times before it ends: not found as a
    # hole, and not left in the tail either (a matched chunk would not set it again).
    nested = _chunk("a", 1)
    nested["usageMetadata"]["deep"] = [{} for _ in range(20)]
    assert gemini_text_template(_spaced(nested)) is None


async def test_a_usage_set_by_another_chunk_is_set_back_by_the_next_text_chunk() -> None:
    # Text with usage U1, a chunk of another shape with U2, then text with U1 again: the
    # usage read last is U1, as the whole parse reads it (emitted at the read's end).
    def deep(text: str, count: int) -> bytes:
        chunk = _chunk(text, count)
        chunk["usageMetadata"]["deep"] = [{} for _ in range(20)]
        return _spaced(chunk)

    other = _chunk("x", 9)
    other["candidates"][0]["content"]["parts"].append({"text": "y"})
    for size in (10**7, 11):
        body = _sse([deep("a", 1), deep("b", 1), _spaced(other), deep("c", 1)])
        await _same(body, size)
        plain = [_spaced(_chunk(t, 1)) for t in "abc"]
        await _same(_sse([*plain[:2], _spaced(other), plain[2]]), size)


async def test_the_benchmark_shape_takes_the_template_and_reads_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[bytes] = []
    real = gemini.orjson.loads

    def counted(data: bytes | str) -> Any:
        parsed.append(data if isinstance(data, bytes) else data.encode())
        return real(data)

    events = [_spaced(_chunk(f"w{i} ", i + 1)) for i in range(300)]
    last = _chunk("end", 301)
    last["candidates"][0]["finishReason"] = "STOP"
    body = _sse([*events, _spaced(last)])
    mapper = await _same(body)
    monkeypatch.setattr(gemini.orjson, "loads", counted)
    await _events(body, 10**7, learns=True)
    assert len(parsed) <= 5, len(parsed)  # the first text chunks and the finish, not 300
    assert mapper._template is not None  # pyright: ignore[reportPrivateUsage]


async def test_a_chunk_without_usage_and_one_with_model_status_read_alike() -> None:
    plain = [_spaced(_chunk(t, 1, usage=False)) for t in ("a", "b", "c")]
    status = [_spaced(_chunk(t, 2, modelStatus={"s": 1})) for t in ("d", "e", "f")]
    mixed = [_spaced(_chunk(t, i)) for i, t in enumerate("ghij")]
    await _same(_sse([*plain, *status, *mixed, *plain]))


async def test_every_recorded_gemini_stream_reads_alike_with_and_without_the_template() -> None:
    learnt = checked = 0
    for name in recorded.fixture_names("gemini"):
        response = recorded.load("gemini", name)["response"]
        if response["status"] != 200 or "event-stream" not in response["content_type"]:
            continue
        body = response["body"].encode()
        for size in (5, 97, 10**7):
            mapper = await _same(body, size)
        learnt += mapper._template is not None  # pyright: ignore[reportPrivateUsage]
        checked += 1
    assert checked >= 10 and learnt >= 3, (checked, learnt)


_HOLES = st.one_of(
    st.text(max_size=8).map(lambda t: json.dumps(t).encode()),
    st.sampled_from([b"null", b"1", b"{}", b"[]", b'{"a": "}"}', b'"\\ud800"', b'"a"}', b" "]),
    st.binary(max_size=6),
)


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(_HOLES, min_size=1, max_size=6),
    usages=st.lists(_HOLES, min_size=1, max_size=6),
    seed=st.integers(0, 2**32),
)
def test_any_bytes_in_the_holes_read_as_the_whole_parse(
    texts: list[bytes], usages: list[bytes], seed: int
) -> None:
    # After a learnt chunk, chunks whose text and usage holes hold anything (strings,
    # non-strings, objects of braces in strings, broken bytes).
    import asyncio

    rng = random.Random(seed)
    first = _spaced(_chunk("first", 1))
    usage = re.search(rb'"usageMetadata": (\{.*\}),"modelVersion"', first)
    assert usage is not None
    events = [first]
    for text, hole in zip(texts, usages * len(texts), strict=False):
        data = first.replace(b'"first"', text, 1).replace(usage.group(1), hole or b"{}", 1)
        events.append(data)
    body = _sse([e for e in events if b"\r" not in e and b"\n" not in e])
    size = rng.choice([3, 64, 10**7])

    async def both() -> None:
        await _same(body, size)

    asyncio.run(both())
