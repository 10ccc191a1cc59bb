"""Review of issue 39's stream-path cuts (SSE decoder, drive, the four mappers, Gemini's hops).

Each test is a probe that broke a cut, or guards an edge of one: the event sequences of the
fast paths are held to what the general paths give.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from llm_worker.errors import ProviderError
from llm_worker.events import BlockDelta, Event, TextDelta, UsageEvent
from llm_worker.messages import Message, Origin, Request
from llm_worker.providers import openai_responses
from llm_worker.providers._blocks import BlockEmitter, StreamMapper, drive
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers._sse import json_of
from llm_worker.providers.anthropic import _MessagesStream  # pyright: ignore[reportPrivateUsage]
from llm_worker.providers.gemini import GeminiClient
from llm_worker.providers.openai_chat import ChatStreamMapper
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import streams

pytestmark = pytest.mark.anyio

_BOM = b"\xef\xbb\xbf"


def _texts(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


def _gemini_chunk(text: str, candidates: int, **finish: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    candidate.update(finish)
    usage = {"promptTokenCount": 4, "candidatesTokenCount": candidates}
    return {"candidates": [candidate], "usageMetadata": usage}


def _gemini_sse(chunks: list[dict[str, Any]], chunking: Chunking, bom: bool) -> WireResponse:
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return WireResponse((_BOM if bom else b"") + body, chunking=chunking)


@pytest.mark.parametrize(
    "chunking", [Chunking.whole(), Chunking.bytewise()], ids=["whole", "bytes"]
)
async def test_a_gemini_follow_up_opening_with_a_bom_keeps_its_first_event(
    http_transport: str, chunking: Chunking
) -> None:
    # Broken: the SSE decoder drops a BOM only at the start of the whole stream, and Hops
    # handed a CONTINUATION follow-up's body on as it came: its first line read
    # `\ufeffdata: …`, a field of no name, and the follow-up's first text ("a ") was lost
    # without an error ("Once upon time.").
    first = [
        _gemini_chunk("Once ", 1),
        _gemini_chunk("upon ", 2, finishReason="CONTINUATION", continuationToken="T"),
    ]
    second = [_gemini_chunk("a ", 1), _gemini_chunk("time.", 2, finishReason="STOP")]
    answers = [_gemini_sse(first, chunking, bom=True), _gemini_sse(second, chunking, bom=True)]
    async with WireServer(answers) as server:
        client = GeminiClient(
            model="gemini-2.5-flash",
            api_key="gemini-test-key-0123456789",
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        try:
            events, error = await streams.collect(client, Request([Message.user("Go.")]))
        finally:
            await client.aclose()
    assert error is None, repr(error)
    assert len(server.requests) == 2
    assert _texts(events) == "Once upon a time."
    usage = [(u.input_tokens, u.output_tokens) for u in events if isinstance(u, UsageEvent)]
    assert usage[-1] == (8, 4)


_WIRES: dict[str, tuple[str, str]] = {
    # wire: (its recording of a plain answer, the base URL's path)
    "openai_chat": ("finish_length", "/v1"),
    "anthropic_messages": ("plain_text", ""),
    "openai_responses": ("plain_text", "/v1"),
    "gemini": ("plain_text", "/v1beta"),
}


def _client(wire: str, base_url: str) -> Any:
    from llm_worker.providers import (
        AnthropicClient,
        GeminiClient,
        OpenAIChatClient,
        OpenAIResponsesClient,
    )

    kinds: dict[str, Any] = {
        "openai_chat": OpenAIChatClient,
        "anthropic_messages": AnthropicClient,
        "openai_responses": OpenAIResponsesClient,
        "gemini": GeminiClient,
    }
    return kinds[wire](
        model="m",
        api_key="k-0123456789abcdef",
        base_url=base_url + _WIRES[wire][1],
        retry=RetryPolicy.disabled(),
        max_concurrency=1,  # a slot a cancelled stream kept would make the next one wait
    )


@pytest.mark.parametrize("wire", sorted(_WIRES))
async def test_a_stream_closed_at_every_event_frees_its_connection(
    http_transport: str, wire: str
) -> None:
    # The lazy parts (mapper, decoder, emitter made at the first bytes) and the inline hot
    # paths: a stream closed after any number of its events (none included: abandoned
    # before its first byte) releases its connection and its admission slot at once; the
    # client's next stream (one slot) then runs whole. Every wait bounded.
    import anyio

    name = _WIRES[wire][0]
    full = streams.recorded_response(wire, name, Chunking.random(seed=7, max_size=48))
    async with WireServer([full] * 200) as server:
        client = _client(wire, server.base_url)
        try:
            whole, error = await streams.collect(client, Request([Message.user("hi")]))
            assert error is None, repr(error)
            for cut in range(len(whole) + 1):
                with anyio.fail_after(10):
                    stream = client.stream(Request([Message.user("hi")]))
                    seen = 0
                    if cut:  # 0: closed before it was read at all
                        async for _ in stream:
                            seen += 1
                            if seen == cut:
                                break
                    await stream.aclose()
                    assert seen == cut
            again, error = await streams.collect(client, Request([Message.user("hi")]))
        finally:
            await client.aclose()
    assert error is None, repr(error)
    assert [type(e) for e in again] == [type(e) for e in whole]


# -- the inline text paths against the general ones, over generated streams -----------------

_ODD: list[Any] = [None, 0, 1, True, "", "x", 5, 1.5, {}, [], {"a": 1}, [1]]


def _chat_choice(rng: random.Random) -> dict[str, Any]:
    content = rng.choice(["a", "bc", "é", "", 5, None, {}, [{"type": "text", "text": "p"}]])
    choice: dict[str, Any] = {"index": rng.choice([0, 0, 0, 1, True]), "delta": {}}
    choice["delta"]["content"] = content
    if rng.random() < 0.2:
        logprob = {"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}
        choice["logprobs"] = rng.choice([None, {"content": [logprob]}, {"content": []}])
    if rng.random() < 0.1:
        choice["finish_reason"] = rng.choice(["stop", "length", None])
    if rng.random() < 0.1:
        call = {"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{}"}}
        choice["delta"]["tool_calls"] = [call]
    if rng.random() < 0.1:
        choice["delta"]["reasoning_content"] = "r"
    if rng.random() < 0.05:
        del choice["index"]
    return choice


def _chat_extras(chunk: dict[str, Any], rng: random.Random) -> None:
    if rng.random() < 0.1:
        chunk["choices"].append({"index": 1, "delta": {"content": "z"}})
    if rng.random() < 0.1:
        chunk["usage"] = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    if rng.random() < 0.05:
        chunk["x_groq"] = {"id": "g"}
    if rng.random() < 0.03:
        chunk["error"] = {"message": "boom"}
    if rng.random() < 0.05:
        chunk["id"] = rng.choice(_ODD)
    if rng.random() < 0.03:
        chunk["choices"] = rng.choice(_ODD)


def _chat_body(rng: random.Random) -> bytes:
    # Text deltas with what the inline path must leave to the general one: logprobs on some
    # deltas only, a second choice (n > 1) alone or beside the first, usage mid-stream, a
    # tool call, reasoning, a finish, an error, content of another type, ids that change.
    base: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    chunks: list[dict[str, Any]] = []
    if rng.random() < 0.8:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    for _ in range(rng.randint(0, 10)):
        chunk: dict[str, Any] = {**base, "choices": [_chat_choice(rng)]}
        _chat_extras(chunk, rng)
        chunks.append(chunk)
    if rng.random() < 0.7:
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if rng.random() < 0.8 else b"")


def _anthropic_body(rng: random.Random) -> bytes:
    # Deltas of the open block, of another index, of a closed block; of every kind; text of
    # another type; a delta that is no object.
    start = {"type": "message_start", "message": {"id": "m1", "model": "c", "usage": {}}}
    events: list[dict[str, Any]] = [start]
    fields = {
        "text_delta": "text",
        "thinking_delta": "thinking",
        "input_json_delta": "partial_json",
    }
    for n in range(rng.randint(0, 4)):
        kind = rng.choice(["text", "text", "thinking", "tool_use"])
        block: dict[str, Any] = {"type": kind}
        if kind == "tool_use":
            block.update(id="t", name="f", input={})
        else:
            block[kind] = ""
        index = rng.choice([n, n, n + 1, 0])
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        for _ in range(rng.randint(0, 5)):
            delta_kind = rng.choice([*fields, "text_delta", "signature_delta", "newer_delta"])
            value = rng.choice(["a", "b", "", "{}", *_ODD[:4]])
            delta: Any = {"type": delta_kind, fields.get(delta_kind, "signature"): value}
            if rng.random() < 0.05:
                delta = rng.choice(_ODD)
            at = rng.choice([index, index, index, index + 1, True, None])
            events.append({"type": "content_block_delta", "index": at, "delta": delta})
        if rng.random() < 0.9:
            events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}})
    if rng.random() < 0.9:
        events.append({"type": "message_stop"})
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


def _responses_body(rng: random.Random) -> bytes:
    # Text deltas of the streaming item, of another item (held), before their item was
    # added, with logprobs on some, obfuscation, refusals, annotations, changing indexes.
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "r"}}]
    kinds = ["response.output_text.delta"] * 3 + [
        "response.refusal.delta",
        "response.output_text.annotation.added",
        "response.function_call_arguments.delta",
    ]
    for n in range(rng.randint(0, 3)):
        kind = rng.choice(["message", "message", "reasoning", "function_call"])
        item: dict[str, Any] = {"type": kind, "id": f"i{n}"}
        if kind == "function_call":
            item.update(name="f", call_id="c")
        at = rng.choice([n, n, n + 1, None, 0])
        deltas: list[dict[str, Any]] = []
        for _ in range(rng.randint(0, 5)):
            delta: dict[str, Any] = {
                "type": rng.choice(kinds),
                "output_index": rng.choice([at, at, at, 0, 1, None]),
                "content_index": rng.choice([0, 0, 1, None]),
                "delta": rng.choice(["a", "b", "", 5, None]),
            }
            if rng.random() < 0.2:
                logprob = {"token": "a", "logprob": -1.0, "bytes": [97], "top_logprobs": []}
                delta["logprobs"] = rng.choice([[], [logprob], None])
            if rng.random() < 0.1:
                delta["obfuscation"] = "xyz"
            if rng.random() < 0.1:
                delta["annotation"] = {"type": "url_citation", "url": "u", "start_index": 0}
            deltas.append(delta)
        early = 1 if rng.random() < 0.15 else 0  # a delta before its item was added
        events.extend(deltas[:early])
        events.append({"type": "response.output_item.added", "output_index": at, "item": item})
        events.extend(deltas[early:])
        done = {**item, "content": [{"type": "output_text", "text": "whole"}]}
        events.append({"type": "response.output_item.done", "output_index": at, "item": done})
    if rng.random() < 0.9:
        events.append({"type": "response.completed", "response": {"id": "r", "usage": {}}})
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


class GeneralChat(ChatStreamMapper):
    """Chat without its inline text path: every chunk read by `_chunk`."""

    __slots__ = ()

    def on_event(self, event: str, data: bytes, emitter: BlockEmitter) -> str | None:
        if event != "message" or data in (b"", b"[DONE]"):
            return super().on_event(event, data, emitter)
        chunk = json_of(data)
        if chunk.__class__ is not dict:
            return super().on_event(event, data, emitter)  # its error
        self._chunk(chunk, emitter)
        return None


class _GeneralAnthropic(_MessagesStream):
    """Anthropic without its inline text path: every delta read by `_delta`."""

    __slots__ = ()

    def on_event(self, event: str, raw: bytes, emitter: BlockEmitter) -> str | None:
        if self._complete or event == "ping":
            return super().on_event(event, raw, emitter)
        data = json_of(raw)
        if data["type"] == "content_block_delta":
            self._delta(data, emitter)
        else:
            self._other(data["type"], data, emitter)
        return None


async def _events(mapper: StreamMapper, body: bytes, rng: random.Random) -> list[str]:
    async def chunks() -> AsyncIterator[bytes]:
        at = 0
        while at < len(body):
            size = rng.choice([1, 3, 17, 200, 10_000])
            yield body[at : at + size]
            at += size

    limit = rng.choice([10**9, 10**9, 3, 6])  # max_answer_chars, at and past the bound
    seen: list[str] = []
    try:
        async for event in drive(chunks(), mapper, provider="p", max_answer_chars=limit):
            seen.append(repr(event))
    except ProviderError as exc:
        seen.append(f"{type(exc).__name__}: {exc}")
    return seen


def _makers(wire: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Any]:
    origin = Origin("p", "m")
    if wire == "openai_chat":
        return (
            _chat_body,
            lambda: ChatStreamMapper(origin=origin),
            lambda: GeneralChat(origin=origin),
        )
    if wire == "anthropic_messages":
        return _anthropic_body, lambda: _MessagesStream(origin), lambda: _GeneralAnthropic(origin)

    def general() -> StreamMapper:
        # The inline test compares `kind` with this constant: another value turns it off.
        monkeypatch.setattr(openai_responses, "_TEXT_DELTA", "(no inline path)")
        return openai_responses._ResponsesMapper(origin)  # pyright: ignore[reportPrivateUsage]

    def fast() -> StreamMapper:
        monkeypatch.undo()
        return openai_responses._ResponsesMapper(origin)  # pyright: ignore[reportPrivateUsage]

    return _responses_body, fast, general


@pytest.mark.parametrize("wire", ["openai_chat", "anthropic_messages", "openai_responses"])
async def test_the_inline_text_paths_give_what_the_general_paths_give(
    wire: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seeded generated streams, each read in the same random chunks and answer bound by
    # the mapper with its inline text path (and drive's hand-off of returned text) and by
    # the same mapper forced onto its general path: the events and errors are identical.
    body_of, fast, general = _makers(wire, monkeypatch)
    for case in range(1000):
        rng = random.Random(f"{wire}-{case}")
        body = body_of(rng)
        seed = rng.random()
        made = await _events(fast(), body, random.Random(seed))
        expected = await _events(general(), body, random.Random(seed))
        assert made == expected, (case, body[:600])


async def test_a_gemini_snapshot_comes_only_when_the_counts_it_holds_change() -> None:
    # Broken: the snapshot was decided by the six raw counts, not the ones it holds (input =
    # prompt + tool-use prompt, output = candidates + thoughts): a count moved between two
    # that add up made a second snapshot equal to the first (the snapshot before the cut
    # compared the events).
    def chunk(text: str, **usage: Any) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
        if text == "d":
            candidate["finishReason"] = "STOP"
        data = {"candidates": [candidate], "usageMetadata": usage}
        return b"data: " + orjson.dumps(data) + b"\n\n"

    reads = [
        chunk("a", promptTokenCount=3, candidatesTokenCount=1),
        chunk("b", promptTokenCount=2, toolUsePromptTokenCount=1, candidatesTokenCount=1),
        chunk("c", promptTokenCount=2, toolUsePromptTokenCount=1, candidatesTokenCount=1.0),
        chunk("d", promptTokenCount=3, candidatesTokenCount=2, thoughtsTokenCount=0),
    ]

    async def chunks() -> AsyncIterator[bytes]:
        for read in reads:  # one chunk per read: a snapshot may come after each
            yield read

    mapper = GeminiClient(model="g", api_key="k").mapper(Request([Message.user("hi")]))
    usage: list[UsageEvent] = []
    async for event in drive(chunks(), mapper, provider="gemini"):
        if isinstance(event, UsageEvent):
            usage.append(event)
    assert [(u.input_tokens, u.output_tokens, u.reasoning_tokens) for u in usage] == [
        (3, 1, None),
        (3, None, None),  # a count of another type is unknown
        (3, 2, 0),
    ]


@pytest.mark.parametrize("limit", [2, 10, 64])
def test_an_event_of_exactly_max_event_bytes_passes_wherever_its_line_is_split(
    limit: int,
) -> None:
    # Broken: an unfinished line was bounded at the limit with its `data: ` counted, a whole
    # one not at all: an event of exactly the limit passed when its line came in one read
    # and failed when the network split it past the limit's byte. One byte more fails at
    # every split.
    from llm_worker.errors import MalformedStreamError
    from llm_worker.providers._sse import SSEDecoder

    for size, fits in ((limit, True), (limit + 1, False)):
        for eol in (b"\n", b"\r\n"):
            body = b"event: e" + eol + b"data: " + b"x" * size + eol + eol
            for cut in range(len(body) + 1):
                decoder = SSEDecoder(limit)
                try:
                    events = [*decoder.raw(body[:cut]), *decoder.raw(body[cut:])]
                except MalformedStreamError:
                    assert not fits, (size, eol, cut)
                else:
                    assert fits, (size, eol, cut)
                    assert events == [("e", b"x" * size)]
