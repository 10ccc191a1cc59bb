"""The seeded mutation campaign of `test_mutations` over the third-party streams (issue 28).

The shapes issue 28 added (parallel calls at one index, Mistral thinking parts, streams ending
at their finish reason, Gemini CONTINUATION with its follow-up, modelStatus, partMetadata,
Responses programmatic tool calling) are mutated the same way and served over HTTP on
127.0.0.1: each stream ends complete or with a typed error, the event-model rules hold, no
tool-call id repeats, and the assembler takes the events. A Gemini answer in two responses
has one of them mutated (the follow-up is served to whatever token the first one gave).
"""

from __future__ import annotations

import random
import zlib

import anyio
import pytest
from test_mutations import _CLIENTS, COUNT, MUTATIONS, SEED, check

from llm_worker.messages import Message, Request
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import RecordedRequest, WireResponse, WireServer
from support import streams
from support.third_party import fixture_names, load

CASES = max(60, COUNT // 2)
_FOLDERS = {
    "openai_chat": "openai_chat",
    "openai_responses": "openai_responses",
    "gemini": "gemini",
}


def _answers(api: str) -> list[list[dict[str, str]]]:
    """Each answer as the responses that make it (a CONTINUATION answer: two)."""
    names = fixture_names(api)
    out: list[list[dict[str, str]]] = []
    for name in names:
        if name.endswith("_step2") and api == "gemini":
            continue
        first = load(api, name)["response"]
        if api == "gemini" and name.endswith("_step1"):
            out.append([first, load(api, name[: -len("1")] + "2")["response"]])
        else:
            out.append([first])
    return out


def _mutated(provider: str) -> list[tuple[str, list[WireResponse]]]:
    answers = _answers(_FOLDERS[provider])
    rng = random.Random(zlib.crc32(b"third-party " + provider.encode()) + SEED)
    cases: list[tuple[str, list[WireResponse]]] = []
    for n in range(CASES):
        parts = rng.choice(answers)
        hit = rng.randrange(len(parts))
        mutation = rng.choice(MUTATIONS)
        bodies: list[WireResponse] = []
        for i, part in enumerate(parts):
            body = mutation(part["body"], rng) if i == hit else part["body"]
            raw = body.encode("utf-8", "surrogatepass")
            bodies.append(WireResponse(raw, content_type=part["content_type"]))
        cases.append((f"#{n} {mutation.__name__}", bodies))
    return cases


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(_FOLDERS))
async def test_mutated_third_party_streams_end_typed_and_in_order(provider: str) -> None:
    cases = _mutated(provider)
    queue: list[WireResponse] = []
    fallback = WireResponse(
        {"error": {"code": 500, "message": "no more answers"}},
        status=500,
        content_type="application/json",
    )

    def answer(_: RecordedRequest) -> WireResponse:
        return queue.pop(0) if queue else fallback

    _, cls, suffix = _CLIENTS[provider]
    request = Request([Message.user("hi")])
    failures = 0
    async with WireServer(handler=answer) as server:
        client = cls(
            model="m",
            api_key="sk-mutation-0123456789",
            base_url=server.base_url + suffix,
            retry=RetryPolicy.disabled(),
            timeout=5.0,
        )
        for name, bodies in cases:
            queue[:] = bodies
            with anyio.fail_after(10):
                events, error = await streams.collect(client, request)
            try:
                check(provider, events, error)
            except AssertionError as exc:
                raise AssertionError(f"{provider} {name}: {exc}") from exc
            failures += error is not None
        await client.aclose()
    assert 0 < failures < len(cases)
