"""Recorded OpenAI Chat streams → OpenAIChatClient → Timeline with both collectors.

Each successful recording is played by a real HTTP server on 127.0.0.1 and read by the real
client; a Timeline with a `TextBlockCollector` and a `ToolCallCollector` must give the text
and the tool calls the recording holds. The expectations are computed here, straight from the
recording's JSON chunks, not from the client's events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from llm_worker import (
    Message,
    Request,
    TextBlockCollector,
    Timeline,
    ToolCallCollector,
)
from llm_worker.testing import Chunking, WireResponse, WireServer
from support.recorded import load, params

API = "openai_chat"


def _replayable(name: str | None) -> bool:
    if name is None:
        return True  # the no-fixtures placeholder: skipped by its mark
    recording = load(API, name)
    return (
        recording["response"]["status"] == 200 and "mid_stream_error" not in recording["features"]
    )


CASES = [p for p in params(API) if _replayable(p.values[0])]


@dataclass
class Expected:
    text: list[str] = field(default_factory=lambda: [])
    calls: dict[int, dict[str, Any]] = field(default_factory=lambda: {})

    def call(self, index: int) -> dict[str, Any]:
        return self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})


def _chunks(body: str) -> list[dict[str, Any]]:
    if body.lstrip().startswith("{"):
        return [json.loads(body)]  # a non-streaming answer: one chat.completion object
    chunks: list[dict[str, Any]] = []
    for line in body.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                chunks.append(json.loads(data))
    return chunks


def expected_from(recording: dict[str, Any]) -> Expected:
    """The answer text and tool calls, read from the recorded JSON chunks."""
    out = Expected()
    for chunk in _chunks(recording["response"]["body"]):
        for choice in chunk.get("choices") or []:
            part = choice.get("delta") or choice.get("message") or {}
            for key in ("content", "refusal"):
                if isinstance(part.get(key), str):
                    out.text.append(part[key])
            for position, call in enumerate(part.get("tool_calls") or []):
                slot = out.call(call.get("index", position))
                function = call.get("function") or {}
                slot["id"] = slot["id"] or call.get("id") or ""
                slot["name"] = slot["name"] or function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("chunking", [Chunking.whole(), Chunking.random(seed=7, max_size=40)])
async def test_recorded_stream_gives_the_recorded_text_and_calls(
    name: str, chunking: Chunking
) -> None:
    from llm_worker.providers import OpenAIChatClient

    recording = load(API, name)
    response = recording["response"]
    expected = expected_from(recording)
    timeline = Timeline()
    texts, calls = TextBlockCollector(), ToolCallCollector()
    timeline.on_text_block(texts)
    timeline.on_tool_use_block(calls)
    reply = WireResponse(response["body"], content_type=response["content_type"], chunking=chunking)
    with anyio.fail_after(10):
        async with WireServer([reply]) as server:
            client = OpenAIChatClient(model="m", api_key="k", base_url=server.base_url + "/v1")
            async with client:
                async for event in client.stream(Request([Message.user("hi")])):
                    timeline.dispatch(event)
    assert timeline.current_block is None
    assert "".join(texts.take_collected()) == "".join(expected.text)
    got = [(c.id, c.name, c.input, c.valid) for c in calls.take_collected()]
    want = [
        (c["id"], c["name"], json.loads(c["arguments"]) if c["arguments"].strip() else {}, True)
        for _, c in sorted(expected.calls.items())
    ]
    assert got == want
