"""Review probes of issue 28's Gemini items: CONTINUATION followed in a follow-up request
(item 3) over the framings a server or proxy may use, with thinking and signatures across
the hop, and the Worker's history after it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_gemini_support import KEY

from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    Event,
    SignatureDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
)
from llm_worker.messages import Message, Request
from llm_worker.providers._http import RetryPolicy
from llm_worker.providers.gemini import GeminiClient
from llm_worker.testing import Chunking, WireResponse, WireServer
from support import streams

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("http_transport")]


def _continuing(text: str, token: str) -> dict[str, Any]:
    content = {"role": "model", "parts": [{"text": text}]}
    return {
        "candidates": [
            {"content": content, "finishReason": "CONTINUATION", "continuationToken": token}
        ]
    }


def _stop(text: str) -> dict[str, Any]:
    content = {"role": "model", "parts": [{"text": text}]}
    return {"candidates": [{"content": content, "finishReason": "STOP"}]}


async def _stream(*answers: WireResponse) -> tuple[list[Event], Exception | None, int]:
    async with WireServer(answers) as server:
        client = GeminiClient(
            model="gemini-3.5-pro",
            api_key=KEY,
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        try:
            events, error = await streams.collect(client, Request([Message.user("Go.")]))
        finally:
            await client.aclose()
        return events, error, len(server.requests)


def _text(events: list[Event]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"], ids=["none", "lf", "crlf"])
@pytest.mark.parametrize(
    "chunking", [Chunking.whole(), Chunking.random(11, max_size=7)], ids=["whole", "random"]
)
async def test_a_continuation_whose_last_event_lacks_its_blank_line_goes_on(
    ending: bytes, chunking: Chunking
) -> None:
    # A body that ends without the blank line after its last event (a proxy trimming it):
    # the SSE decoder holds that event until the end of the body. Each response is a body of
    # its own: the CONTINUATION finish must be read, and the next body must not be glued to it.
    first = b"data: " + orjson.dumps(_continuing("Once upon ", "T1")) + ending
    second = b"data: " + orjson.dumps(_stop("a time.")) + ending
    events, error, requests = await _stream(
        WireResponse(first, chunking=chunking), WireResponse(second, chunking=chunking)
    )
    streams.check_invariants(events, failed=error is not None, allowed=streams.deltas())
    assert error is None, repr(error)
    assert requests == 2
    assert _text(events) == "Once upon a time."
    stops = [e for e in events if isinstance(e, BlockStop)]
    assert stops[-1].stop_reason is StopReason.END_TURN


async def test_a_json_array_continuation_goes_on() -> None:
    first = orjson.dumps([_continuing("Once upon ", "T1")])
    second = orjson.dumps([_stop("a time.")])
    events, error, requests = await _stream(
        WireResponse(first, content_type="application/json"),
        WireResponse(second, content_type="application/json"),
    )
    assert error is None and requests == 2
    assert _text(events) == "Once upon a time."


async def test_signed_thinking_across_a_continuation_keeps_its_signatures() -> None:
    hop1 = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "Think A", "thought": True, "thoughtSignature": "sigA"}],
                },
                "finishReason": "CONTINUATION",
                "continuationToken": "T1",
            }
        ]
    }
    hop2 = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Think B", "thought": True, "thoughtSignature": "sigB"},
                        {"text": "Answer."},
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }
    sse = [b"data: " + orjson.dumps(h) + b"\r\n\r\n" for h in (hop1, hop2)]
    events, error, requests = await _stream(WireResponse(sse[0]), WireResponse(sse[1]))
    allowed = {**streams.deltas(), BlockType.THINKING: (ThinkingDelta, SignatureDelta)}
    streams.check_invariants(events, failed=error is not None, allowed=allowed)
    assert error is None and requests == 2
    signatures = [
        (e.index, e.delta.signature)
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, SignatureDelta)
    ]
    thinking = [
        (e.index, e.delta.text)
        for e in events
        if isinstance(e, BlockDelta) and isinstance(e.delta, ThinkingDelta)
    ]
    # Each signed thought stays a block of its own with its own signature.
    assert [s for _, s in signatures] == ["sigA", "sigB"]
    assert [i for i, _ in signatures] == [i for i, _ in thinking]
    assert len({i for i, _ in signatures}) == 2
    assert len([e for e in events if isinstance(e, BlockStart)]) == 3


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_worker.providers import _gemini_metadata

    monkeypatch.setattr(_gemini_metadata, "_warned", set())


@pytest.mark.usefixtures("fresh_process")
async def test_a_hostile_model_status_is_logged_as_one_bounded_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    status = {
        "modelStage": "DEPRECATED\nERROR forged line",
        "retirementTime": "x" * 100_000,
        "message": "Use another.\r\nCRITICAL forged" + "m" * 1_000_000,
    }
    chunk = {**_stop("Hi."), "modelStatus": status}
    with caplog.at_level(logging.DEBUG, logger="llm_worker"):
        events, error, _ = await _stream(WireResponse(b"data: " + orjson.dumps(chunk) + b"\n\n"))
    assert error is None and _text(events) == "Hi."
    (note,) = [r for r in caplog.records if "Gemini model" in r.getMessage()]
    line = note.getMessage()
    assert "\n" not in line and "\r" not in line
    assert len(line) < 1_000
    assert note.levelno == logging.WARNING


async def test_cancelling_the_worker_during_a_follow_up_leaves_nothing_behind() -> None:
    import asyncio

    import anyio

    from llm_worker import Worker

    first = WireResponse(b"data: " + orjson.dumps(_continuing("Once upon ", "T1")) + b"\r\n\r\n")
    stalled = WireResponse(b"data: " + orjson.dumps(_stop("never")) + b"\r\n\r\n")
    stalled = WireResponse(stalled.body, first_byte_delay=30.0)
    tasks = len(asyncio.all_tasks())
    answers = [first, stalled]
    followed = anyio.Event()

    def answer(_: object) -> WireResponse:
        if len(answers) == 1:
            followed.set()  # the follow-up request arrived
        return answers.pop(0)

    async with WireServer(handler=answer) as server:
        client = GeminiClient(
            model="gemini-3.5-pro",
            api_key=KEY,
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        worker = Worker(client)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(worker.run, "Go.")
                await followed.wait()
                group.cancel_scope.cancel()
            await client.aclose()
        assert server.requests[1].json()["continuationToken"] == "T1"
    with anyio.fail_after(10):
        await anyio.wait_all_tasks_blocked()
    assert len(asyncio.all_tasks()) == tasks


async def test_the_history_after_a_continuation_is_one_answer_the_next_request_takes() -> None:
    # Signed thinking and text in the first response, more text in the follow-up: the
    # history holds one model turn; the next turn's body is valid under google-genai types,
    # with the thought's signature sent back and no continuation token.
    from test_gemini_third_party import _contents_mismatches  # pyright: ignore[reportPrivateUsage]

    from llm_worker import Worker
    from llm_worker.messages import TextPart, ThinkingPart

    hop1 = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Plan", "thought": True, "thoughtSignature": "c2lnQQ=="},
                        {"text": "Once upon "},
                    ],
                },
                "finishReason": "CONTINUATION",
                "continuationToken": "T1",
            }
        ]
    }
    answers = [
        WireResponse(b"data: " + orjson.dumps(hop1) + b"\r\n\r\n"),
        WireResponse(b"data: " + orjson.dumps(_stop("a time.")) + b"\r\n\r\n"),
        WireResponse(b"data: " + orjson.dumps(_stop("Again.")) + b"\r\n\r\n"),
    ]
    async with WireServer(answers) as server:
        client = GeminiClient(
            model="gemini-3.5-pro",
            api_key=KEY,
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        try:
            worker = Worker(client)
            first = await worker.run("Go.")
            second = await worker.run("More.")
        finally:
            await client.aclose()
        bodies = [r.json() for r in server.requests]
    assert (first.text, second.text) == ("Once upon a time.", "Again.")
    answer = worker.history[1]
    assert [p.text for p in answer.content if isinstance(p, TextPart)] == ["Once upon a time."]
    assert [p.signature for p in answer.content if isinstance(p, ThinkingPart)] == ["c2lnQQ=="]
    last = bodies[2]
    assert "continuationToken" not in last
    assert [c["role"] for c in last["contents"]] == ["user", "model", "user"]
    assert {"text": "Plan", "thought": True, "thoughtSignature": "c2lnQQ=="} in (
        last["contents"][1]["parts"]
    )
    assert _contents_mismatches(last) == []
