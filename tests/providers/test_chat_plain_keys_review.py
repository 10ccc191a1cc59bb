"""Review of Chat's widened hot path (R45): a text delta with quiet keys beside its content.

The hot path (and so the byte template learnt from what it takes) reads a delta whose other
keys are `role` (any value) or `reasoning_content` / `reasoning` / `refusal` / `tool_calls`
(falsy) as its text alone. Every probe here holds `ChatStreamMapper` — learning its template,
and not (`_tries = 0`) — to `GeneralChat` (every chunk through `_chunk`): the same events and
the same typed error, message included, for any bytes.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import orjson
import pytest
from test_stream_path_review import GeneralChat

from llm_worker.errors import ProviderError
from llm_worker.events import BlockStart, BlockStop, BlockType
from llm_worker.messages import Message, Origin, Request
from llm_worker.providers import OpenAIChatClient
from llm_worker.providers._blocks import drive
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.openai_chat import ChatStreamMapper
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import recorded
from support.mapped_streams import mapped_events

pytestmark = pytest.mark.anyio

_MADE_UP_ID = re.compile(r"call_[0-9a-f]{24}")  # a call without an id gets a random one


class _NoTemplate(ChatStreamMapper):
    """The hot path without its byte template."""

    __slots__ = ()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._tries = 0


async def _compare(
    body: bytes, sizes: Iterable[int] = (10**8,), limit: int = 10**9
) -> tuple[list[str], ChatStreamMapper]:
    """Assert the three mappers' events are equal; the general path's, and the learning mapper."""
    sizes = tuple(sizes)
    origin = Origin("p", "m")
    learning = ChatStreamMapper(origin=origin)
    general = await _run(GeneralChat(origin=origin), body, sizes, limit)
    assert await _run(_NoTemplate(origin=origin), body, sizes, limit) == general
    assert await _run(learning, body, sizes, limit) == general
    return general, learning


def _learnt(mapper: ChatStreamMapper) -> bool:
    return mapper._template is not None  # pyright: ignore[reportPrivateUsage]


def _sse(chunks: Iterable[bytes], *, done: bool = True) -> bytes:
    body = b"".join(b"data: " + data + b"\n\n" for data in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


_HEAD = b'{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":'
_ROLE = _HEAD + b'[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}'
_FINISH = _HEAD + b'[{"index":0,"delta":{},"finish_reason":"stop"}]}'


def _chunk(delta: bytes, index: bytes = b"0", choice: bytes = b"") -> bytes:
    """A chunk of one choice whose delta is these bytes (duplicate keys and any order kept)."""
    return (
        _HEAD + b'[{"index":' + index + b',"delta":' + delta + choice + b',"finish_reason":null}]}'
    )


# A delta's text slot (`_TEXT`), filled with each of `_TEXTS` in turn.
_SLOT = b'"@T@"'
_TEXT = ("content", "@T@")
_TEXTS = [b'"a"', b'"bc"', b'"\\u00e9\\""', b'"@T@"', b'""']


def _delta(*items: tuple[str, Any]) -> bytes:
    return (
        b"{"
        + b",".join(json.dumps(k).encode() + b":" + json.dumps(v).encode() for k, v in items)
        + b"}"
    )


# --- a delta that is no object -------------------------------------------------------------


_NOT_OBJECTS = [b'["a","b"]', b'"ab"', b'["a"]', b'"a"', b"5", b"1.5", b"true", b"[[],{}]"]


async def test_a_delta_that_is_no_object_gives_the_general_paths_events() -> None:
    # Broken: a delta of two or more items that was no object (a list, a string) reached
    # `_only_text`, whose `.items()` failed: "'list' object has no attribute 'items'" where
    # the general path says "… no attribute 'get'"; and at index 1 (n > 1), which the
    # general path passes over, it failed the stream. On the `.get` path (a provider that
    # leaves `object` out), a delta without a length (a number) at index 1 failed the
    # stream with `len()`'s TypeError. Each in the hot path's state and in the `.get` one.
    for by_get, delta, index in itertools.product((False, True), _NOT_OBJECTS, (b"0", b"1")):
        plain = _chunk(_delta(("content", "t"), ("role", "assistant")))
        chunks = [_ROLE, plain, _chunk(delta, index), plain, _chunk(delta, index), plain, _FINISH]
        if by_get:  # the second chunk's KeyError moves the mapper onto `.get`
            chunks = [c.replace(b'"object":"chat.completion.chunk",', b"") for c in chunks]
        for size in (10**8, 5):
            general, mapper = await _compare(_sse(chunks), (size,))
            if index == b"1":  # the second choice is not read: the stream ends well
                assert "COMPLETED" in general[-1], (by_get, delta, general[-3:])
            else:
                assert general[-1].startswith("MalformedStreamError"), (by_get, delta)
            assert not (by_get and mapper._keyed)  # pyright: ignore[reportPrivateUsage]


# --- every key beside content, every kind of value -----------------------------------------

_KEYS = [
    "role", "reasoning_content", "reasoning", "refusal", "tool_calls", "annotations", "audio",
    "function_call", "logprobs", "reasoning_details", "Content", "content ", "x",
]  # fmt: skip
_CALL = {
    "index": 0,
    "id": "call_1",
    "type": "function",
    "function": {"name": "f", "arguments": "{}"},
}
_VALUES: list[Any] = [
    # falsy of every JSON type
    None, False, 0, 0.0, -0.0, "", [], {},
    # truthy of every type, wrong types, what the general path acts on
    True, 1, -1, 1.5, 10**30, 1e300, "assistant", "think", "\u00e9\U0001f600", [0], [{}],
    {"a": 1}, [_CALL], [{"type": "text", "text": "p"}], {"transcript": "heard"},
    [{"type": "url_citation", "url_citation": {"url": "https://u"}}],
    {"name": "f", "arguments": "{}"},
    # huge, nested
    "r" * 20_000, [[[[[[[[[[[]]]]]]]]]]], {"a": {"b": {"c": [None, False, ""]}}},
    # what orjson refuses (the chunk is read by `json_of`): a lone surrogate
    "\ud800", ["\udc00"],
]  # fmt: skip


async def test_every_key_beside_content_with_any_value_gives_the_general_paths_events() -> None:
    # The probed chunk repeated with other texts (the template learnt from it, then read),
    # the key before the content (read whole) and after it (in small reads); then a text
    # chunk of another shape.
    learnt = 0
    for key, value in itertools.product(_KEYS, _VALUES):
        for items, sizes in (((key, value), _TEXT), (10**8,)), ((_TEXT, (key, value)), (5, 64)):
            chunks = [_chunk(_delta(*items).replace(_SLOT, t)) for t in _TEXTS]
            body = _sse([_ROLE, *chunks, chunks[0], _chunk(_delta(("content", "z"))), _FINISH])
            _, mapper = await _compare(body, sizes)
            learnt += _learnt(mapper)
    assert learnt >= 2 * 12, learnt  # role (any value) and the falsy quiet keys


async def test_duplicate_keys_and_many_keys_give_the_general_paths_events() -> None:
    # JSON keeps a duplicate key's last value: a quiet key that is null last but text
    # first (and the reverse), content twice, and a delta of every quiet key at once.
    deltas = [
        b'{"content":"@T@","reasoning_content":"think","reasoning_content":null}',
        b'{"content":"@T@","reasoning_content":null,"reasoning_content":"think"}',
        b'{"content":"@T@","refusal":null,"refusal":"no"}',
        b'{"content":"@T@","tool_calls":[],"tool_calls":[' + json.dumps(_CALL).encode() + b"]}",
        b'{"content":"@T@","content":null,"role":"assistant"}',
        b'{"content":null,"content":"@T@","role":"assistant"}',
        b'{"content":"@T@","content":"b","reasoning":""}',
        b'{"role":"assistant","role":{"content":"x"},"content":"@T@","reasoning":null}',
        _delta(("role", "assistant"), _TEXT, ("reasoning_content", None),
               ("reasoning", ""), ("refusal", None), ("tool_calls", [])),
        _delta(*((f"k{i}", None) for i in range(3000)), _TEXT),
        _delta(_TEXT, *(("role", i) for i in range(3000))),
    ]  # fmt: skip
    for delta in deltas:
        body = _sse([_ROLE, *(_chunk(delta.replace(_SLOT, t)) for t in _TEXTS), _FINISH])
        await _compare(body, (10**8,))
        await _compare(body, (7,))


# --- block order, tool calls, logprobs, second choices ---------------------------------------


def _deepseek(text: str | None, reasoning: str | None) -> bytes:
    # DeepSeek's shape: both keys in every delta, the one not streaming null.
    delta = _delta(("content", text), ("reasoning_content", reasoning))
    return _chunk(delta, choice=b',"logprobs":null')


async def test_reasoning_that_turns_on_and_off_opens_and_closes_blocks_as_the_general_path() -> (
    None
):
    # Thinking, then text, then thinking again, then text: each text chunk carries
    # `reasoning_content: null` (the hot path's and the template's), each thinking chunk
    # `content: null` or "" (the general path's).
    chunks = [
        *(_deepseek(None, r) for r in ("Hm", "m,")),
        *(_deepseek(t, None) for t in ("So", " it", " is")),
        *(_deepseek("", r) for r in ("Wait", " no")),
        *(_deepseek(t, None) for t in (" 4", ".")),
        _deepseek(None, "late"),
        _deepseek("!", ""),
    ]
    body = _sse([_ROLE, *chunks, _FINISH])
    for sizes in ((10**8,), (1,), (13, 200)):
        _, mapper = await _compare(body, sizes)
        assert _learnt(mapper)
    origin = Origin("p", "m")
    events: list[Any] = []
    async for event in drive(_once(body), ChatStreamMapper(origin=origin), provider="p"):
        events.append(event)
    blocks = [
        (type(e).__name__, getattr(e, "block_type", None))
        for e in events
        if isinstance(e, (BlockStart, BlockStop))
    ]
    starts = [kind for name, kind in blocks if name == "BlockStart"]
    assert starts == [BlockType.THINKING, BlockType.TEXT] * 3
    assert len(blocks) == 12  # every block closed


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body


async def test_text_beside_a_live_tool_call_gives_the_general_paths_events() -> None:
    # A tool call starts (in a delta of its own, and beside content), then text chunks of
    # the quiet shape while it is live, then its arguments, then text again.
    quiet = [("role", "assistant"), ("reasoning_content", None), ("tool_calls", [])]
    text = [_chunk(_delta(("content", t), *quiet)) for t in ("a", "b", "c")]
    call = _chunk(_delta(("tool_calls", [_CALL]), ("role", "assistant")))
    both = _chunk(_delta(("content", "x"), ("tool_calls", [_CALL]), ("reasoning_content", None)))
    arguments = _chunk(_delta(("tool_calls", [{"index": 0, "function": {"arguments": "1"}}])))
    for middle in ([call], [both], [call, arguments], [both, arguments, *text, arguments]):
        body = _sse([_ROLE, *text, *middle, *text, _FINISH])
        for sizes in ((10**8,), (9,)):
            await _compare(body, sizes)


async def test_logprobs_and_second_choices_beside_quiet_keys_give_the_general_paths_events() -> (
    None
):
    logprob = {"token": "a", "logprob": -0.5, "bytes": [97], "top_logprobs": []}
    quiet = _delta(("role", "assistant"), ("content", "a"), ("refusal", None))
    variants = [
        _chunk(quiet, choice=b',"logprobs":' + orjson.dumps({"content": [logprob]})),
        _chunk(quiet, choice=b',"logprobs":{"content":[]}'),
        _chunk(quiet, choice=b',"logprobs":null'),
        _chunk(quiet, b"1"),
        _chunk(quiet, b"false"),
        _chunk(quiet, b"null"),
        _HEAD + b'[{"index":0,"delta":' + quiet + b'},{"index":1,"delta":' + quiet + b"}]}",
        _HEAD + b'[{"index":1,"delta":' + quiet + b'},{"index":0,"delta":' + quiet + b"}]}",
        _HEAD[:-1] + b'[{"index":0,"delta":' + quiet + b'}],"usage":{"prompt_tokens":1}}',
        _HEAD[:-1] + b'[{"index":0,"delta":' + quiet + b'}],"usage":null,"x_groq":{}}',
        _HEAD[:-1] + b'[{"index":0,"delta":' + quiet + b',"finish_reason":"length"}]}',
    ]
    plain = _chunk(quiet)
    for variant in variants:
        body = _sse([_ROLE, plain, plain, variant, plain, variant, _FINISH])
        for sizes in ((10**8,), (4,)):
            await _compare(body, sizes)


# --- seeded streams of random deltas --------------------------------------------------------

_FUZZ_VALUES: list[Any] = [*_VALUES[:24], "x y", "\\u0000"]


def _random_delta(rng: random.Random) -> bytes:
    if rng.random() < 0.03:
        return rng.choice(_NOT_OBJECTS)
    items = [
        (rng.choice([*_KEYS[:6], "content"]), rng.choice(_FUZZ_VALUES))
        for _ in range(rng.choice([0, 1, 2, 4]))
    ]
    if rng.random() < 0.8:
        items.append(rng.choice([_TEXT, _TEXT, ("content", ""), ("content", None), ("content", 5)]))
    rng.shuffle(items)
    return _delta(*items)


def _random_chunk(rng: random.Random, pad: bool) -> bytes:
    extra = b""
    if rng.random() < 0.1:
        extra = rng.choice([b',"logprobs":null', b',"logprobs":{"content":[]}'])
    chunk = _chunk(_random_delta(rng), rng.choice([b"0"] * 9 + [b"1"]), extra)
    if rng.random() < 0.03:
        chunk = chunk[:-1] + b',"usage":{"prompt_tokens":1,"completion_tokens":2}}'
    if rng.random() < 0.05:
        chunk = chunk.replace(b'"finish_reason":null', b'"finish_reason":"stop"')
    return chunk[:-1] + b',"obfuscation":"p"}' if pad else chunk


def _random_stream(rng: random.Random) -> bytes:
    # Runs of one chunk shape with other texts (the template learnt from its first, then
    # read), the shapes random deltas of the hot path's keys and others, hostile values.
    pad = rng.random() < 0.5
    chunks = [_ROLE]
    for _ in range(rng.randint(1, 6)):
        shape = _random_chunk(random.Random(rng.random()), pad)
        for _ in range(rng.randint(1, 4)):
            chunks.append(shape.replace(_SLOT, rng.choice(_TEXTS)))
    chunks.append(_FINISH)
    return _sse(chunks, done=rng.random() < 0.9)


async def test_random_streams_of_quiet_and_other_keys_give_the_general_paths_events() -> None:
    learnt = 0
    for case in range(1500):
        rng = random.Random(f"r45-{case}")
        body = _random_stream(rng)
        sizes = [rng.choice([1, 3, 17, 200, 10**8]) for _ in range(4)]
        _, mapper = await _compare(body, sizes, rng.choice([10**9, 10**9, 3, 7]))
        learnt += _learnt(mapper)
    assert learnt >= 150, learnt


# --- every recording -----------------------------------------------------------------------


def _recorded() -> list[tuple[str, bytes]]:
    found: list[tuple[str, bytes]] = []
    for name in recorded.fixture_names("openai_chat"):
        response = recorded.load("openai_chat", name)["response"]
        if response["status"] == 200 and "event-stream" in response["content_type"]:
            found.append((name, response["body"].encode()))
    return found


def _with_quiet_keys(body: bytes) -> bytes:
    # A recording's text deltas given DeepSeek's and OpenRouter's quiet keys (their values
    # varied chunk by chunk: a template learnt from one chunk is missed by the next).
    out: list[bytes] = []
    for n, line in enumerate(body.split(b"\n")):
        if line.startswith(b"data: {") and b'"delta":{"content":' in line:
            quiet = [b'"role":"assistant",', b'"reasoning_content":null,', b'"refusal":"",'][n % 3]
            out.append(line.replace(b'"delta":{', b'"delta":{' + quiet, 1))
        else:
            out.append(line)
    return b"\n".join(out)


async def test_every_recorded_stream_gives_the_general_paths_events() -> None:
    # Whole, five bytes at a time and in seeded random sizes; as recorded and with quiet keys
    # added to its text deltas. The recordings of DeepSeek, OpenRouter and Z.ai carry
    # quiet keys themselves: their templates are learnt.
    rng = random.Random(45)
    learnt: set[str] = set()
    for name, body in _recorded():
        for variant in (body, _with_quiet_keys(body)):
            for sizes in ((10**8,), (5,), tuple(rng.randint(1, 400) for _ in range(30))):
                _, mapper = await _compare(variant, sizes)
            if _learnt(mapper):
                learnt.add(name)
    assert {"deepseek_reasoning_content", "openrouter_cached_tokens"} <= learnt, learnt


# --- through the real client, on both transports ---------------------------------------------


class _Client(OpenAIChatClient):
    """The Chat client, its mapper the general path's or the hot path's (learning or not)."""

    kind = "learning"

    def mapper(self, request: Request) -> ChatStreamMapper:
        made = super().mapper(request)
        options: dict[str, Any] = {"scrub": made._scrub, "origin": made._origin}  # pyright: ignore[reportPrivateUsage]
        return {"learning": ChatStreamMapper, "no_template": _NoTemplate, "general": GeneralChat}[
            self.kind
        ](**options)


async def _client_events(
    response: WireResponse, kind: str, stop_after: int | None = None
) -> list[str]:
    seen: list[str] = []
    async with WireServer([response]) as server:
        client = _Client(
            model="deepseek-reasoner",
            base_url=server.base_url + "/v1",
            api_key="sk-test-0123456789",
            retry=RetryPolicy.disabled(),
        )
        client.kind = kind
        try:
            with anyio.fail_after(30):
                try:
                    stream = client.stream(Request([Message.user("hi")]))
                    async for event in stream:
                        seen.append(_MADE_UP_ID.sub("call_?", repr(event)))
                        if len(seen) == stop_after:
                            break  # the caller stops reading mid-stream
                    await stream.aclose()  # pyright: ignore[reportAttributeAccessIssue]
                except ProviderError as exc:
                    seen.append(f"{type(exc).__name__}: {exc}")
        finally:
            await client.aclose()
    return seen


@pytest.mark.usefixtures("http_transport")
@pytest.mark.parametrize("chunking", ["whole", "random"])
async def test_the_real_client_gives_the_general_paths_events(chunking: str) -> None:
    # DeepSeek's recording with its text repeated in quiet-key shapes, a live tool call,
    # then a delta that is no object at index 1 (passed over) and at index 0 (the error).
    body = recorded.load("openai_chat", "deepseek_reasoning_content")["response"]["body"].encode()
    lines = [line for line in body.split(b"\n\n") if line and b"[DONE]" not in line]
    quiet = [
        _chunk(_delta(("content", f"w{i}"), ("role", "assistant"), ("reasoning_content", None)))
        for i in range(30)
    ]
    call = _chunk(_delta(("tool_calls", [_CALL])))
    hostile = [_chunk(b'["a","b"]', b"1"), _chunk(b"5", b"1"), *quiet[:3], _chunk(b'"ab"')]
    stream = (
        b"\n\n".join(lines[:-1])
        + b"\n\n"
        + _sse([*quiet[:20], call, *quiet[20:], *hostile], done=False)
    )
    split = Chunking.whole() if chunking == "whole" else Chunking.random(45, max_size=97)
    general = await _client_events(WireResponse(stream, chunking=split), "general")
    assert general[-1].startswith("MalformedStreamError"), general[-1]
    for kind in ("learning", "no_template"):
        assert await _client_events(WireResponse(stream, chunking=split), kind) == general, kind
    # Cancelled mid-stream, past the template's first reads: the same first events.
    cut = await _client_events(WireResponse(stream, chunking=split), "learning", len(general) - 20)
    assert cut == general[:-20]


async def _run(
    mapper: ChatStreamMapper, body: bytes, sizes: Iterable[int], limit: int
) -> list[str]:
    # A call without an id gets a random one: made the same on every path.
    return await mapped_events(
        mapper, body, sizes, limit=limit, clean=lambda shown: _MADE_UP_ID.sub("call_?", shown)
    )
