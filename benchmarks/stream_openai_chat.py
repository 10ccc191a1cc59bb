"""OpenAI Chat Completions stream for bench_stream.py: a recorded-shape answer of n chunks.

Shape of the first-party recordings (`agent_run_step1…`, `plain_text_with_usage_chunk`): every
chunk repeats `id`, `object`, `created`, `model`, `service_tier`, `system_fingerprint`,
`usage: null` and an `obfuscation` pad; a first chunk with the role, n content deltas (a few
of them reasoning deltas, as DeepSeek sends), then two tool calls whose arguments arrive in
fragments by index, the `finish_reason` chunk, the usage chunk with `choices: []`, `[DONE]`.
"""

from __future__ import annotations

import json
from typing import Any

from llm_worker.providers import OpenAIChatClient
from llm_worker.providers._http import RetryPolicy

PROVIDER = "openai_chat"

_WORDS = ["The ", "pelican ", "glides ", "over ", "the ", "bay, ", "scooping ", "fish — ", "😄 "]
_TOOL_FRAGMENTS = ['{"ci', 'ty": "Ky', 'ōto", "da', 'ys": [1, ', "2, 3]}"]


def _chunk(n: int, delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": "chatcmpl-C2QD1kGWsTW5OWiqAtOSFEAOfPfQH",
        "object": "chat.completion.chunk",
        "created": 1754693439,
        "model": "gpt-4o-2024-08-06",
        "service_tier": "default",
        "system_fingerprint": "fp_07871e2ad8",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
        "obfuscation": "3Y6yaTIPlXV"[: 4 + n % 8],
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"


def _tool_chunks(start: int) -> list[str]:
    out: list[str] = []
    for index, name in enumerate(("get_weather", "get_time")):
        first = {
            "index": index,
            "id": f"call_q2UyBRP7eXNTzAoR8lEhjc9{index}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(_chunk(start, {"tool_calls": [first]}))
        for fragment in _TOOL_FRAGMENTS:
            piece = {"index": index, "function": {"arguments": fragment}}
            out.append(_chunk(start, {"tool_calls": [piece]}))
    return out


def make_body(n: int) -> bytes:
    reasoning = n // 10
    out = [_chunk(0, {"role": "assistant", "content": None, "refusal": None})]
    for i in range(n):
        word = _WORDS[i % len(_WORDS)]
        out.append(_chunk(i, {"reasoning_content": word} if i < reasoning else {"content": word}))
    out.extend(_tool_chunks(n))
    out.append(_chunk(n, {}, finish="tool_calls"))
    usage = {
        "prompt_tokens": 364,
        "completion_tokens": n,
        "total_tokens": 364 + n,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }
    final = json.loads(_chunk(n, {})[6:])
    final["choices"], final["usage"] = [], usage
    out.append(f"data: {json.dumps(final, separators=(',', ':'))}\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def make_client(base_url: str) -> OpenAIChatClient:
    return OpenAIChatClient(
        model="gpt-4o",
        base_url=base_url + "/v1",
        api_key="sk-bench",
        retry=RetryPolicy.disabled(),
    )
