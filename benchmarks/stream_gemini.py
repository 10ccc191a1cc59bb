"""Gemini stream for bench_stream.py: a recorded-shape answer of n chunks.

Shape of the `alt=sse` recordings: every chunk is a whole `GenerateContentResponse` with one
part, `usageMetadata` (which grows with every chunk, as in `usage_in_every_chunk`), the
`modelVersion` and `responseId`, framed with CRLF. Thought parts (15 % of the chunks), then
text parts (80 %, the first carrying a `thoughtSignature`), then whole `functionCall` parts
(5 %); the last chunk carries `finishReason`.
"""

from __future__ import annotations

import json

from llm_worker.providers import GeminiClient

PROVIDER = "gemini"

_WORDS = ["The ", "pelican ", "glides ", "over ", "the ", "bay, ", "scooping ", "fish — ", "😄 "]
_SIGNATURE = "CiIB0e2Kb6Syj1a961EfbWv4W5C8RgAA/hGleV9VYJtnJFh4CmkB0e2Kb2qMva5N" * 6


def _chunk(part: dict[str, object], i: int, thoughts: int, finish: bool) -> str:
    candidate: dict[str, object] = {"content": {"parts": [part], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    usage = {
        "promptTokenCount": 34,
        "candidatesTokenCount": i + 1,
        "totalTokenCount": 34 + thoughts + i + 1,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 34}],
        "thoughtsTokenCount": thoughts,
    }
    chunk = {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-pro",
        "responseId": "beHBaJfEMIi-qtsP3769-Q8",
    }
    return "data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ": ")) + "\r\n\r\n"


def make_body(n: int) -> bytes:
    thinking, calls = n * 15 // 100, n * 5 // 100
    text = n - thinking - calls
    out: list[str] = []
    for i in range(n):
        word = _WORDS[i % len(_WORDS)]
        if i < thinking:
            part: dict[str, object] = {"text": word, "thought": True}
        elif i < thinking + text:
            part = {"text": word}
            if i == thinking:
                part["thoughtSignature"] = _SIGNATURE
        else:
            part = {"functionCall": {"name": "lookup", "args": {"query": word, "n": i}}}
        out.append(_chunk(part, i, thinking, finish=i == n - 1))
    return "".join(out).encode()


def make_client(base_url: str) -> GeminiClient:
    return GeminiClient(model="gemini-2.5-pro", base_url=base_url, api_key="bench-key")
