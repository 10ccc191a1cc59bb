"""A seeded mutation campaign over the recorded streams, against all four real clients.

Each recorded 200 answer is mutated (a JSON value swapped for one of another type or deleted,
an event dropped, repeated or swapped, the body cut, bytes flipped, inserted or deleted) and
served over real HTTP on 127.0.0.1. Whatever arrives, the client must end in one of two ways:
a complete answer, or a typed error (an `LLMWorkerError`) after its `ErrorEvent` and FAILED
status; never a hang, never a foreign exception; the event-model rules hold either way, every
delta carries a string, and the Worker's assembler takes the events without failing.

The campaign is deterministic (seeded per provider). `LLM_WORKER_MUTATIONS` sets the number
of streams per client (default 300) for a longer local run; `LLM_WORKER_MUTATION_SEED` shifts
the seeds.
"""

from __future__ import annotations

import json
import os
import random
import re
import zlib
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from llm_worker.errors import LLMWorkerError
from llm_worker.events import (
    BlockDelta,
    BlockType,
    CitationDelta,
    Event,
    InputJsonDelta,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
)
from llm_worker.messages import Message, Origin, Request, ToolUsePart
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import RecordedRequest, WireResponse, WireServer
from support import streams
from support.recorded import fixture_names, load

COUNT = int(os.environ.get("LLM_WORKER_MUTATIONS", "300"))
SEED = int(os.environ.get("LLM_WORKER_MUTATION_SEED", "0"))
_CLIENTS: dict[str, tuple[str, type[HttpClient], str]] = {
    # provider: (recordings folder, client class, base-URL suffix)
    "anthropic": ("anthropic_messages", AnthropicClient, ""),
    "openai_chat": ("openai_chat", OpenAIChatClient, "/v1"),
    "openai_responses": ("openai_responses", OpenAIResponsesClient, "/v1"),
    "gemini": ("gemini", GeminiClient, "/v1beta"),
}
ALLOWED: streams.Deltas = {
    BlockType.TEXT: (TextDelta, SignatureDelta, CitationDelta),
    BlockType.THINKING: (ThinkingDelta, SignatureDelta),
    BlockType.TOOL_USE: (InputJsonDelta, SignatureDelta),
}

# -- mutations -----------------------------------------------------------------------------------

_VALUES: list[Callable[[random.Random], Any]] = [
    lambda r: r.choice([0, -1, 7, 2**70, 1.5]),
    lambda r: None,
    lambda r: r.choice([True, False]),
    lambda r: "",
    lambda r: r.choice(["x", "\u2028", "<html>", "data: x\n\n", "\ud7ff\ufffd"]) * r.randint(1, 9),
    lambda r: [],
    lambda r: [1, "a", None],
    lambda r: {},
    lambda r: {"type": r.choice(["text", "tool_use", "message", "thinking"]), "text": 3},
]
_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")


def _slots(node: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    if isinstance(node, dict):
        for key, value in list(node.items()):  # pyright: ignore[reportUnknownVariableType]
            out.append((node, key))
            _slots(value, out)
    elif isinstance(node, list):
        for index, value in enumerate(node):  # pyright: ignore[reportUnknownVariableType]
            out.append((node, index))
            _slots(value, out)
    return out


def _mutate_json(doc: Any, rng: random.Random) -> Any:
    slots = _slots(doc, [])
    if not slots:
        return rng.choice(_VALUES)(rng)
    container, key = rng.choice(slots)
    if isinstance(container, dict) and rng.random() < 0.2:
        del container[key]
    else:
        container[key] = rng.choice(_VALUES)(rng)
    return doc


def json_value(body: str, rng: random.Random) -> str:
    """One JSON value of one event (or of a whole-JSON body) swapped or deleted."""
    lines = body.splitlines(keepends=True)
    payloads = [n for n, line in enumerate(lines) if line.startswith("data:") and "{" in line]
    if not payloads:
        try:
            return json.dumps(_mutate_json(json.loads(body), rng))
        except ValueError:
            return byte_flip(body, rng)
    n = rng.choice(payloads)
    text = lines[n][5:]
    end = text[len(text.rstrip("\r\n")) :]
    try:
        doc = _mutate_json(json.loads(text), rng)
    except ValueError:
        return byte_flip(body, rng)
    lines[n] = "data: " + json.dumps(doc) + (end or "\n")
    return "".join(lines)


def _events(body: str) -> list[str]:
    pieces = _EVENT_END.split(body)
    return [p + "\n\n" for p in pieces if p.strip()]


def event_order(body: str, rng: random.Random) -> str:
    """An event dropped, repeated, or swapped with its neighbour."""
    events = _events(body)
    if len(events) < 2:
        return cut(body, rng)
    n = rng.randrange(len(events) - 1)
    action = rng.choice(["drop", "repeat", "swap"])
    if action == "drop":
        del events[n]
    elif action == "repeat":
        events.insert(n, events[n])
    else:
        events[n], events[n + 1] = events[n + 1], events[n]
    return "".join(events)


def cut(body: str, rng: random.Random) -> str:
    """The body cut at a random place."""
    return body[: rng.randrange(len(body))] if body else body


def byte_flip(body: str, rng: random.Random) -> str:
    """Characters replaced, inserted or deleted at random places (line breaks included)."""
    chars = list(body)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(chars) + 1)
        junk = rng.choice(["\n", "\r", "\r\n", "\x00", "<", "{", "}", '"', "\\", "\udcff", ":"])
        action = rng.random()
        if action < 0.4 and at < len(chars):
            chars[at] = junk
        elif action < 0.8:
            chars.insert(at, junk)
        elif chars:
            del chars[at : at + rng.randint(1, 20)]
    return "".join(chars)


