"""Anthropic Messages stream for bench_stream.py: a recorded-shape answer of n content deltas.

Shape of the recordings (`event:` line per event, the padding spaces Anthropic puts inside
some `data:` objects, a `ping`): a thinking block (15 % of the deltas, then its signature), a
text block (75 %), a tool call whose arguments arrive in `input_json_delta` pieces (10 %).
"""

from __future__ import annotations

import json

from llm_worker.providers import AnthropicClient

PROVIDER = "anthropic"

_WORDS = ["The ", "pelican ", "glides ", "over ", "the ", "bay, ", "scooping ", "fish — ", "😄 "]


def _event(kind: str, payload: dict[str, object], pad: int = 0) -> str:
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"event: {kind}\ndata: {data[:-1]}{' ' * pad}}}\n\n"


def _delta(index: int, delta: dict[str, object], n: int) -> str:
    payload = {"type": "content_block_delta", "index": index, "delta": delta}
    return _event("content_block_delta", payload, pad=n % 13)


def make_body(n: int) -> bytes:
    thinking, tool = n * 15 // 100, n * 10 // 100
    text = n - thinking - tool
    usage = {"input_tokens": 598, "cache_read_input_tokens": 0, "output_tokens": 8}
    start = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "content": [],
        "usage": usage,
    }
    out = [_event("message_start", {"type": "message_start", "message": start})]
    block = {"type": "thinking", "thinking": "", "signature": ""}
    out.append(
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
    )
    out.append(_event("ping", {"type": "ping"}))
    for i in range(thinking):
        out.append(_delta(0, {"type": "thinking_delta", "thinking": _WORDS[i % len(_WORDS)]}, i))
    out.append(
        _delta(0, {"type": "signature_delta", "signature": "EoQDCm0IDhgCKkCDzGs2kL2P" * 8}, 0)
    )
    out.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    block = {"type": "text", "text": ""}
    out.append(
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": block},
        )
    )
    for i in range(text):
        out.append(_delta(1, {"type": "text_delta", "text": _WORDS[i % len(_WORDS)]}, i))
    out.append(_event("content_block_stop", {"type": "content_block_stop", "index": 1}))
    block = {"type": "tool_use", "id": "toolu_bench", "name": "search", "input": {}}
    out.append(
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 2, "content_block": block},
        )
    )
    out.append(_delta(2, {"type": "input_json_delta", "partial_json": '{"q": ['}, 0))
    for i in range(tool - 2):
        out.append(_delta(2, {"type": "input_json_delta", "partial_json": f'"w{i}", '}, i))
    out.append(_delta(2, {"type": "input_json_delta", "partial_json": '"end"]}'}, 0))
    out.append(_event("content_block_stop", {"type": "content_block_stop", "index": 2}))
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": n},
    }
    out.append(_event("message_delta", end))
    out.append(_event("message_stop", {"type": "message_stop"}))
    return "".join(out).encode()


def make_client(base_url: str) -> AnthropicClient:
    return AnthropicClient(model="claude-bench", api_key="bench", base_url=base_url)
