"""Review probes of the cassettes kept as tests: a cancel mid-record, a counting call, a
hand-edited answer, a key an API error echoes, a gzipped answer, a huge request."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import APIStatusError, AuthenticationError
from llm_worker.events import BlockDelta
from llm_worker.messages import Message, Request
from llm_worker.testing import (
    WIRE_PROVIDERS,
    Cassette,
    CassetteFileError,
    CassetteMissError,
    Chunking,
    ScriptedModelServer,
    ScriptedResponse,
    ScriptStep,
    WireResponse,
    WireServer,
)
from llm_worker.testing._cassette_file import loads
from llm_worker.testing._wire_anthropic import encode
from testing.test_cassette import KEY, miss, model_string, upstream
from testing.test_cassette_flows import (
    HEADER_KEY,
    QUERY_KEY,
    leaks,
    pause_and_resume,
    pausing_script,
)

pytestmark = pytest.mark.anyio


async def record_hi(path: Path, provider: str = "anthropic", *, count: bool = False) -> None:
    """Record a run of "hi" (and, with `count`, a count of its tokens before it)."""
    async with ScriptedModelServer(provider, [ScriptedResponse.text("ok")]) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, provider)
        async with tape.client(model_string(provider), base_url=url, api_key=KEY) as client:
            if count:
                await client.count_tokens(Request([Message.user("hi")]))
            assert (await Worker(client).run("hi")).text == "ok"


async def test_a_cancel_mid_record_closes_the_server_at_once_and_keeps_nothing(
    tmp_path: Path,
) -> None:
    # The API sends half its answer, then nothing for 30 s: the cancel must not wait for it
    # (it waited; a deadline then left the cassette's server and its socket open).
    path = tmp_path / "slow.jsonl"
    data = encode(ScriptedResponse.text("one two three four", chunk_size=4), model="m")
    slow = WireResponse(data, chunking=Chunking("sizes", sizes=(len(data) // 2,)), chunk_delay=30)
    async with WireServer([slow]) as server:
        tape = Cassette(path, mode="record")
        port: int | None = None
        with anyio.fail_after(10), anyio.CancelScope() as scope:
            async with (
                tape.client("anthropic:m", base_url=server.base_url, api_key=KEY) as client,
                Worker(client).stream("hi") as stream,
            ):
                port = urlsplit(client.transport.base_url).port
                async for event in stream:
                    if isinstance(event, BlockDelta):
                        scope.cancel()
        assert scope.cancelled_caught and port is not None
    with pytest.raises(OSError, match=r"connection attempts failed|refused"):  # server closed
        await anyio.connect_tcp("127.0.0.1", port)
    assert tape.exchanges == []  # an answer cut short is no recording
    assert not path.exists()  # and an interrupted recording writes no file
    with anyio.fail_after(10):  # the cassette opens again: nothing was left running
        async with Cassette(path, mode="record").client("anthropic:m", api_key=KEY):
            pass


async def count_missed(tape: Cassette, provider: str) -> None:
    """Count through the cassette: the client reads a miss as a status error first."""
    async with tape.client(model_string(provider)) as client:
        with pytest.raises(APIStatusError):
            await client.count_tokens(Request([Message.user("hi")]))


async def test_an_interrupted_re_recording_keeps_the_file_it_had(tmp_path: Path) -> None:
    path = tmp_path / "kept.jsonl"
    await record_hi(path)
    before = path.read_text()
    async with ScriptedModelServer("anthropic", [ScriptedResponse.text("ok")]) as server:
        url = upstream(server, "anthropic")
        tape = Cassette(path, mode="record")
        with anyio.CancelScope() as scope:
            async with tape.client("anthropic:scripted-model", base_url=url, api_key=KEY):
                scope.cancel()  # Ctrl-C before the test asked anything
                await anyio.sleep(1)
    assert path.read_text() == before
    with pytest.raises(ZeroDivisionError):  # a test that fails: recorded anew, as it ran
        async with tape.client("anthropic:scripted-model", base_url=url, api_key=KEY):
            raise ZeroDivisionError
    assert loads(path.read_text()) == []


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai_responses"])
async def test_a_counting_call_is_answered_by_its_own_recording_only(
    provider: str, tmp_path: Path
) -> None:
    # Openai Responses' /responses/input_tokens body reads as the same neutral request as
    # /responses: it was answered with the run's stream (a MalformedStreamError: no count).
    path = tmp_path / "run.jsonl"
    await record_hi(path, provider)
    says = r"endpoint: differs at character 1\s+requested: '(input_tokens|count)"
    with pytest.raises(CassetteMissError, match=says):
        await count_missed(Cassette(path, strict=False), provider)
    counted = tmp_path / "counted.jsonl"
    await record_hi(counted, provider, count=True)
    async with Cassette(counted).client(model_string(provider)) as client:
        assert (await Worker(client).run("hi")).text == "ok"  # in the other order: matched
        found = await client.count_tokens(Request([Message.user("hi")]))
    assert found.source != "estimate"


@pytest.mark.parametrize(
    ("response", "says"),
    [
        ('{"status": 1000, "headers": {}}', "1000 is not an HTTP status"),
        ('{"status": 101, "headers": {}}', "101 is not an HTTP status"),
        ('{"status": 200, "headers": {"x-a": "1\\r\\nx-forged: 2"}}', "header 'x-a'"),
        ('{"status": 200, "headers": {"x a": "1"}}', "header 'x a'"),
        ('{"status": 200, "headers": {"": "1"}}', "header ''"),
        ('{"status": 200, "headers": {"x-a": "sunny 🌤"}}', "header 'x-a'"),
    ],
    ids=["status-1000", "status-101", "crlf-value", "space-in-name", "empty-name", "emoji"],
)
async def test_a_hand_edited_answer_head_is_named_with_its_line(
    response: str, says: str, tmp_path: Path
) -> None:
    # Before: a status of 1000 broke the replayed answer (the client's retry then read as
    # "made more often than recorded"); a CRLF in a value forged a header into the answer.
    path = tmp_path / "edited.jsonl"
    await record_hi(path)
    lines = path.read_text().split("\n")
    lines[2] = '{"response": ' + response + "}"
    path.write_text("\n".join(lines))
    with pytest.raises(CassetteFileError, match=rf"line 3: .*{re.escape(says)}"):
        async with Cassette(path).client("anthropic:scripted-model"):
            pass


@pytest.mark.parametrize(
    ("cut", "says"),
    [
        (lambda lines: lines[:2], "ends in a request without its response"),
        (lambda lines: [*lines[:2], *lines[1:]], "line 3: .*the request before has no response"),
        (lambda lines: [lines[0], lines[1], lines[3], lines[2]], "line 3: .*a chunk before its"),
    ],
    ids=["truncated", "response-lost", "chunk-first"],
)
async def test_a_file_cut_short_or_reordered_is_named(
    cut: Callable[[list[str]], list[str]], says: str, tmp_path: Path
) -> None:
    # A file cut after a request line replayed an empty 200 answer: the client's retry then
    # read as "made more often than recorded".
    path = tmp_path / "cut.jsonl"
    await record_hi(path)
    path.write_text("\n".join(cut(path.read_text().splitlines())) + "\n")
    with pytest.raises(CassetteFileError, match=says):
        async with Cassette(path).client("anthropic:scripted-model"):
            pass


@pytest.mark.parametrize(
    "header", ['"content-length": "3"', '"transfer-encoding": "chunked"', '"connection": "close"']
)
async def test_framing_headers_in_a_file_do_not_break_the_replay(
    header: str, tmp_path: Path
) -> None:
    # A second transfer-encoding broke the answer (the client's retry then missed).
    path = tmp_path / "framed.jsonl"
    await record_hi(path)
    lines = path.read_text().split("\n")
    lines[2] = lines[2].replace('"headers":{', '"headers":{' + header + ",")
    path.write_text("\n".join(lines))
    with anyio.fail_after(20):
        async with Cassette(path).client("anthropic:scripted-model") as client:
            assert (await Worker(client).run("hi")).text == "ok"


async def test_a_key_an_api_error_echoes_is_not_written_and_the_error_replays(
    tmp_path: Path,
) -> None:
    path = tmp_path / "401.jsonl"
    message = f"invalid x-api-key {KEY}"
    body = {"type": "error", "error": {"type": "authentication_error", "message": message}}
    refused = WireResponse(body, status=401, content_type="application/json")
    async with WireServer([refused]) as server:
        tape = Cassette(path, mode="record")
        async with tape.client("anthropic:m", base_url=server.base_url, api_key=KEY) as client:
            with pytest.raises(AuthenticationError) as live:
                await Worker(client).run("hi")
    text = path.read_text()
    assert not leaks(text, KEY) and '"status":401' in text
    async with Cassette(path).client("anthropic:m") as client:
        with pytest.raises(AuthenticationError) as replayed:
            await Worker(client).run("hi")
    assert not leaks(str(live.value), KEY) and not leaks(str(replayed.value), KEY)
    assert str(replayed.value) == str(live.value)


async def test_an_api_that_gzips_anyway_is_recorded_as_the_client_read_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gzip.jsonl"
    data = encode(ScriptedResponse.text("zipped ✓", chunk_size=2), model="m")
    zipped = WireResponse(gzip.compress(data), headers={"content-encoding": "gzip"})
    async with WireServer([zipped]) as server:
        tape = Cassette(path, mode="record")
        async with tape.client("anthropic:m", base_url=server.base_url, api_key=KEY) as client:
            assert (await Worker(client).run("hi")).text == "zipped ✓"
    text = path.read_text()
    assert "message_start" in text and "content-encoding" not in text  # decoded, readable
    async with Cassette(path, chunking=Chunking.bytewise()).client("anthropic:m") as client:
        assert (await Worker(client).run("hi")).text == "zipped ✓"


async def test_a_huge_request_records_matches_and_misses_in_bounded_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "huge.jsonl"
    prompt = "ä" * 400_000
    steps: list[ScriptStep] = [ScriptedResponse.text("long")]
    async with ScriptedModelServer("openai_chat", steps) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, "openai_chat")
        async with tape.client("openai:scripted-model", base_url=url, api_key=KEY) as client:
            await Worker(client).run(prompt)
    with anyio.fail_after(30):
        async with Cassette(path).client("openai:scripted-model") as client:
            assert (await Worker(client).run(prompt)).text == "long"
        with pytest.raises(CassetteMissError) as caught:
            await miss(Cassette(path), "openai:scripted-model", prompt[:-1] + "b")
    # The diff quotes where the texts part, not the whole prompt.
    assert "differs at character 400000" in str(caught.value)
    assert len(str(caught.value)) < 2_000


async def test_a_key_in_an_answer_that_is_not_utf8_is_masked_around_its_bytes(
    tmp_path: Path,
) -> None:
    # A body with one byte that is not UTF-8 was written unmasked, as base64.
    path = tmp_path / "latin1.jsonl"
    body = f"<html>Caf\xe9: invalid key {KEY}</html>".encode("latin-1")
    page = WireResponse(body, status=403, content_type="text/html")
    async with WireServer([page]) as server:
        tape = Cassette(path, mode="record")
        async with tape.client("anthropic:m", base_url=server.base_url, api_key=KEY) as client:
            with pytest.raises(APIStatusError):
                await Worker(client).run("hi")
    text = path.read_text()
    assert not leaks(text, KEY) and "chunk_b64" in text
    (exchange,) = loads(text)
    assert exchange.body == b"<html>Caf\xe9: invalid key ***</html>"


@pytest.mark.parametrize("provider", sorted(WIRE_PROVIDERS))
async def test_every_wire_recorded_on_aiohttp_replays_bytewise_on_httpx_with_a_resume(
    provider: str, tmp_path: Path
) -> None:
    # Thinking, two tools, a pause taken as JSON and resumed by a fresh Worker of a fresh
    # client: recorded over aiohttp, replayed over httpx one byte per read.
    path = tmp_path / "pause.jsonl"
    async with ScriptedModelServer(provider, pausing_script()) as server:
        tape = Cassette(path, mode="record")
        url = upstream(server, provider)
        options = {"base_url": url, "api_key": KEY, "transport": "aiohttp"}
        async with tape.client(model_string(provider), **options) as client:
            live_first, live_then, live = await pause_and_resume(client)
    replay = Cassette(path, chunking=Chunking.bytewise())
    async with replay, replay.client(model_string(provider), transport="httpx") as client:
        first, then, replayed = await pause_and_resume(client)
    assert (first, then) == (live_first, live_then)
    assert replayed.messages == live.messages and replay.unused == []


async def test_the_requests_a_recording_cassette_keeps_show_no_key_in_their_repr(
    tmp_path: Path,
) -> None:
    # pytest prints a repr in a failed assertion (`assert len(tape.requests) == 2`): the
    # requests a recording passed on carry the real credentials.
    async with ScriptedModelServer("gemini", [ScriptedResponse.text("ok")]) as server:
        tape = Cassette(tmp_path / "repr.jsonl", mode="record")
        async with tape.client(
            model_string("gemini"),
            api_key=KEY,
            base_url=upstream(server, "gemini", f"?api_key={QUERY_KEY}"),
            headers={"x-proxy-token": HEADER_KEY},
        ) as client:
            await Worker(client).run("hi")
    shown = repr(tape.requests)
    assert tape.requests and "'x-goog-api-key': '***'" in shown and "hi" in shown
    for secret in (KEY, QUERY_KEY, HEADER_KEY):
        assert not leaks(shown, secret)