MUTATIONS = [json_value, json_value, json_value, event_order, cut, byte_flip]


def mutated(provider: str, count: int) -> list[tuple[str, WireResponse]]:
    """`count` mutated answers of the provider's recordings, the same for the same seed."""
    api = _CLIENTS[provider][0]
    recordings = [load(api, n)["response"] for n in fixture_names(api)]
    answers = [r for r in recordings if r["status"] == 200]
    rng = random.Random(zlib.crc32(provider.encode()) + SEED)
    out: list[tuple[str, WireResponse]] = []
    for n in range(count):
        answer = rng.choice(answers)
        mutation = rng.choice(MUTATIONS)
        body = mutation(answer["body"], rng).encode("utf-8", "surrogatepass")
        out.append(
            (f"#{n} {mutation.__name__}", WireResponse(body, content_type=answer["content_type"]))
        )
    return out


# -- the campaign -----------------------------------------------------------------------------


def check(provider: str, events: list[Event], error: Exception | None) -> None:
    if error is not None:
        assert isinstance(error, LLMWorkerError), f"a foreign exception: {error!r}"
    streams.check_invariants(
        events, failed=error is not None, allowed=ALLOWED, reason_required=False
    )
    for event in events:
        if isinstance(event, BlockDelta):
            delta = event.delta
            if isinstance(delta, TextDelta | ThinkingDelta):
                assert type(delta.text) is str, event
            elif isinstance(delta, InputJsonDelta):
                assert type(delta.partial_json) is str, event
            elif isinstance(delta, SignatureDelta):
                assert type(delta.signature) is str, event
    message = streams.assemble(events, Origin(provider, "m"))
    ids = [p.id for p in message.content if isinstance(p, ToolUsePart)]
    assert len(ids) == len(set(ids)), ids


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(_CLIENTS))
async def test_mutated_recordings_end_typed_and_in_order(provider: str) -> None:
    cases = mutated(provider, COUNT)
    answers = iter(cases)

    def answer(_: RecordedRequest) -> WireResponse:
        return next(answers)[1]

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
        for name, _ in cases:
            with anyio.fail_after(10):
                events, error = await streams.collect(client, request)
            try:
                check(provider, events, error)
            except AssertionError as exc:
                raise AssertionError(f"{provider} {name}: {exc}") from exc
            failures += error is not None
        await client.aclose()
    # The campaign did exercise both outcomes.
    assert 0 < failures < len(cases)


WORKER_COUNT = max(1, COUNT // 6)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(_CLIENTS))
async def test_mutated_recordings_through_the_worker(provider: str) -> None:
    # The same campaign one layer up: a Worker whose first answer of each run is mutated (a
    # tool call in it goes to a tool that does not exist, so the loop sends a second request,
    # answered plainly). Each run ends with a RunResult or a typed error; the history stays
    # one a provider accepts (every call answered once) and survives its JSON round trip; no
    # task is left behind.
    import asyncio

    from llm_worker import Worker
    from llm_worker.messages import messages_from_json, messages_to_json
    from llm_worker.testing import ScriptedResponse
    from llm_worker.testing._model_server import _encoder

    cases = mutated(provider, WORKER_COUNT)
    final = WireResponse(_encoder(provider)(ScriptedResponse.text("done"), model="m"))
    fresh = [True]
    answers = iter(cases)

    def answer(_: RecordedRequest) -> WireResponse:
        if fresh[0]:
            fresh[0] = False
            return next(answers)[1]
        return final

    _, cls, suffix = _CLIENTS[provider]
    tasks = len(asyncio.all_tasks())
    outcomes = {"finished": 0, "typed error": 0}
    async with WireServer(handler=answer) as server:
        client = cls(
            model="m",
            api_key="sk-mutation-0123456789",
            base_url=server.base_url + suffix,
            retry=RetryPolicy.disabled(),
            timeout=5.0,
        )
        for name, _ in cases:
            fresh[0] = True
            worker = Worker(client, max_requests=3)
            try:
                with anyio.fail_after(10):
                    await worker.run("hi")
                outcomes["finished"] += 1
            except LLMWorkerError:
                outcomes["typed error"] += 1
            history = worker.history
            calls = [p.id for m in history for p in m.content if isinstance(p, ToolUsePart)]
            answered = [r.tool_use_id for m in history for r in m.tool_results]
            assert sorted(calls) == sorted(answered), f"{provider} {name}: {history}"
            assert messages_from_json(messages_to_json(history)) == history, name
        await client.aclose()
    # A stream generator the run dropped is closed by asyncio in a task of its own (its
    # async-generator finalizer): let those finish; a task left waiting is still counted.
    with anyio.fail_after(10):
        await anyio.wait_all_tasks_blocked()
    assert len(asyncio.all_tasks()) == tasks
    assert outcomes["finished"] and outcomes["typed error"], outcomes
