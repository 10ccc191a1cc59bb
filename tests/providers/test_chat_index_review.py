"""A Chat choice whose `index` is no integer is a typed error, not another choice (R43).

Only the choice of index 0 is the answer; others (n > 1) are passed over. An index of the
wrong type ("0", 1.5, true) was passed over too, on the plain, the `.get` and the full
path alike: its text dropped without a word, and the stream ended as complete. Gemini's
candidates are read so since 14998c4.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from llm_worker.errors import MalformedStreamError
from llm_worker.messages import Origin
from llm_worker.providers._blocks import drive
from llm_worker.providers.openai_chat import ChatStreamMapper

pytestmark = pytest.mark.anyio

_BASE = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def _chunk(text: str, index: Any = 0, **choice: Any) -> dict[str, Any]:
    one = {"index": index, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
    return {**_BASE, "choices": [one | choice]}


async def _texts(chunks: list[dict[str, Any]]) -> list[str]:
    role = {**_BASE, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    end = {**_BASE, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    every = [role, *chunks, end]
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in every) + b"data: [DONE]\n\n"

    async def reads() -> AsyncIterator[bytes]:
        yield body

    out: list[str] = []
    async for event in drive(reads(), ChatStreamMapper(origin=Origin("p", "m")), provider="p"):
        text = getattr(getattr(event, "delta", None), "text", None)
        if isinstance(text, str) and text:
            out.append(text)
    return out


@pytest.mark.parametrize("index", ["0", "1", 1.5, True, [0]])
@pytest.mark.parametrize("path", ["plain", "by_get", "full"])
async def test_an_index_of_the_wrong_type_fails_the_stream_typed(index: Any, path: str) -> None:
    before = [_chunk("a")]
    if path == "by_get":  # a provider leaving `logprobs` out: `.get` for the rest
        before = [{**_BASE, "choices": [{"index": 0, "delta": {"content": "a"}}]}]
    hostile = _chunk("LOST", index)
    if path == "full":  # a delta the plain paths do not take (two fields)
        hostile["choices"][0]["delta"]["refusal"] = None
    with pytest.raises(MalformedStreamError, match=r"choice: `index` is .*, expected an integer"):
        await _texts([*before, hostile, _chunk("c")])


async def test_other_choices_and_a_missing_index_read_as_before() -> None:
    no_index = _chunk("b")
    del no_index["choices"][0]["index"]
    chunks = [_chunk("a"), _chunk("other", 1), _chunk("x", 2), no_index, _chunk("c", None)]
    assert await _texts(chunks) == ["a", "b", "c"]
