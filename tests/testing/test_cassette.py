"""Cassettes: record a run against a model once, replay it byte for byte with the model gone.

`ScriptedModelServer` stands in for each of the four real APIs: recording talks HTTP to it
exactly as to the provider; the replay runs with it closed.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker import TextPart, ThinkingPart, ToolUsePart, Worker, tool
from llm_worker.errors import APIStatusError, ConfigurationError
from llm_worker.events import PingEvent
from llm_worker.state import RunResult, RunStatus
from llm_worker.testing import (
    WIRE_PROVIDERS,
    Cassette,
    CassetteFileError,
    CassetteMissError,
    CassetteUnusedError,
    Chunking,
    Exchange,
    ScriptedModelServer,
    ScriptedResponse,
    ScriptStep,
)
from llm_worker.testing._cassette_file import dumps, loads
from llm_worker.testing._cassette_match import Matcher

pytestmark = pytest.mark.anyio

KEY = "sk-cassette-Canary0123456789abcdefGHIJKL"
PREFIXES = {
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "openai_responses": "openai-responses",
    "gemini": "gemini",
}


@tool(effect="read_only")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 21 °C"


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip (a person approves it first)."""
    return f"booked {city}"


def script() -> list[ScriptStep]:
    return [
        ScriptedResponse(
            [
                ThinkingPart("The user wants the weather: call the tool.", signature="sig-1"),
                TextPart("Let me look — ünïcödé 🌤 too."),
                ToolUsePart("", "weather", {"city": "Paris"}),
            ]
        ),
        ScriptedResponse.text("It is sunny in Paris, 21 °C. Shall I book it?", chunk_size=5),
    ]


def model_string(provider: str) -> str:
    return f"{PREFIXES[provider]}:scripted-model"


def upstream(server: ScriptedModelServer[Any], provider: str, query: str = "") -> str:
    return server.base_url + WIRE_PROVIDERS[provider][1] + query


async def run_collect(worker: Worker[Any], prompt: str) -> tuple[list[object], RunResult[Any]]:
    events: list[object] = []
    with anyio.fail_after(20):
        async with worker.stream(prompt) as stream:
            async for event in stream:
                events.append(event)
    return events, stream.result


async def miss(tape: Cassette, model: str, prompt: str, **worker: Any) -> None:
    """Run through the cassette: the client reads a miss as a status error first."""
    async with tape.client(model) as client:
        with pytest.raises(APIStatusError, match="no recording"):
            await Worker(client, **worker).run(prompt)


def timeless(events: list[object]) -> list[object]:
    """The events with a ping's arrival time left out (the one field a replay cannot keep)."""
    return [PingEvent() if isinstance(e, PingEvent) else e for e in events]


def bodies(requests: list[Any]) -> list[Any]:
    return [r.json() for r in requests]


@pytest.fixture(params=sorted(WIRE_PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


async def record(
    path: Path, provider: str, steps: list[ScriptStep], prompt: str, **cassette: Any
) -> tuple[list[object], RunResult[Any], list[Any]]:
    async with ScriptedModelServer(provider, steps) as server:
        tape = Cassette(path, mode="record", **cassette)
        model = model_string(provider)
        async with tape.client(model, base_url=upstream(server, provider), api_key=KEY) as client:
            events, result = await run_collect(Worker(client, tools=[weather]), prompt)
        live_bodies = bodies(server.requests)
    assert bodies(tape.requests) == live_bodies  # the cassette passed each body on as it was
    return events, result, live_bodies


async def replay(
    path: Path, provider: str, prompt: str, **cassette: Any
) -> tuple[list[object], RunResult[Any], list[Any]]:
    tape = Cassette(path, **cassette)
    async with tape.client(model_string(provider)) as client:
        events, result = await run_collect(Worker(client, tools=[weather]), prompt)
    return events, result, bodies(tape.requests)


async def test_a_replay_with_the_model_gone_has_the_live_events_history_and_bodies(
    provider: str, tmp_path: Path
) -> None:
    path = tmp_path / "weather.jsonl"
    live_events, live, live_bodies = await record(path, provider, script(), "Weather in Paris?")
    assert live.status is RunStatus.FINISHED and "sunny" in live.text
    events, replayed, replay_bodies = await replay(path, provider, "Weather in Paris?")
    assert timeless(events) == timeless(live_events)
    assert replayed.messages == live.messages
    assert replay_bodies == live_bodies
    assert replayed.usage == live.usage


@pytest.mark.parametrize(
    "chunking",
    [Chunking.whole(), Chunking.bytewise(), Chunking.random(seed=7, max_size=9)],
    ids=["whole", "bytewise", "random"],
)
async def test_a_replay_under_any_chunking_parses_the_same(
    chunking: Chunking, tmp_path: Path
) -> None:
    path = tmp_path / "chunks.jsonl"
    live_events, live, _ = await record(path, "anthropic", script(), "Weather in Paris?")
    events, replayed, _ = await replay(path, "anthropic", "Weather in Paris?", chunking=chunking)
    assert timeless(events) == timeless(live_events)
    assert replayed.messages == live.messages


async def test_the_file_keeps_the_chunk_boundaries_and_reads_as_text(tmp_path: Path) -> None:
    path = tmp_path / "boundaries.jsonl"
    chunking = Chunking("sizes", sizes=(1, 2, 3, 5, 8, 13))  # boundaries inside é and 🌤 too
    steps: list[ScriptStep] = [ScriptedResponse.text("héllo 🌤 wörld " * 3)]
    async with ScriptedModelServer("openai_chat", steps, chunking=chunking) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, "openai_chat")
        async with tape.client("openai:scripted-model", base_url=url, api_key=KEY) as client:
            await Worker(client).run("hi")
    records = [orjson.loads(line) for line in path.read_text().splitlines()]
    pieces = [
        r["chunk"].encode() if "chunk" in r else base64.b64decode(r["chunk_b64"])
        for r in records
        if "chunk" in r or "chunk_b64" in r
    ]
    assert [len(p) for p in pieces[:6]] == [1, 2, 3, 5, 8, 13]
    assert any("chunk_b64" in r for r in records)  # a piece that splits a character
    assert records[1]["request"]["body"]["messages"][0]["content"][0]["text"] == "hi"
    assert records[2]["response"]["status"] == 200


async def test_a_changed_prompt_fails_with_a_diff_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "diff.jsonl"
    await record(path, "openai_responses", script(), "Weather in Paris?")
    tape = Cassette(path)
    with pytest.raises(CassetteMissError) as caught:
        await miss(tape, model_string("openai_responses"), "Weather in Parma?", tools=[weather])
    text = str(caught.value)
    assert "messages[0].content[0].text: differs at character 15" in text
    assert "'Weather in Parma?'" in text and "'Weather in Paris?'" in text
    assert "recording 1 of 2" in text


async def test_ignored_fields_and_patterns_are_left_out_of_matching(tmp_path: Path) -> None:
    path = tmp_path / "ignore.jsonl"
    steps: list[ScriptStep] = [ScriptedResponse.text("ok")]
    async with ScriptedModelServer("anthropic", steps) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, "anthropic")
        async with tape.client("anthropic:scripted-model", base_url=url, api_key=KEY) as client:
            worker = Worker(client, system="Today is 2026-11-28.", temperature=0.2)
            await worker.run("hi")
    tape = Cassette(path, ignore=["temperature"], ignore_patterns=[r"\d{4}-\d\d-\d\d"])
    async with tape.client("anthropic:scripted-model") as client:
        worker = Worker(client, system="Today is 2027-01-02.", temperature=0.9)
        assert (await worker.run("hi")).text == "ok"
    strict = Cassette(path)
    with pytest.raises(CassetteMissError, match=r"system: differs at character 13"):
        await miss(strict, "anthropic:scripted-model", "hi", system="Today is 2027-01-02.")


