"""Review of Chat's byte template (R44): any bytes give the events they gave without it.

The reference is the same mapper that never learns a template (`_tries = 0`: the hot path
and the general path as before the template). Every probe here checks the events (and the
typed error, message included) of a stream read with the template against the reference's,
and that the template was really learnt where the probe needs one (else it proves nothing).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import ProviderError
from llm_worker.messages import Message, Origin, Request
from llm_worker.providers import OpenAIChatClient, _openai_chat_template
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.openai_chat import ChatStreamMapper
from llm_worker.testing import Chunking, WireResponse, WireServer
from support.mapped_streams import mapped_events, recorded_chat_streams

pytestmark = pytest.mark.anyio

# A text chunk's bytes, its content (and OpenAI's padding) left as slots: OpenAI's own
# shape (gpt-5, recorded) and vLLM's (most compatible servers).
_OPENAI = (
    b'{"id":"chatcmpl-E4Rjs6IxaJVge9Ntk5keJsaeDy6vS","object":"chat.completion.chunk",'
    b'"created":1784728648,"model":"gpt-5-2025-08-07","service_tier":"default",'
    b'"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":%(c)s},'
    b'"finish_reason":null}],"usage":null,"obfuscation":%(p)s}'
)
_COMPATIBLE = (
    b'{"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":%(c)s},"logprobs":null,"finish_reason":null}]}'
)
_SHAPES = {"openai": _OPENAI, "compatible": _COMPATIBLE}
_ROLE = (
    b'{"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}'
)
_FINISH = (
    b'{"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
)
_USAGE = (
    b'{"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}'
)


# A tool call's made-up id (a call without one) is random: the same in every comparison.
_MADE_UP_ID = re.compile(r"call_[0-9a-f]{24}")


def _clean(shown: str) -> str:
    return _MADE_UP_ID.sub("call_made_up", shown)


class _Reference(ChatStreamMapper):
    """The Chat mapper that never learns a template: the events as before it."""

    __slots__ = ()

    def __init__(self, *, origin: Origin | None = None) -> None:
        super().__init__(origin=origin)
        self._tries = 0


def _fill(shape: bytes, content: bytes, pad: bytes = b'"CVQ55DocFW"') -> bytes:
    return shape % {b"c": content, b"p": pad}


def _text(shape: bytes, text: str, pad: str = "CVQ55DocFW") -> bytes:
    return _fill(shape, orjson.dumps(text), orjson.dumps(pad))


def _sse(events: Iterable[bytes], *, done: bool = True) -> bytes:
    body = b"".join(b"data: " + data + b"\n\n" for data in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


def _learnt(shape: bytes, *hostile: bytes) -> bytes:
    # The role, two text chunks (the template learnt from the first), the probes, a text
    # chunk of the template (read by it after the probes, if they did not end the stream).
    texts = [_text(shape, "The ", "p1"), _text(shape, "cat ", "p22")]
    return _sse([_ROLE, *texts, *hostile, _text(shape, "sat.", "p333"), _FINISH])


async def _compare(body: bytes, sizes: Iterable[int] = (10**8,)) -> ChatStreamMapper:
    """Assert the template's events are the reference's; the mapper that had the template."""
    sizes = tuple(sizes)
    origin = Origin("p", "m")
    mapper = ChatStreamMapper(origin=origin)
    fast = await mapped_events(mapper, body, sizes, clean=_clean)
    reference = await mapped_events(_Reference(origin=origin), body, sizes, clean=_clean)
    assert fast == reference
    return mapper


def _template_of(mapper: ChatStreamMapper) -> object:
    return mapper._template  # pyright: ignore[reportPrivateUsage]


# --- hostile bytes in the holes -------------------------------------------------------------

_CONTENTS: list[bytes] = [
    # every escape, and what they decode to
    b'"\\""', b'"\\\\"', b'"\\/"', b'"\\b\\f\\n\\r\\t"', b'"\\u0000"', b'"\\u001f"',
    b'"\\ud83d\\ude00"', b'"\\uD83D\\uDE00"', b'"\\u00e9"', "\"é😄\u2028\"".encode(),
    b'"\\\\\\""', b'"a\\\\"', b'"\\\\\\\\"',
    # what orjson refuses: lone surrogates (escaped and as UTF-8), bad UTF-8, bad escapes,
    # raw control characters
    b'"\\ud800"', b'"\\udc00x"', b'"\\ud800\\ud800"', b'"\\ude00\\ud83d"', b'"\\ud83d"',
    b'"\xed\xa0\x80"', b'"\xff"', b'"\xe2\x82"', b'"\xc0\xaf"', b'"\xf4\x90\x80\x80"',
    b'"\\x41"', b'"\\u12"', b'"\\U0041"', b'"\\"', b'"a\\', b'"\x00"', b'"\x1f"', b'"\x7f"',
    # the template's own middle and tail, inside the string and breaking out of it
    b'"},\\"finish_reason\\":null}]"', b'"\\"obfuscation\\":\\""', b'"\\"content\\":\\"x"',
    b'"a"},"finish_reason":null}],"usage":null,"obfuscation":"x"',
    b'"a"},"finish_reason":"stop"}],"usage":null,"obfuscation":"x"',
    b'"a"},"logprobs":null,"finish_reason":"stop"}]}',
    b'"a","tool_calls":[{"index":0}]', b'"a","role":"assistant"', b'"a","content":"b"',
    b'"a"}', b'"a"]', b'"a"}}', b'"a"},{"index":1,"delta":{"content":"b"}',
    # whitespace around the hole (LF and CR would cut the SSE line: tested below)
    b' "x" ', b'\t"x"\t', b'  ""  ',
    # no string: null, numbers, booleans, containers, two strings, nothing
    b"null", b"5", b"-0.0", b"1e999", b"true", b"false", b"{}", b'{"a":"b"}', b"[]",
    b'["x"]', b'"a" "b"', b'"a","b"', b'"a",', b'""', b"", b'"', b"x", b'"a"x',
]  # fmt: skip
_PADS: list[bytes] = [
    b'"p"', b'""', b'"\\""', b'"\\ud800"', b'"\xff"', b" \"p\" ", b"5", b"null", b"{}",
    b'"a"}', b'"x\\"', b'"a","b"', b'"a","error":{"message":"m"}', b'"a","x_groq":{}', b"",
]  # fmt: skip


@pytest.mark.parametrize("shape", _SHAPES)
async def test_any_bytes_in_the_content_hole_give_the_references_events(shape: str) -> None:
    for content, size in itertools.product(_CONTENTS, (10**8, 7)):
        hostile = _fill(_SHAPES[shape], content, b'"pad"')
        mapper = await _compare(_learnt(_SHAPES[shape], hostile), (size,))
        assert _template_of(mapper) is not None, content


async def test_any_bytes_in_the_padding_hole_give_the_references_events() -> None:
    for pad, content in itertools.product(_PADS, (b'"x"', b'"\\"x"', b'"a"}')):
        mapper = await _compare(_learnt(_OPENAI, _fill(_OPENAI, content, pad)))
        assert _template_of(mapper) is not None, pad


async def test_chunks_a_byte_off_the_template_give_the_references_events() -> None:
    for shape in _SHAPES.values():
        good = _text(shape, "x", "pp")
        empty = _fill(shape, b"", b"")
        cut = shape.split(b"%(c)s")[0]
        for chunk in (
            good + b" ", b" " + good, good[:-1], good[1:], good + b"}", good + b"\t",
            empty, cut, cut + b'"x"', good.replace(b'"x"', b'"x" ', 1), good + good,
            good.replace(b"0", b"1", 1), good.replace(b'"index":0', b'"index":0.0'),
        ):  # fmt: skip
            await _compare(_learnt(shape, chunk), (10**8, 3))


# --- the proof: chunk shapes a server might send ---------------------------------------------

# Shapes of a text chunk with more string slots than the text (`%(a)s`, `%(b)s`): keys that
# look like `content` or `obfuscation` elsewhere, duplicate keys, other key orders, spaces.
_TRICKY: list[bytes] = [
    b'{"x\\"content":%(a)s,"id":"c","object":"o","choices":[{"index":0,"delta":{"content":'
    b'%(c)s},"finish_reason":null}]}',
    b'{"note":{"content":%(a)s},"id":"c","object":"o","choices":[{"index":0,"delta":'
    b'{"content":%(c)s},"finish_reason":null}]}',
    b'{"id":"c","object":"o","choices":[{"index":0,"delta":{"content":%(a)s,"content":%(c)s},'
    b'"finish_reason":null}]}',
    b'{"id":"c","object":"o","choices":[{"index":0,"delta":{"content":%(c)s,"content":%(a)s},'
    b'"finish_reason":null}]}',
    b'{"choices":[{"finish_reason":null,"delta":{"content":%(c)s},"index":0}],"object":"o",'
    b'"id":"c","obfuscation":%(p)s}',
    b'{"obfuscation":%(p)s,"id":"c","object":"o","choices":[{"index":0,"delta":{"content":'
    b'%(c)s},"finish_reason":null}]}',
    b'{ "id" : "c" , "object" : "o" , "choices" : [ { "index" : 0 , "delta" : { "content":'
    b'%(c)s } , "finish_reason" : null } ] , "obfuscation":%(p)s }',
    b'{"id":"c","object":"o","choices":[{"index":0,"delta":{"content":%(c)s},"finish_reason":'
    b'null,"obfuscation":%(a)s}],"obfuscation":%(p)s}',
    b'{"id":"c","object":"o","choices":[{"index":0,"delta":{"content":%(c)s},"finish_reason":'
    b'null}],"model":%(a)s,"obfuscation":%(p)s,"obfuscation":%(b)s}',
    b'{"id":"c","object":"o","choices":[{"index":0,"delta":{"content":%(c)s},"finish_reason":'
    b'null}],"x\\"obfuscation":%(a)s,"obfuscation":%(p)s}',
    b'{"id":"c","object":"o","model":"\\"content\\":","choices":[{"index":0,"delta":'
    b'{"content":%(c)s},"finish_reason":null}],"system_fingerprint":%(a)s,"obfuscation":%(p)s}',
    b'{"id":"c","object":"o","choices":[{"index":0,"delta":{"content":%(c)s},"finish_reason":'
    b'null}],"usage":%(a)s,"obfuscation":%(p)s}',
]
# Values for the slots: the proof's own marks (both pairs), escapes, non-strings.
_VALUES: list[bytes] = [
    b'"a"', b'""', b'"b"', b'"\\u0000text hole"', b'"\\u0000ignored hole"',
    b'"\\u0001text hole"', b'"\\u0001ignored hole"', b'"\\""', b'"\\\\"', b"null", b"0",
    b'"\\ud800"', "\"é\"".encode(),
]  # fmt: skip


def _tricky(shape: bytes, a: bytes, b: bytes, c: bytes, p: bytes) -> bytes:
    return shape % {b"a": a, b"b": b, b"c": c, b"p": p}


async def test_every_tricky_shape_learnt_from_any_value_gives_the_references_events() -> None:
    # The chunk the template is learnt from holds one value in every slot (the proof's marks
    # included: a field beside the text that looks like it); each later chunk changes one slot.
    for shape, value in itertools.product(_TRICKY, _VALUES):
        first = (value,) * 4
        later = [tuple(b'"Z"' if i == j else value for i in range(4)) for j in range(4)]
        chunks = [_tricky(shape, *values) for values in [first, first, *later, first]]
        await _compare(_sse([_ROLE, *chunks, _FINISH]))


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from(_TRICKY),
    chunks=st.lists(st.tuples(*[st.sampled_from(_VALUES)] * 4), min_size=1, max_size=6),
)
def test_any_tricky_shape_with_any_slot_values_gives_the_references_events(
    shape: bytes, chunks: list[tuple[bytes, bytes, bytes, bytes]]
) -> None:
    first = (chunks[0][0],) * 4
    body = _sse([_ROLE, *(_tricky(shape, *values) for values in [first, *chunks]), _FINISH])
    anyio.run(_compare, body)


async def test_a_chunk_holding_the_proofs_marks_does_not_move_the_hole() -> None:
    # Found in review: a first chunk whose text and another `content` field both held the
    # proof's mark proved a template whose hole was that other field — the next chunk's
    # text was read from it ("EVIL" in place of the answer's text). No template is learnt
    # from a chunk that holds `\u0000` (the marks' U+0000) now.
    shape = _TRICKY[1]
    mark = b'"\\u0000text hole"'
    first = _tricky(shape, mark, b'""', mark, b'""')
    evil = _tricky(shape, b'"EVIL"', b'""', mark, b'""')
    mapper = await _compare(_sse([_ROLE, first, evil, _FINISH]))
    assert _template_of(mapper) is None


def test_learning_a_chunk_of_escaped_quotes_is_bounded() -> None:
    # Found in review (and fixed by the lead at the same time, f8b1f40): the hole's end was
    # found by slicing the string once per escaped quote (a 128 KB chunk of `\"` took 2.5 s
    # to learn, 2 MB about ten minutes). In a child process, bounded: a hang fails the test.
    # A chunk under 16 KiB of them is learnt and read by its template; a 2 MB one is read.
    code = (
        "import orjson\n"
        "from llm_worker.providers._blocks import BlockEmitter\n"
        "from llm_worker.providers.openai_chat import ChatStreamMapper\n"
        f"role, shape = {_ROLE!r}, {_COMPATIBLE!r}\n"
        "for n, learnt in ((8_000, True), (1_000_000, False)):\n"
        "    text = chr(34) * n\n"
        "    mapper, emitter = ChatStreamMapper(), BlockEmitter(10**9)\n"
        "    mapper.on_event('message', role, emitter)\n"
        "    data = shape % {b'c': orjson.dumps(text)}\n"
        "    assert mapper.on_event('message', data, emitter) == text\n"
        "    assert (mapper._template is not None) is learnt\n"
        "    assert mapper.on_event('message', data, emitter) == text\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- the stream around the template ---------------------------------------------------------


async def test_multi_line_data_events_and_crlf_give_the_references_events() -> None:
    # A chunk's JSON as two `data:` lines (the decoder joins them with LF) cut at every byte,
    # after a template learnt from one-line events and from two-line ones; CRLF line ends.
    for shape in _SHAPES.values():
        good = _text(shape, 'a "quoted" word', "pad")
        for cut in range(len(good) + 1):
            two = good[:cut] + b"\ndata: " + good[cut:]
            await _compare(_learnt(shape, two))
            other = _text(shape, "b", "q")
            await _compare(_sse([_ROLE, two, other[:cut] + b"\ndata: " + other[cut:], _FINISH]))
        await _compare(_learnt(shape, good).replace(b"\n", b"\r\n"), (10**8, 1, 5))
        await _compare(_learnt(shape, good).replace(b"\n", b"\r"), (10**8, 2))


async def test_a_stream_cut_at_any_byte_gives_the_references_events() -> None:
    # The connection closes anywhere: mid-chunk after the template is learnt (the last event,
    # without its blank line, is dispatched at the end of the stream), between the events.
    for shape in _SHAPES.values():
        body = _learnt(shape, _text(shape, 'x "y" z', "q"))
        for cut in range(len(body) // 3, len(body)):
            await _compare(body[:cut])


async def test_text_after_a_finish_usage_or_tool_call_gives_the_references_events() -> None:
    tool = (
        b'{"id":"chatcmpl-9","object":"chat.completion.chunk","created":7,"model":"m","choices":'
        b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
        b'"function":{"name":"f","arguments":"{\\"a\\":"}}]},"finish_reason":null}]}'
    )
    more = tool.replace(b'"id":"call_1","type":"function","function":{"name":"f",', b"").replace(
        b'"{\\"a\\":"', b'"1}"'
    )
    groq = _COMPATIBLE.replace(b'"model":"m",', b'"model":"m","x_groq":{"id":"q"},')
    error = b'{"error":{"message":"overloaded","code":503}}'
    whole = _COMPATIBLE.replace(b"chat.completion.chunk", b"chat.completion")
    logprobs = _COMPATIBLE.replace(b'"logprobs":null', b'"logprobs":{"content":[]}')
    for shape in _SHAPES.values():
        text = _text(shape, "late", "pad")
        for middle in (
            [_FINISH, text], [_USAGE, text], [tool, text, more], [tool, more, text],
            [text, tool, text, text], [_FINISH, _USAGE, text, text], [error, text],
            [_fill(groq, b'"g"'), text], [_fill(whole, b'"w"'), text],
            [_fill(logprobs, b'"l"'), text], [b"[DONE]", text], [b"", text, b": x", text],
        ):  # fmt: skip
            body = _sse([_ROLE, _text(shape, "a", "p"), *middle, _FINISH])
            mapper = await _compare(body, (10**8, 11))
            assert _template_of(mapper) is not None


async def test_learning_is_bounded_when_every_chunk_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `created` (or the id) changes in every chunk, or two shapes alternate: at most four
    # templates are tried in a stream of 300 text chunks, and the events are the reference's.
    proofs: list[bytes] = []
    learn = _openai_chat_template.chat_text_template

    def counted(data: bytes) -> Any:
        proofs.append(data)
        return learn(data)

    # `_learn` imports it at a stream's first text, from its module: patched there.
    monkeypatch.setattr(_openai_chat_template, "chat_text_template", counted)
    changing = [_text(_COMPATIBLE.replace(b"7", str(i).encode()), f"t{i}") for i in range(300)]
    alternating = [_text(_SHAPES[("openai", "compatible")[i % 2]], f"u{i}") for i in range(300)]
    for chunks in (changing, alternating):
        proofs.clear()
        await _compare(_sse([_ROLE, *chunks, _FINISH]))
        assert 1 <= len(proofs) <= 4


# --- every recorded stream, and random streams of their shapes --------------------------------


async def test_every_recorded_stream_gives_the_same_events_with_and_without_the_template() -> None:
    # Whole, one byte at a time and in seeded random sizes; the template is really learnt on
    # the recordings of plain text (OpenAI's, Azure's, DeepSeek's, Groq's).
    learnt: list[str] = []
    rng = random.Random(44)
    for name, body in recorded_chat_streams():
        for sizes in ((10**8,), (1,), tuple(rng.randint(1, 300) for _ in range(50))):
            mapper = await _compare(body, sizes)
        if _template_of(mapper) is not None:
            learnt.append(name)
    assert {"gpt5_text_obfuscation_field", "groq_text_x_groq_usage"} <= set(learnt), learnt
    assert len(learnt) >= 6, learnt


def _data_lines(body: bytes) -> list[bytes]:
    return [line[6:] for line in body.split(b"\n") if line.startswith(b"data: {")]


_SHAPED = [_data_lines(body) for _, body in recorded_chat_streams()]
_TOKENS = [
    b'"', b"\\", b'\\"', b"}", b"]", b",", b":", b" ", b"\t", b"null", b"0", b'"content":',
    b'"obfuscation":', b'"finish_reason":"stop"', b"\\ud800", b"\xff", "é".encode(),
]  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(
    stream=st.integers(0, len(_SHAPED) - 1),
    texts=st.lists(st.text(st.characters(codec="utf-16"), max_size=10), min_size=1, max_size=6),
    ascii_only=st.booleans(),
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.sampled_from(_TOKENS)), max_size=4
    ),
    size=st.sampled_from([1, 3, 17, 10**8]),
)
def test_random_streams_of_recorded_shapes_with_mutated_bytes_give_the_references_events(
    stream: int,
    texts: list[str],
    ascii_only: bool,
    edits: list[tuple[int, int, bytes]],
    size: int,
) -> None:
    # A recorded stream's chunks, its plain text chunks repeated with other texts (written
    # with `\uXXXX` escapes or as UTF-8), then bytes replaced, inserted, deleted or a token
    # spliced in at random places of the later chunks.
    chunks: list[bytes] = []
    for data in _SHAPED[stream]:
        chunks.append(data)
        chunk = orjson.loads(data)
        delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
        if list(delta) != ["content"] or not delta["content"]:
            continue
        for text in texts:
            delta["content"] = text
            try:
                chunks.append(
                    json.dumps(chunk, separators=(",", ":")).encode()
                    if ascii_only
                    else orjson.dumps(chunk)
                )
            except orjson.JSONEncodeError:  # a lone surrogate: escaped
                chunks.append(json.dumps(chunk, separators=(",", ":")).encode())
    for at, how, token in edits:
        which = len(chunks) // 3 + at % max(1, len(chunks) - len(chunks) // 3)
        data = chunks[which]
        cut = at % (len(data) + 1)
        if how == 0:
            data = data[:cut] + token + data[cut + 1 :]
        elif how == 1:
            data = data[:cut] + token + data[cut:]
        elif how == 2:
            data = data[:cut] + data[cut + len(token) :]
        else:
            data = data[:cut] + bytes([token[0] ^ data[cut % len(data)]]) + data[cut + 1 :]
        chunks[which] = data.replace(b"\r", b"").replace(b"\n", b"")
    anyio.run(_compare, _sse(chunks), (size,))


_LEAVES: list[Any] = [
    None, 0, 1, "", "a", "b", "\x00text hole", "\x00ignored hole", "\x01text hole",
    "\x01ignored hole", '"content":"x"', '"obfuscation":"y"', "\\", '"', "\ud800", "é",
]  # fmt: skip
_EXTRA_KEYS = ["content", "obfuscation", 'x"content', "obfuscation\\", "note", "usage", "zz"]
_SEPARATORS = [(",", ":"), (", ", ": "), (",", ": "), (" ,", " :")]


def _dumps(value: Any, separators: tuple[str, str], ascii_only: bool) -> bytes:
    try:
        if separators == (",", ":") and not ascii_only:
            return orjson.dumps(value)
        return json.dumps(value, separators=separators, ensure_ascii=ascii_only).encode()
    except (orjson.JSONEncodeError, UnicodeEncodeError):  # a lone surrogate: escaped
        return json.dumps(value, separators=separators).encode()


_TEXTS = st.one_of(st.text(max_size=6), st.sampled_from([v for v in _LEAVES if v.__class__ is str]))


@st.composite
def _structured_stream(draw: st.DrawFn) -> bytes:
    """A stream of one chunk structure, its chunks differing in the text and other fields.

    Extra keys beside and inside the choice (named like `content` or `obfuscation` too),
    their values fixed or varying from chunk to chunk, the keys in one random order (some
    chunks in another), spaces or not, UTF-8 or `\\uXXXX` escapes.
    """
    extras = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["top", "choice", "delta", "nested"]),
                st.sampled_from(_EXTRA_KEYS),
                st.one_of(st.sampled_from(_LEAVES), st.just(...)),  # ...: a varying slot
            ),
            max_size=4,
        )
    )
    padded, ascii_only = draw(st.booleans()), draw(st.booleans())
    separators = draw(st.sampled_from(_SEPARATORS))
    seed = draw(st.integers(0, 2**16))

    def chunk(text: str, vary: Any, reorder: bool) -> bytes:
        delta: dict[str, Any] = {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        top: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}
        if padded:
            top["obfuscation"] = f"p{len(text)}"
        places = {"top": top, "choice": choice, "delta": delta, "nested": top.setdefault("n", {})}
        for where, key, value in extras:
            places[where][key] = vary if value is ... else value
        shuffle = random.Random(seed + reorder).shuffle
        for place in (top, choice, delta):
            items = list(place.items())
            shuffle(items)
            place.clear()
            place.update(items)
        return _dumps(top, separators, ascii_only)

    values = draw(
        st.lists(st.tuples(_TEXTS, st.sampled_from(_LEAVES), st.booleans()), min_size=2, max_size=8)
    )
    first = values[0][0] or "x"
    chunks = [chunk(first, values[0][1], False), *(chunk(*value) for value in values)]
    return _sse([_ROLE, *chunks, _FINISH])


@settings(max_examples=80, deadline=None)
@given(body=_structured_stream())
def test_random_chunk_structures_with_varying_fields_give_the_references_events(
    body: bytes,
) -> None:
    anyio.run(_compare, body)


# --- through the real client, on both transports ---------------------------------------------


class _Client(OpenAIChatClient):
    """The Chat client whose mappers are kept (to see their templates), learning or not."""

    learns = True
    made: list[ChatStreamMapper]

    def mapper(self, request: Request) -> ChatStreamMapper:
        made = super().mapper(request)
        if not self.learns:
            made._tries = 0  # pyright: ignore[reportPrivateUsage]
        self.made.append(made)
        return made


async def _client_events(
    response: WireResponse, *, learns: bool, stop_after: int | None = None, **options: Any
) -> tuple[list[str], list[ChatStreamMapper]]:
    seen: list[str] = []
    async with WireServer([response]) as server:
        client = _Client(
            model="gpt-test",
            base_url=server.base_url + "/v1",
            api_key="sk-test-0123456789",
            retry=RetryPolicy.disabled(),
            **options,
        )
        client.learns, client.made = learns, []
        try:
            with anyio.fail_after(30):
                stream = client.stream(Request([Message.user("hi")]))
                try:
                    async for event in stream:
                        seen.append(_clean(repr(event)))
                        if stop_after is not None and len(seen) == stop_after:
                            break  # the caller stops reading mid-stream
                except ProviderError as exc:
                    seen.append(_clean(f"{type(exc).__name__}: {exc}"))
                finally:
                    await stream.aclose()  # pyright: ignore[reportAttributeAccessIssue]
        finally:
            await client.aclose()
    return seen, client.made


def _read_as_text(data: bytes) -> bool:
    try:
        return orjson.loads(data)["choices"][0]["delta"]["content"].__class__ is str
    except (orjson.JSONDecodeError, LookupError, TypeError):
        return False


def _hostile_stream() -> bytes:
    # Every hostile content that still makes a text chunk, then one that fails the stream.
    hostile = [_fill(_OPENAI, content, b'"pad"') for content in _CONTENTS]
    hostile = [data for data in hostile if _read_as_text(data)] + [_fill(_OPENAI, b'"a"}')]
    mark = b'"\\u0000text hole"'
    tricky = [
        _tricky(_TRICKY[1], mark, b'""', mark, b'""'),
        _tricky(_TRICKY[1], b'"E"', b'""', mark, b'""'),
    ]
    texts = [_text(_OPENAI, f'w{i} \u00e9\\"', f"p{i}") for i in range(40)]
    return _sse([_ROLE, *texts[:20], *tricky, *texts[20:], *hostile, _FINISH, _USAGE])


@pytest.mark.usefixtures("http_transport")
@pytest.mark.parametrize("chunking", ["whole", "random"])
async def test_the_real_client_gives_the_references_events(chunking: str) -> None:
    body = _hostile_stream()
    split = Chunking.whole() if chunking == "whole" else Chunking.random(44, max_size=97)
    fast, made = await _client_events(WireResponse(body, chunking=split), learns=True)
    reference, _ = await _client_events(WireResponse(body, chunking=split), learns=False)
    assert fast == reference
    assert _template_of(made[0]) is not None
    # Cancelled mid-stream (the reader stops after 25 events): the same first events.
    cut, _ = await _client_events(WireResponse(body, chunking=split), learns=True, stop_after=25)
    assert cut == reference[:25]


@pytest.mark.usefixtures("http_transport")
async def test_the_answer_and_event_limits_hold_on_text_the_template_reads() -> None:
    texts = [_text(_OPENAI, "0123456789", f"p{i}") for i in range(50)]
    body = _sse([_ROLE, *texts, _FINISH])
    for limit, ends in ((205, "max_answer_chars"), (500, "COMPLETED")):
        fast, made = await _client_events(WireResponse(body), learns=True, max_answer_chars=limit)
        reference, _ = await _client_events(
            WireResponse(body), learns=False, max_answer_chars=limit
        )
        assert fast == reference
        assert _template_of(made[0]) is not None
        assert ends in fast[-1], fast[-1]
    big = _text(_OPENAI, "x" * 5000, "pbig")
    body = _sse([_ROLE, *texts[:5], big, *texts[5:], _FINISH])
    fast, made = await _client_events(WireResponse(body), learns=True, max_event_bytes=4096)
    reference, _ = await _client_events(WireResponse(body), learns=False, max_event_bytes=4096)
    assert fast == reference
    assert "max_event_bytes" in fast[-1], fast[-1]


async def test_no_repr_shows_the_answer_or_its_ids() -> None:
    secret = "chatcmpl-SECRETID"
    shape = _OPENAI.replace(b"chatcmpl-E4Rjs6IxaJVge9Ntk5keJsaeDy6vS", secret.encode())
    body = _sse([_ROLE, _text(shape, "private words", "PADSECRET"), _text(shape, "more", "p")])
    mapper = await _compare(body)
    template = _template_of(mapper)
    assert template is not None
    for shown in (repr(mapper), repr(template), str(template)):
        for word in (secret, "private", "PADSECRET", "gpt-5", "more"):
            assert word not in shown, shown
    assert not hasattr(mapper, "__dict__")
