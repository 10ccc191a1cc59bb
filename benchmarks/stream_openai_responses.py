"""OpenAI Responses stream for bench_stream.py: a recorded-shape answer of n content deltas.

Shape of the recordings (`event:` line per event, `sequence_number`, `item_id`,
`output_index`, `content_index`, the `obfuscation` padding and empty `logprobs` of each text
delta): a reasoning item whose summary arrives in deltas (15 % of the deltas, then its
encrypted content in `output_item.done`), a message (75 %), a function call whose arguments
arrive in pieces (10 %), `response.completed` with the usage.
"""

from __future__ import annotations

import json
from typing import Any

from llm_worker.providers import OpenAIResponsesClient

PROVIDER = "openai_responses"

_WORDS = ["The ", "pelican ", "glides ", "over ", "the ", "bay, ", "scooping ", "fish — ", "😄 "]
_PAD = "NBbiCoB2yJyshvQ"


class _Stream:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.sequence = 0

    def event(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        self.out.append(f"event: {kind}\ndata: {data}\n\n")


def _response(status: str, output: list[Any], usage: Any = None) -> dict[str, Any]:
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1762788944,
        "status": status,
        "model": "gpt-5-2025-08-07",
        "output": output,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "usage": usage,
    }


def _reasoning(s: _Stream, n: int) -> dict[str, Any]:
    item: dict[str, Any] = {"id": "rs_bench", "type": "reasoning", "summary": []}
    s.event("response.output_item.added", output_index=0, item=item)
    where = {"item_id": "rs_bench", "output_index": 0, "summary_index": 0}
    s.event("response.reasoning_summary_part.added", **where, part={"type": "summary_text"})
    text = ""
    for i in range(n):
        word = _WORDS[i % len(_WORDS)]
        text += word
        s.event("response.reasoning_summary_text.delta", **where, delta=word, obfuscation=_PAD)
    s.event("response.reasoning_summary_text.done", **where, text=text)
    done = {**item, "summary": [{"type": "summary_text", "text": text}]}
    done["encrypted_content"] = "gAAAAABoyXvxI6jwG5j6rvTGC7PD6JN5758K" * 40
    s.event("response.output_item.done", output_index=0, item=done)
    return done


def _message(s: _Stream, n: int) -> dict[str, Any]:
    item: dict[str, Any] = {"id": "msg_bench", "type": "message", "status": "in_progress"}
    s.event("response.output_item.added", output_index=1, item={**item, "content": []})
    where = {"item_id": "msg_bench", "output_index": 1, "content_index": 0}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    s.event("response.content_part.added", **where, part=part)
    text = ""
    for i in range(n):
        word = _WORDS[i % len(_WORDS)]
        text += word
        pad = _PAD[: 3 + i % 12]
        s.event("response.output_text.delta", **where, delta=word, logprobs=[], obfuscation=pad)
    s.event("response.output_text.done", **where, text=text, logprobs=[])
    s.event("response.content_part.done", **where, part={**part, "text": text})
    done = {**item, "status": "completed", "content": [{**part, "text": text}]}
    s.event("response.output_item.done", output_index=1, item=done)
    return done


def _call(s: _Stream, n: int) -> dict[str, Any]:
    item = {"id": "fc_bench", "type": "function_call", "call_id": "call_bench", "name": "search"}
    s.event("response.output_item.added", output_index=2, item={**item, "arguments": ""})
    where = {"item_id": "fc_bench", "output_index": 2}
    pieces = ['{"q": [', *(f'"w{i}", ' for i in range(max(0, n - 2))), '"end"]}']
    for piece in pieces:
        s.event("response.function_call_arguments.delta", **where, delta=piece, obfuscation=_PAD)
    arguments = "".join(pieces)
    s.event("response.function_call_arguments.done", **where, arguments=arguments)
    done = {**item, "arguments": arguments, "status": "completed"}
    s.event("response.output_item.done", output_index=2, item=done)
    return done


def make_body(n: int) -> bytes:
    thinking, tool = n * 15 // 100, n * 10 // 100
    s = _Stream()
    s.event("response.created", response=_response("in_progress", []))
    s.event("response.in_progress", response=_response("in_progress", []))
    output = [_reasoning(s, thinking), _message(s, n - thinking - tool), _call(s, tool)]
    usage = {
        "input_tokens": 598,
        "input_tokens_details": {"cached_tokens": 512},
        "output_tokens": n,
        "output_tokens_details": {"reasoning_tokens": thinking},
        "total_tokens": 598 + n,
    }
    s.event("response.completed", response=_response("completed", output, usage))
    return "".join(s.out).encode()


def make_client(base_url: str) -> OpenAIResponsesClient:
    return OpenAIResponsesClient(model="gpt-5", base_url=base_url + "/v1", api_key="bench")