async def test_strict_lists_the_recordings_never_replayed(tmp_path: Path) -> None:
    path = tmp_path / "unused.jsonl"
    steps: list[ScriptStep] = [ScriptedResponse.text("ok")]
    async with ScriptedModelServer("gemini", steps) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, "gemini")
        async with tape.client("gemini:scripted-model", base_url=url, api_key=KEY) as client:
            await Worker(client).run("Weather in Paris?")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, *lines[1:]]) + "\n")  # the exchange twice
    with pytest.raises(CassetteUnusedError, match=r"recording 2 \(gemini, scripted-model\)"):
        async with Cassette(path).client("gemini:scripted-model") as client:
            await Worker(client).run("Weather in Paris?")
    relaxed = Cassette(path, strict=False)
    async with relaxed.client("gemini:scripted-model") as client:
        await Worker(client).run("Weather in Paris?")
    assert relaxed.unused == [1]


async def test_replay_without_a_file_says_how_to_record(tmp_path: Path) -> None:
    tape = Cassette(tmp_path / "missing.jsonl")
    with pytest.raises(CassetteFileError, match="--llm-record"):
        async with tape.client("anthropic:claude-sonnet-4-5"):
            pass


async def test_record_without_a_key_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    tape = Cassette(tmp_path / "x.jsonl", mode="record")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        async with tape.client("anthropic:claude-sonnet-4-5"):
            pass


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.binary(min_size=1, max_size=12), max_size=8),
    text=st.text(max_size=20),
    times=st.booleans(),
)
def test_the_file_gives_back_every_byte_and_boundary(
    pieces: list[bytes], text: str, times: bool
) -> None:
    exchange = Exchange(
        provider="openai_chat",
        model="m\u2028",  # a line separator stays inside its JSON line
        path="/v1/chat/completions",
        query={"alt": "sse"},
        request={"messages": [{"role": "user", "content": [{"text": text}]}]},
        status=200,
        headers={"content-type": "text/event-stream"},
        chunks=pieces,
        times=[0.5 * n for n in range(len(pieces))] if times and pieces else None,
    )
    assert loads(dumps([exchange, exchange])) == [exchange, exchange]


def test_ignored_paths_reach_into_every_item_and_only_there() -> None:
    def made(text: str, cache: int, extra: int) -> Exchange:
        content = [{"text": text, "cache": cache}, {"text": "more", "cache": cache}]
        request = {"messages": [{"role": "user", "content": content}], "options": {"x": extra}}
        return Exchange("anthropic", "m", "/v1/messages", {}, request, 200, {}, [])

    matcher = Matcher.of(["messages.*.content.*.cache", "options.x"], [])
    assert matcher.key(made("a", 1, 1)) == matcher.key(made("a", 2, 3))
    assert matcher.key(made("a", 1, 1)) != matcher.key(made("b", 1, 1))
    assert matcher.key(made("a", 1, 1)) != Matcher().key(made("a", 1, 1))
    by_index = Matcher.of(["messages.0.content.1.cache"], [])
    assert by_index.key(made("a", 1, 1)) != by_index.key(made("a", 2, 1))  # item 0 still counts
