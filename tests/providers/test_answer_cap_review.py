"""Review of `max_answer_chars`: what a mapper holds before it becomes an event counts too.

Only text, thinking, tool-argument and signature deltas were counted, so a server could make
the client hold an answer of any size by other paths: the arguments of a Chat tool call
buffered until its name comes, a Gemini call whose arguments stream in `partialArgs` pieces
(joined only at its end), and whole provider blocks or citations (Gemini `executableCode`,
Anthropic server-tool results). Each path is fed an endless stream here: the cap must end it
a few events past the bound, not read on.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import orjson
import pytest

from llm_worker.errors import AnswerTooLargeError
from llm_worker.events import BlockDelta, BlockStop, CitationDelta, StopReason
from llm_worker.messages import Origin
from llm_worker.providers._blocks import StreamMapper, drive
from llm_worker.providers._gemini_ids import CallIds
from llm_worker.providers.anthropic import _MessagesStream  # pyright: ignore[reportPrivateUsage]
from llm_worker.providers.gemini import _GeminiMapper  # pyright: ignore[reportPrivateUsage]
from llm_worker.providers.openai_chat import ChatStreamMapper

pytestmark = pytest.mark.anyio

CAP = 4096
PIECE = "x" * 1000


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def _chat_call_without_a_name() -> Iterator[bytes]:
    # A call whose name never comes: its arguments are buffered, never emitted.
    def chunk(call: dict[str, Any]) -> bytes:
        delta = {"tool_calls": [{"index": 0, **call}]}
        return _sse({"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]})

    yield chunk({"id": "call_1", "type": "function", "function": {"arguments": ""}})
    for _ in itertools.count():
        yield chunk({"function": {"arguments": PIECE}})


def _gemini(part: dict[str, Any]) -> bytes:
    content = {"role": "model", "parts": [part]}
    return _sse({"candidates": [{"index": 0, "content": content}]})


def _gemini_partial_args() -> Iterator[bytes]:
    piece = {"jsonPath": "$.body", "stringValue": PIECE}
    yield _gemini({"functionCall": {"name": "f", "willContinue": True, "partialArgs": [piece]}})
    for _ in itertools.count():
        yield _gemini({"functionCall": {"willContinue": True, "partialArgs": [piece]}})


def _gemini_code_parts() -> Iterator[bytes]:
    for _ in itertools.count():
        yield _gemini({"executableCode": {"language": "PYTHON", "code": PIECE}})


def _anthropic_citations() -> Iterator[bytes]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
    yield _sse({"type": "message_start", "message": message | {"usage": {}}}, "message_start")
    block = {"type": "text", "text": ""}
    yield _sse({"type": "content_block_start", "index": 0, "content_block": block})
    citation = {
        "type": "char_location",
        "cited_text": PIECE,
        "document_index": 0,
        "document_title": "t",
        "start_char_index": 0,
        "end_char_index": 1000,
    }
    delta = {"type": "citations_delta", "citation": citation}
    for _ in itertools.count():
        yield _sse({"type": "content_block_delta", "index": 0, "delta": delta})


def _anthropic_mapper() -> StreamMapper:
    return _MessagesStream(Origin("anthropic", "m"))


def _gemini_mapper() -> StreamMapper:
    return _GeminiMapper(CallIds([]), Origin("gemini", "m"))


CASES: dict[str, tuple[Callable[[], Iterator[bytes]], Callable[[], StreamMapper], str]] = {
    "chat-buffered-call": (_chat_call_without_a_name, ChatStreamMapper, "openai_chat"),
    "gemini-partial-args": (_gemini_partial_args, _gemini_mapper, "gemini"),
    "gemini-code-parts": (_gemini_code_parts, _gemini_mapper, "gemini"),
    "anthropic-citations": (_anthropic_citations, _anthropic_mapper, "anthropic"),
}


def _gemini_citation_sources() -> Iterator[bytes]:
    # A new citation source in every chunk: kept until the end of the answer, then cited.
    for n in itertools.count():
        source = {"uri": f"https://example.test/{n}", "title": PIECE}
        candidate = {"index": 0, "citationMetadata": {"citationSources": [source]}}
        yield _sse({"candidates": [candidate]})


CASES["gemini-citation-sources"] = (_gemini_citation_sources, _gemini_mapper, "gemini")


@pytest.mark.parametrize("case", CASES)
async def test_what_a_mapper_holds_is_bounded_by_the_cap(case: str) -> None:
    body, mapper, provider = CASES[case]
    read = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal read
        for chunk in body():
            read += 1
            assert read < 100, "read on far past max_answer_chars"
            yield chunk

    with anyio.fail_after(20), pytest.raises(AnswerTooLargeError):
        async for _ in drive(chunks(), mapper(), provider=provider, max_answer_chars=CAP):
            pass
    assert read <= CAP // len(PIECE) + 3, read


async def test_gemini_citation_sources_are_kept_once_and_cited_once() -> None:
    source = {"uri": "https://example.test/a", "title": "A"}
    cited = {"index": 0, "citationMetadata": {"citationSources": [source]}}
    content = {"role": "model", "parts": [{"text": "hello"}]}
    chunks = [
        _sse({"candidates": [{"index": 0, "content": content}]}),
        _sse({"candidates": [cited]}),
        _sse({"candidates": [cited | {"finishReason": "STOP"}]}),
    ]

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    citations = [
        event.delta.citation
        async for event in drive(body(), _gemini_mapper(), provider="gemini", max_answer_chars=CAP)
        if isinstance(event, BlockDelta) and isinstance(event.delta, CitationDelta)
    ]
    assert [c.url for c in citations] == ["https://example.test/a"]


@pytest.mark.parametrize(
    "last",
    [
        {"index": 0, "finishReason": "MAX_TOKENS"},
        {"finishReason": "MAX_TOKENS"},
    ],
    ids=["with-index", "alone"],
)
async def test_a_last_gemini_candidate_without_content_still_finishes(last: dict[str, Any]) -> None:
    # Found on the way: a candidate of only a finish reason (no `content`, as when thinking
    # spent every token) was skipped, and the stream failed as cut short.
    content = {"role": "model", "parts": [{"text": "hel"}]}
    chunks = [
        _sse({"candidates": [{"index": 0, "content": content}]}),
        _sse({"candidates": [last]}),
    ]

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    stops = [
        event
        async for event in drive(body(), _gemini_mapper(), provider="gemini")
        if isinstance(event, BlockStop)
    ]
    assert [s.stop_reason for s in stops][-1] is StopReason.MAX_TOKENS
