"""Review of Chat's content parts (43f5696): parts of types other than text and thinking.

A `refusal` part (`{"type": "refusal", "refusal": ...}`, the content-part spelling of
`delta.refusal` that OpenAI-compatible servers send when they stream content as a list) was
passed over: the model's refusal was lost without a word and the answer stopped as an
ordinary end of turn. It is now what `delta.refusal` is: visible text and a refusal stop.
Parts with nothing to say as text (`image_url`, Mistral's `reference`) are passed over.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from test_openai_chat_support import answer, check_invariants, replay

from llm_worker.errors import MalformedStreamError
from llm_worker.events import StopReason
from llm_worker.testing import Chunking, WireResponse

pytestmark = pytest.mark.anyio

_END = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}\n\ndata: [DONE]\n\n'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    return (
        b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": [choice]}) + b"\n\n"
    )


async def _answer(*chunks: bytes) -> Any:
    body = b"".join(chunks) + _chunk({}, "stop") + _END
    for chunking in (Chunking.whole(), Chunking.random(3, max_size=16)):
        events, error, _ = await replay(WireResponse(body, chunking=chunking))
        assert error is None, repr(error)
        check_invariants(events, error)
    return answer(events)  # pyright: ignore[reportPossiblyUnboundVariable]


async def test_a_refusal_part_is_kept_as_text_with_a_refusal_stop() -> None:
    refusal = [{"type": "refusal", "refusal": "I can't help with that."}]
    made = await _answer(_chunk({"content": refusal}))
    assert made.text == "I can't help with that."
    assert made.stop_reason is StopReason.REFUSAL
    assert made.raw_stop_reason == "stop"


async def test_text_and_refusal_parts_keep_their_order() -> None:
    parts = [
        {"type": "text", "text": "Sure, "},
        {"type": "refusal", "refusal": "no."},
        {"type": "refusal", "refusal": ""},
        {"type": "refusal", "refusal": None},
    ]
    made = await _answer(_chunk({"content": parts}), _chunk({"content": "!"}))
    assert made.text == "Sure, no.!"
    assert made.stop_reason is StopReason.REFUSAL


async def test_parts_without_text_are_passed_over() -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}},
        {"type": "reference", "reference_ids": [1, 2]},
        {"type": "text", "text": "seen"},
        {"type": "newer_kind", "payload": {"a": 1}},
    ]
    made = await _answer(_chunk({"content": parts}))
    assert made.text == "seen"
    assert made.stop_reason is StopReason.END_TURN


@pytest.mark.parametrize("value", [7, ["UNSEEN"], {"text": "UNSEEN"}, True])
async def test_a_refusal_part_of_the_wrong_type_is_a_typed_error(value: object) -> None:
    parts = [{"type": "text", "text": "SEEN"}, {"type": "refusal", "refusal": value}]
    body = _chunk({"content": parts}) + _chunk({}, "stop") + _END
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "refusal" in str(error)
    assert "SEEN" not in str(error)
