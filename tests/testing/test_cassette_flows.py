"""Cassettes in the flows a test suite has: keys kept out of the file, a Worker wrapped, both
transports, a pause and its resume, auto mode adding what is new."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest

from llm_worker import Decision, PauseState, ThinkingPart, ToolUsePart, Worker
from llm_worker.errors import APIStatusError, ConfigurationError, StreamInterruptedError
from llm_worker.events import BlockDelta
from llm_worker.providers import RetryPolicy, from_string
from llm_worker.state import RunStatus
from llm_worker.testing import (
    WIRE_PROVIDERS,
    Cassette,
    CassetteFileError,
    CassetteMissError,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedResponse,
    ScriptStep,
    WireResponse,
    WireServer,
)
from llm_worker.testing._wire_openai_chat import encode
from testing.test_cassette import (
    KEY,
    book,
    miss,
    model_string,
    run_collect,
    timeless,
    upstream,
    weather,
)

pytestmark = pytest.mark.anyio

QUERY_KEY = "qk-Canary9876543210zyxwvuTSRQPO"
HEADER_KEY = "hk-Canary1357924680acegikMOQSUW"
OWN_SECRET = "own-Canary2468013579bdfhjlNPRTV"


def encodings(secret: str) -> list[str]:
    raw = secret.encode()
    return [
        secret,
        quote(secret, safe=""),
        *(base64.b64encode(raw[skip:]).decode() for skip in range(3)),
        base64.b64encode(f"user:{secret}".encode()).decode(),
    ]


def leaks(text: str, secret: str) -> list[str]:
    lowered = text.lower()
    found: list[str] = []
    for encoded in encodings(secret):
        form = encoded.lower()
        found += [form[i : i + 12] for i in range(len(form) - 11) if form[i : i + 12] in lowered]
    return found


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_no_key_header_query_or_configured_secret_reaches_the_file(
    provider: str, tmp_path: Path
) -> None:
    path = tmp_path / "secrets.jsonl"
    echo = f"Your key is {KEY}, query {QUERY_KEY}, account acct-123456."
    # One delta: a secret cut into several deltas is never whole in the file (see docs).
    steps: list[ScriptStep] = [ScriptedResponse.text(echo, chunk_size=1000)]
    prompt = f"My secret is {OWN_SECRET}."
    async with ScriptedModelServer(provider, steps) as server:
        tape = Cassette(path, mode="record", secrets=[OWN_SECRET], secret_patterns=[r"acct-\d+"])
        async with tape.client(
            model_string(provider),
            api_key=KEY,
            base_url=upstream(server, provider, f"?api_key={QUERY_KEY}"),
            headers={"x-proxy-token": f"Bearer {HEADER_KEY}"},
        ) as client:
            live = await Worker(client).run(prompt)
        sent = server.requests[0]
    # The API got the credentials: recording passes the request on as the client sent it.
    assert KEY in str(sent.headers) and sent.query["api_key"] == QUERY_KEY
    assert live.text == echo
    text = path.read_text()
    for secret in (KEY, QUERY_KEY, HEADER_KEY, OWN_SECRET):
        assert not leaks(text, secret), f"{secret} leaked: {leaks(text, secret)[:2]}"
    assert "acct-123456" not in text and "***" in text
    # The file replays: the request is matched as masked, the answer is the masked one.
    tape = Cassette(path, secrets=[OWN_SECRET], secret_patterns=[r"acct-\d+"])
    async with tape.client(model_string(provider)) as client:
        replayed = await Worker(client).run(prompt)
    assert not leaks(replayed.text, KEY) and replayed.text.startswith("Your key is")


def pausing_script() -> list[ScriptStep]:
    return [
        ScriptedResponse(
            [
                ThinkingPart("Weather first, then the booking.", signature="sig-think"),
                ToolUsePart("", "weather", {"city": "Oslo"}),
                ToolUsePart("", "book", {"city": "Oslo"}),
            ]
        ),
        ScriptedResponse.text("Oslo is sunny and your trip is booked."),
    ]


async def pause_and_resume(client: Any) -> tuple[list[object], list[object], Any]:
    first_events, paused = await run_collect(Worker(client, tools=[weather, book]), "Oslo?")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    state = PauseState.from_json(paused.state.to_json())  # across a restart, as JSON
    decisions = {p.call.id: Decision.approve() for p in state.pending if p.status == "pending"}
    worker = Worker(client, tools=[weather, book])
    events: list[object] = []
    with anyio.fail_after(20):
        async with worker.resume_stream(state, decisions=decisions) as stream:
            async for event in stream:
                events.append(event)
    return timeless(first_events), timeless(events), stream.result


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
async def test_thinking_tools_and_a_pause_resumed_replay_as_recorded(
    provider: str, tmp_path: Path
) -> None:
    path = tmp_path / "pause.jsonl"
    async with ScriptedModelServer(provider, pausing_script()) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, provider)
        async with tape.client(model_string(provider), base_url=url, api_key=KEY) as client:
            live_first, live_then, live = await pause_and_resume(client)
    assert live.status is RunStatus.FINISHED and "booked" in live.text
    async with Cassette(path).client(model_string(provider)) as client:
        first, then, replayed = await pause_and_resume(client)
    assert (first, then) == (live_first, live_then)
    assert replayed.messages == live.messages


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
async def test_a_wrapped_worker_records_and_replays_on_either_transport(
    transport: str, tmp_path: Path
) -> None:
    path = tmp_path / "wrapped.jsonl"
    steps: list[ScriptStep] = [ScriptedResponse.text("wrapped ✓", chunk_size=3)]
    async with ScriptedModelServer("openai_chat", steps) as server:
        client = from_string(
            "openai:scripted-model",
            base_url=upstream(server, "openai_chat"),
            api_key=KEY,
            transport=transport,
        )
        worker = Worker(client)
        original = client.transport
        async with Cassette(path, mode="record").wrap(worker) as same:
            assert same is worker and client.transport is not original
            live = await worker.run("hi")
        assert client.transport is original  # given back as the block ends
        await client.aclose()
    replay_client = from_string(
        "openai:scripted-model", base_url="http://127.0.0.1:9", api_key="k", transport=transport
    )
    async with replay_client, Cassette(path).wrap(replay_client):
        replayed = await Worker(replay_client).run("hi")
    assert replayed.messages == live.messages and replayed.text == "wrapped ✓"


async def test_a_scripted_client_cannot_be_wrapped(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ScriptedClient answers without a wire"):
        async with Cassette(tmp_path / "x.jsonl", mode="record").wrap(ScriptedClient([])):
            pass


async def test_auto_replays_what_it_has_and_records_what_is_new(tmp_path: Path) -> None:
    path = tmp_path / "auto.jsonl"
    steps: list[ScriptStep] = [ScriptedResponse.text("one"), ScriptedResponse.text("two")]
    async with ScriptedModelServer("anthropic", steps) as server:
        url = upstream(server, "anthropic")
        options: dict[str, Any] = {"base_url": url, "api_key": KEY}
        async with Cassette(path, mode="auto").client(model_string("anthropic"), **options) as c:
            assert (await Worker(c).run("first")).text == "one"
        async with Cassette(path, mode="auto").client(model_string("anthropic"), **options) as c:
            assert (await Worker(c).run("first")).text == "one"  # replayed: not sent again
            assert (await Worker(c).run("second")).text == "two"  # new: recorded
        assert len(server.requests) == 2
    async with Cassette(path).client(model_string("anthropic")) as client:
        assert (await Worker(client).run("first")).text == "one"
        assert (await Worker(client).run("second")).text == "two"


async def test_auto_without_a_key_only_replays_and_says_why_it_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    tape = Cassette(tmp_path / "empty.jsonl", mode="auto")
    with pytest.raises(CassetteMissError, match="only with the provider's API key"):
        await miss(tape, "anthropic:claude-sonnet-4-5", "hi")
    assert not (tmp_path / "empty.jsonl").exists()  # nothing recorded, nothing written


async def test_several_clients_share_one_cassette_entered_around_them(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    async with (
        ScriptedModelServer("anthropic", [ScriptedResponse.text("from claude")]) as claude,
        ScriptedModelServer("gemini", [ScriptedResponse.text("from gemini")]) as gemini,
    ):
        tape = Cassette(path, mode="record")
        async with tape:
            for provider, server in (("anthropic", claude), ("gemini", gemini)):
                url = upstream(server, provider)
                async with tape.client(model_string(provider), base_url=url, api_key=KEY) as c:
                    await Worker(c).run("who are you?")
    tape = Cassette(path)
    async with tape:
        for provider, name in (("gemini", "gemini"), ("anthropic", "claude")):  # any order
            async with tape.client(model_string(provider)) as client:
                assert (await Worker(client).run("who are you?")).text == f"from {name}"
    assert tape.unused == []


async def test_a_record_failure_of_the_api_reaches_the_client_scrubbed(tmp_path: Path) -> None:
    tape = Cassette(tmp_path / "down.jsonl", mode="record")
    url = f"http://127.0.0.1:9/v1?api_key={QUERY_KEY}"  # nothing listens on port 9
    no_retry = RetryPolicy.disabled()
    async with tape.client("openai:m", base_url=url, api_key=KEY, retry=no_retry) as client:
        with pytest.raises(APIStatusError) as caught:
            await Worker(client).run("hi")
    assert caught.value.status_code == 502
    assert not leaks(str(caught.value), QUERY_KEY) and not leaks(str(caught.value), KEY)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "line 2: not a cassette record"),
        ('{"chunk": "data: x\\n\\n"}', "before any request"),
        ('{"cassette": 2}', "cassette version 2"),
        ('{"request": {"provider": "anthropic"}}', "line 2: not a cassette record"),
        ('{"surprise": 1}', "unknown record"),
    ],
    ids=["not-json", "chunk-first", "version", "no-model", "unknown"],
)
async def test_a_file_that_is_not_a_cassette_is_named_with_its_line(
    line: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"cassette": 1}\n' + line + "\n")
    with pytest.raises(CassetteFileError, match=re.escape(says)):
        async with Cassette(path).client("anthropic:m"):
            pass


async def test_a_bad_chunk_in_the_middle_is_named_too(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    await record_text(path, "ok")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:3], '{"chunk_b64": "@@@"}', *lines[3:]]) + "\n")
    with pytest.raises(CassetteFileError, match="line 4"):
        async with Cassette(path).client("anthropic:scripted-model"):
            pass


async def record_text(path: Path, text: str, **cassette: Any) -> None:
    steps: list[ScriptStep] = [ScriptedResponse.text(text, chunk_size=4, delay=0.01)]
    async with ScriptedModelServer("anthropic", steps) as server:
        tape = Cassette(path, mode="record", **cassette)
        url = upstream(server, "anthropic")
        async with tape.client("anthropic:scripted-model", base_url=url, api_key=KEY) as client:
            assert (await Worker(client).run("hi")).text == text


async def test_a_cancelled_replay_ends_at_once_and_raises_nothing_of_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "slow.jsonl"
    await record_text(path, "one two three four five six seven", timing=True)
    assert '"at":' in path.read_text()
    tape = Cassette(path, timing=True)  # replayed as slowly as it was recorded
    with anyio.fail_after(10), anyio.CancelScope() as scope:
        async with (
            tape.client("anthropic:scripted-model") as client,
            Worker(client).stream("hi") as stream,
        ):
            async for event in stream:
                if isinstance(event, BlockDelta):
                    scope.cancel()  # at the first piece of the answer
    assert scope.cancelled_caught  # cancelled mid-answer: no unused-recording error on top
    assert tape.unused == []  # the request was matched before the cancel
    with anyio.fail_after(10):  # and the cassette opens again: nothing was left running
        async with Cassette(path).client("anthropic:scripted-model") as client:
            assert (await Worker(client).run("hi")).text.startswith("one two")


async def test_two_workers_at_once_through_one_cassette(tmp_path: Path) -> None:
    path = tmp_path / "parallel.jsonl"

    def answer(call: Any) -> ScriptedResponse:
        return ScriptedResponse.text(f"re: {call.request.messages[-1].text}", delay=0.005)

    prompts = ["alpha", "beta", "gamma"]
    for mode, steps in (("record", answer), ("replay", [])):
        async with ScriptedModelServer("openai_chat", steps) as server:
            tape = Cassette(path, mode=mode)  # type: ignore[arg-type]
            options = {"base_url": upstream(server, "openai_chat"), "api_key": KEY}
            async with tape.client("openai:scripted-model", **options) as client:
                results = await run_all(client, prompts)
        assert results == {p: f"re: {p}" for p in prompts}


async def run_all(client: Any, prompts: list[str]) -> dict[str, str]:
    results: dict[str, str] = {}

    async def one(prompt: str) -> None:
        results[prompt] = (await Worker(client).run(prompt)).text

    async with anyio.create_task_group() as group:
        for prompt in prompts:
            group.start_soon(one, prompt)
    return results


async def test_recording_relays_each_piece_as_the_api_sends_it(tmp_path: Path) -> None:
    path = tmp_path / "relay.jsonl"
    slow = ScriptedResponse.text("one two three four five six", chunk_size=4, delay=0.03)
    arrivals: list[float] = []
    async with ScriptedModelServer("anthropic", [slow]) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, "anthropic")
        model = "anthropic:scripted-model"
        async with (
            tape.client(model, base_url=url, api_key=KEY) as client,
            Worker(client).stream("hi") as stream,
        ):
            async for event in stream:
                if isinstance(event, BlockDelta):
                    arrivals.append(anyio.current_time())
    # Pieces written 30 ms apart reach the client apart: the answer is not held back whole.
    assert len(arrivals) >= 6 and arrivals[-1] - arrivals[0] >= 0.06
    assert len(tape.exchanges) == 1 and len(tape.exchanges[0].chunks) >= 6


async def test_an_answer_the_api_breaks_reaches_the_client_broken_and_is_not_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "broken.jsonl"
    data = encode(ScriptedResponse.text("a long answer that breaks", chunk_size=3), model="m")
    async with WireServer([WireResponse(data, reset_at=len(data) // 2)]) as server:
        tape = Cassette(path, mode="record")
        options = {"base_url": server.base_url + "/v1", "api_key": KEY}
        async with tape.client("openai:m", **options) as client:
            with pytest.raises(StreamInterruptedError):
                await Worker(client).run("hi")
    assert tape.exchanges == []
