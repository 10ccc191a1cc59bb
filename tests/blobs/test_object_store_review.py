"""Adversarial probes of ObjectBlobStore: cancellation mid-upload, torn and missing indexes,
unicode lines, hostile sizes, a second provider, and credentials kept out of every text."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Content, MemoryBlobStore, ToolError
from llm_worker.blobs import InspectTool, ObjectBlobStore, OutputPolicy
from llm_worker.errors import BlobStoreUnavailableError, ConfigurationError
from support.blob_stores import BUCKET
from support.object_store import FaultProxy, MotoServer, s3_options

pytestmark = pytest.mark.anyio

_prefixes = iter(range(1 << 30))


@pytest.fixture
def proxy(moto_server: MotoServer) -> Iterator[FaultProxy]:
    server = FaultProxy(moto_server.endpoint)
    yield server
    server.gate = None
    server.stop()


def s3_store(endpoint: str, **extra: Any) -> tuple[ObjectBlobStore, str]:
    prefix = f"r{next(_prefixes)}"
    url = f"s3://{BUCKET}/{prefix}"
    return ObjectBlobStore.from_url(url, **s3_options(endpoint, **extra)), prefix


async def inspect(store: Any, blob_id: str, selector: str | None = None) -> str:
    args = {"blob_id": blob_id} | ({"selector": selector} if selector else {})
    with anyio.fail_after(30):
        return await InspectTool(store, OutputPolicy()).execute(json.dumps(args))


def big_text(lines: int) -> str:
    return "".join(f"line {i:07d} {'é' * (i % 5)}\n" for i in range(1, lines + 1))


def _keys(endpoint: str, prefix: str) -> list[str]:
    body = httpx.get(f"{endpoint}/{BUCKET}", params={"prefix": prefix}, timeout=10).text
    return re.findall(r"<Key>([^<]+)</Key>", body)


def _uploads(endpoint: str, prefix: str) -> list[str]:
    """Multipart uploads begun under `prefix` and never completed or aborted."""
    body = httpx.get(f"{endpoint}/{BUCKET}?uploads&prefix={prefix}", timeout=10).text
    return [k for k in re.findall(r"<Key>([^<]+)</Key>", body) if k.startswith(prefix)]


# -- cancellation mid-upload -------------------------------------------------------------------


async def _no_half_blob(store: ObjectBlobStore, endpoint: str, prefix: str) -> None:
    """Nothing of a cancelled store but, if its upload completed, the whole blob and its index.

    A blob whose upload completed stays although its store was cancelled: its id is its
    content's, so another store of the same content may have returned it. A sweep takes it.
    """
    keys = _keys(endpoint, prefix)
    blobs = [k for k in keys if k.endswith((".txt", ".json"))]
    indexes = [k for k in keys if k.endswith(".idx")]
    assert len(blobs) <= 1 and len(indexes) == len(blobs), keys
    for key in blobs:
        blob_id = key.rsplit("/", 1)[1].rsplit(".", 1)[0]
        index = await store.blob_index(blob_id)
        assert index is not None and (await store.exists(blob_id))
    from datetime import UTC, datetime, timedelta

    with anyio.fail_after(30):
        await store.sweep(timedelta(hours=1), now=datetime.now(UTC) + timedelta(hours=2))
    assert [k for k in _keys(endpoint, prefix) if not k.endswith(".llm-worker-blob-key")] == []


async def test_cancel_while_a_part_uploads_leaves_no_half_blob_and_no_upload(
    proxy: FaultProxy, moto_server: MotoServer
) -> None:
    store, prefix = s3_store(proxy.endpoint)
    proxy.gate = threading.Event()
    proxy.gate_when = lambda method, path: method == "PUT" and "partNumber=2" in path
    with anyio.fail_after(60):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.store, Content.Text(big_text(600_000)))
                assert await anyio.to_thread.run_sync(proxy.held.wait, 30)
                scope.cancel()
                proxy.gate.set()  # the part in flight ends; the cancelled store then aborts
    await _no_half_blob(store, moto_server.endpoint, prefix)
    assert _uploads(moto_server.endpoint, prefix) == []


async def test_a_failed_upload_leaves_no_multipart_upload_behind(
    proxy: FaultProxy, moto_server: MotoServer
) -> None:
    store, prefix = s3_store(proxy.endpoint)
    proxy.fail("PUT", 100, "drop")
    with anyio.fail_after(60), pytest.raises(BlobStoreUnavailableError):
        await store.store(Content.Text(big_text(300_000)))
    proxy.reset()
    assert _uploads(moto_server.endpoint, prefix) == []


async def test_cancel_while_the_upload_completes_leaves_a_whole_blob_or_none(
    proxy: FaultProxy, moto_server: MotoServer
) -> None:
    # The completing request is already on its way when the store is cancelled: the blob
    # appears, whole, with its index, and stays for the sweep (another store of the same
    # content may have its id).
    store, prefix = s3_store(proxy.endpoint)
    proxy.gate = threading.Event()
    with anyio.fail_after(60):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.store, Content.Text(big_text(300_000)))
                assert await anyio.to_thread.run_sync(proxy.held.wait, 30)
                scope.cancel()
                proxy.gate.set()
    await _no_half_blob(store, moto_server.endpoint, prefix)
    assert _uploads(moto_server.endpoint, prefix) == []


# -- torn, tampered and missing indexes ---------------------------------------------------------


def local(tmp_path: Path) -> ObjectBlobStore:
    return ObjectBlobStore.from_url(tmp_path.as_uri(), index_every=10)


TEXT = "".join(f"row {i} {'ü' * (i % 4)}\n" for i in range(1, 201))
ARRAY = [{"n": i, "s": "é" * (i % 3)} for i in range(200)]
SELECTORS = {
    "text": ["lines:1-3", "lines:91-92", "lines:95-97", "lines:199-210", None],
    "array": ["slice:95..97", "slice:0..2", "slice:198..205", None],
}


async def _answers(store: Any, blob_id: str, kind: str) -> list[str]:
    out: list[str] = []
    for selector in SELECTORS[kind]:
        try:
            out.append(await inspect(store, blob_id, selector))
        except ToolError as exc:
            out.append(f"error: {exc}")
    return [answer.replace(blob_id, "ID") for answer in out]


async def _expected(kind: str) -> list[str]:
    memory = MemoryBlobStore()
    content = Content.Text(TEXT) if kind == "text" else Content.Structured(ARRAY)
    return await _answers(memory, await memory.store(content), kind)


def _tamper(doc: dict[str, Any], how: str) -> dict[str, Any]:
    points = doc["points"]
    if how == "offsets-past-the-end":
        doc["points"] = [points[0]] + [[n, o + 10_000_000] for n, o in points[1:]]
    elif how == "negative-offsets":
        doc["points"] = [points[0]] + [[n, -o] for n, o in points[1:]]
    elif how == "unsorted":
        doc["points"] = list(reversed(points))
    elif how == "shifted":  # each point a few bytes off its line or entry
        doc["points"] = [points[0]] + [[n, o + 3] for n, o in points[1:]]
    elif how == "bigger":
        doc["bytes"] += 5000
    elif how == "smaller":
        doc["bytes"] //= 2
    elif how == "count":
        doc["count"] = 7
    elif how == "count-near":  # still past the last point, short of the real count
        doc["count"] = points[-1][0] + 1
    elif how == "tail-cut":  # still past the last point, short of the real size
        doc["bytes"] = points[-1][1] + 1
    elif how == "no-points":
        doc["points"] = []
    elif how == "huge-numbers":
        doc["points"] = [[n, o] for n, o in points] + [[10**30, 10**30]]
    return doc


TAMPERINGS = [
    "offsets-past-the-end",
    "negative-offsets",
    "unsorted",
    "shifted",
    "bigger",
    "smaller",
    "count",
    "count-near",
    "tail-cut",
    "no-points",
    "huge-numbers",
]


@pytest.mark.parametrize("kind", ["text", "array"])
@pytest.mark.parametrize("how", TAMPERINGS)
async def test_a_tampered_index_never_gives_a_wrong_answer(
    tmp_path: Path, kind: str, how: str
) -> None:
    store = local(tmp_path)
    content = Content.Text(TEXT) if kind == "text" else Content.Structured(ARRAY)
    blob_id = await store.store(content)
    path = tmp_path / f"{blob_id}.idx"
    path.write_bytes(json.dumps(_tamper(json.loads(path.read_bytes()), how)).encode())
    assert await _answers(store, blob_id, kind) == await _expected(kind)


@pytest.mark.parametrize("kind", ["text", "array"])
@pytest.mark.parametrize("cut", [0, 1, 17, -1])
async def test_a_torn_index_is_read_around(tmp_path: Path, kind: str, cut: int) -> None:
    store = local(tmp_path)
    content = Content.Text(TEXT) if kind == "text" else Content.Structured(ARRAY)
    blob_id = await store.store(content)
    path = tmp_path / f"{blob_id}.idx"
    path.write_bytes(path.read_bytes()[:cut])
    assert await _answers(store, blob_id, kind) == await _expected(kind)


@pytest.mark.parametrize("kind", ["text", "array"])
async def test_a_missing_index_is_read_around(tmp_path: Path, kind: str) -> None:
    store = local(tmp_path)
    content = Content.Text(TEXT) if kind == "text" else Content.Structured(ARRAY)
    blob_id = await store.store(content)
    (tmp_path / f"{blob_id}.idx").unlink()
    assert await _answers(store, blob_id, kind) == await _expected(kind)


async def test_an_index_without_its_blob_is_no_blob(tmp_path: Path) -> None:
    store = local(tmp_path)
    blob_id = await store.store(Content.Text(TEXT))
    (tmp_path / f"{blob_id}.txt").unlink()  # a writer that died between index and blob
    assert not await store.exists(blob_id)
    with pytest.raises(ToolError, match="no blob"):
        await inspect(store, blob_id, "lines:5-6")
    with pytest.raises(ToolError, match="no blob"):
        await inspect(store, blob_id)


# -- unicode lines -----------------------------------------------------------------------------

_ODD_LINES = [
    "plain",
    "crlf\r",  # a \r\n line ending
    "bare\rcarriage return inside",
    "line\u2028separator and\u2029paragraph",
    "next line\x85control",
    "form\x0cfeed and\x0bvertical tab",
    "nul\x00inside",
    "emoji 🧪🧬 and combining é",
    "cjk 漢字かな",
    "rtl שלום مرحبا",
    "lone \ud800 surrogate",
    "",
    "\ufeffbom first",
]


def _unicode_text(repeat: int) -> str:
    return "".join(f"{i} {_ODD_LINES[i % len(_ODD_LINES)]}\n" for i in range(repeat))


@pytest.mark.parametrize("kind", ["object-local", "object-s3"])
@pytest.mark.parametrize("size", ["small", "multipart"])
async def test_unicode_lines_read_as_the_memory_store_reads_them(
    kind: str, size: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from support.blob_stores import make_store

    store = make_store(kind, tmp_path, request)
    # Over 1 Mi characters: the upload and the index go piece by piece, with multi-byte
    # characters on either side of every piece's edge.
    text = _unicode_text(40 if size == "small" else 260_000)
    if size == "multipart":
        assert len(text) > 1 << 20 and len(text.encode("utf-8", "surrogatepass")) > 5 << 20
    memory = MemoryBlobStore()
    with anyio.fail_after(120):
        ours, theirs = await store.store(Content.Text(text)), await memory.store(Content.Text(text))
        assert await store.load(ours) == Content.Text(text)
        n = text.count("\n")
        for selector in [None, "lines:1-14", f"lines:{n // 2}-{n // 2 + 20}", f"lines:{n - 3}-{n}"]:
            mine = await inspect(store, ours, selector)
            assert mine.replace(ours, "ID") == (await inspect(memory, theirs, selector)).replace(
                theirs, "ID"
            ), selector
        if size == "multipart":
            return  # grep shares a wall-clock budget: on a busy machine it stops anywhere
        found = await inspect(store, ours, "grep:surrogate")
        assert found.replace(ours, "ID") == (
            await inspect(memory, theirs, "grep:surrogate")
        ).replace(theirs, "ID")


# -- the Worker: cancel mid-upload, four wire formats ------------------------------------------


async def test_worker_cancel_while_a_tool_output_uploads_leaves_no_half_blob(
    proxy: FaultProxy, moto_server: MotoServer
) -> None:
    from llm_worker import RunStatus, ToolUsePart, Worker, tool
    from llm_worker.testing import ScriptedClient, ScriptedResponse

    @tool
    async def dump() -> str:
        """A very long output."""
        return big_text(600_000)

    store, prefix = s3_store(proxy.endpoint)
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "dump", {})]), ScriptedResponse.text("never")]
    )
    worker = Worker(client, tools=[dump], blob_store=store)
    proxy.gate = threading.Event()
    proxy.gate_when = lambda method, path: method == "PUT" and "partNumber=2" in path
    results: list[Any] = []

    async def run() -> None:
        results.append(await worker.run("dump it"))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            assert await anyio.to_thread.run_sync(proxy.held.wait, 30)
            worker.cancel()
            proxy.gate.set()
    [result] = results
    assert result.status is RunStatus.CANCELLED
    assert len(client.requests) == 1  # the model never saw a result
    await _no_half_blob(store, moto_server.endpoint, prefix)
    assert _uploads(moto_server.endpoint, prefix) == []


PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
PAIRS = list(zip(PROVIDERS, PROVIDERS[1:] + PROVIDERS[:1], strict=True))


@pytest.mark.parametrize(("writer", "reader"), PAIRS)
async def test_a_blob_stored_over_one_wire_format_is_inspected_over_another(
    writer: str, reader: str, moto_server: MotoServer
) -> None:
    from llm_worker import ToolUsePart, Worker, tool
    from llm_worker.testing import ScriptedRequest, ScriptedResponse
    from support.e2e import serve

    @tool
    async def report() -> str:
        """A long report."""
        return "".join(f"row {i} — ünïcödé 🧪\n" for i in range(1, 5001))

    store, _ = s3_store(moto_server.endpoint)
    seen: list[str] = []

    def keep(call: ScriptedRequest) -> ScriptedResponse:
        [result] = call.tool_results
        seen.append(result.content)
        return ScriptedResponse.text("stored")

    with anyio.fail_after(60):
        async with serve(writer, [ScriptedResponse([ToolUsePart("", "report", {})]), keep]) as wire:
            await Worker(wire.client(), tools=[report], blob_store=store).run("report")
        blob_id = seen[0].split("[blob:", 1)[1].split("]", 1)[0]
        args = {"blob_id": blob_id, "selector": "lines:4000-4001"}
        there = ObjectBlobStore.from_url(
            repr(store).split("'")[1], **s3_options(moto_server.endpoint)
        )
        async with serve(
            reader, [ScriptedResponse([ToolUsePart("", "inspect", args)]), keep]
        ) as wire:
            await Worker(wire.client(), blob_store=there).run("read it")
    assert "row 4000 — ünïcödé 🧪\nrow 4001 — ünïcödé 🧪" in seen[1], seen[1]
    assert "row 4002" not in seen[1]


# -- credentials -------------------------------------------------------------------------------

_SECRET = "url-secret-0123456789"


_URLS = [
    f"az://account:{_SECRET}@container/prefix",
    f"ftp://user:{_SECRET}@host/prefix",
    f"s3://AKIAUSERINFO:{_SECRET}@bucket/prefix?X-Amz-Signature={_SECRET}",
]
_BAD = {"no_such_option": 1}


@pytest.mark.parametrize(
    ("url", "options"),
    [(url, {}) for url in _URLS[:2]]
    + [(url, _BAD) for url in _URLS]
    + [(f"gs://bucket/prefix?token={_SECRET}&other=1", _BAD)],
)
def test_a_refused_url_keeps_its_credentials_out_of_the_error(
    url: str, options: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError) as info:
        ObjectBlobStore.from_url(url, **options)
    error: BaseException | None = info.value
    while error is not None:
        assert _SECRET not in str(error) and _SECRET not in repr(error), error
        error = error.__cause__ or error.__context__
    assert "cannot open the object store" in str(info.value)


def test_a_store_made_by_hand_keeps_its_keys_out_of_repr() -> None:
    from obstore.store import S3Store

    raw = S3Store("bucket", access_key_id="AKIAHANDMADE00000001", secret_access_key=_SECRET)
    store = ObjectBlobStore(raw)
    assert "AKIAHANDMADE00000001" not in repr(store) and _SECRET not in repr(store)


@pytest.mark.parametrize("method", ["PUT", "GET"])
async def test_an_echoed_access_key_stays_out_of_errors_results_and_logs(
    method: str, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import traceback

    from llm_worker import ToolUsePart, Worker, tool
    from llm_worker.errors import BlobAccessDeniedError
    from llm_worker.testing import ScriptedClient, ScriptedResponse
    from support.object_store import ACCESS_KEY, SECRET_KEY

    caplog.set_level(logging.DEBUG)
    store, _ = s3_store(proxy.endpoint)
    blob_id = await store.store(Content.Text("row\n" * 50)) if method == "GET" else ""
    proxy.fail(method, 100, "denied")
    action = store.store(Content.Text("x")) if method == "PUT" else store.load(blob_id)
    with anyio.fail_after(30), pytest.raises(BlobAccessDeniedError) as info:
        await action
    assert proxy.faults_left < 100  # the store answered 403, the key id in its body
    printed = "".join(traceback.format_exception(info.value))
    error: BaseException | None = info.value
    texts = [printed]
    while error is not None:  # even the suppressed context
        texts += [str(error), repr(error)]
        error = error.__cause__ or error.__context__

    @tool
    async def report() -> str:
        """A long report."""
        return "row\n" * 2000

    args = {"blob_id": blob_id or "01a20000-0000-7000-8000-000000000000", "selector": "lines:1-2"}
    call = "report" if method == "PUT" else "inspect"
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", call, {} if call == "report" else args)]),
            ScriptedResponse.text("ok"),
        ]
    )
    with anyio.fail_after(30):
        await Worker(client, tools=[report], blob_store=store).run("go")
    [result] = client.requests[1].messages[-1].tool_results
    assert result.is_error and "credentials" in result.content
    texts += [result.content, caplog.text]
    for text in texts:
        assert ACCESS_KEY not in text and SECRET_KEY not in text, text


# -- hostile settings and sizes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("index_every", 0),
        ("index_every", -1),
        ("index_every", 2.5),
        ("part_size", 0),
        ("max_concurrency", -1),
        ("max_concurrency", True),
    ],
)
async def test_a_bad_setting_is_refused_before_anything_is_stored(
    tmp_path: Path, name: str, value: Any
) -> None:
    # index_every <= 0 made the index's loop spin forever in a worker thread.
    raw = ObjectBlobStore.from_url(tmp_path.as_uri())._store  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(ConfigurationError, match=name):
        ObjectBlobStore(raw, **{name: value})
    if name == "index_every":
        with pytest.raises(ConfigurationError, match=name):
            ObjectBlobStore.from_url(tmp_path.as_uri(), index_every=value)


@pytest.mark.parametrize("kind", ["fs", "object-local"])
@pytest.mark.parametrize("deep", [False, True])  # the first page, or one near the entry's end
async def test_a_huge_array_entry_is_paged_in_bounded_memory(
    kind: str, deep: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from support.blob_stores import make_store, traced_peak

    store = make_store(kind, tmp_path, request)
    entry = 8 << 20
    blob_id = await store.store(Content.Structured([{"big": "y" * entry}, 1, 2]))
    at = entry - 100_000 if deep else 0
    out, peak = await traced_peak(inspect(store, blob_id, f"slice:0..1@{at}"))
    assert ("y" * 10_000 if deep else '{"big":"yyy') in out
    assert f'Next part: selector "slice:0..1@{at + 15_000}"' in out
    assert peak < 4 * entry, f"peak {peak >> 20} MiB for an entry of {entry >> 20} MiB"


# -- pause / resume ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["gemini", "anthropic"])
async def test_an_inspect_paused_is_resumed_by_a_fresh_worker_and_store(
    provider: str, moto_server: MotoServer
) -> None:
    from llm_worker import PauseState, RunStatus, ToolUsePart, Worker, tool
    from llm_worker.hooks import Pause, ToolCallContext
    from llm_worker.testing import ScriptedRequest, ScriptedResponse
    from support.e2e import serve

    @tool
    async def report() -> str:
        """A long report."""
        return "".join(f"row {i} ✓\n" for i in range(1, 3001))

    async def ask(ctx: ToolCallContext) -> Pause | None:
        if ctx.call.name == "inspect" and not ctx.resumed:
            return Pause("a person must approve reading it")
        return None

    seen: list[str] = []

    def read_it(call: ScriptedRequest) -> ScriptedResponse:
        [result] = call.tool_results
        blob_id = result.content.split("[blob:", 1)[1].split("]", 1)[0]
        args = {"blob_id": blob_id, "selector": "lines:2999-3000"}
        return ScriptedResponse([ToolUsePart("", "inspect", args)])

    def done(call: ScriptedRequest) -> ScriptedResponse:
        seen.append(call.tool_results[0].content)
        return ScriptedResponse.text("done")

    store, _ = s3_store(moto_server.endpoint)
    url = repr(store).split("'")[1]
    script = [ScriptedResponse([ToolUsePart("", "report", {})]), read_it, done]
    with anyio.fail_after(60):
        async with serve(provider, script) as wire:
            first = Worker(wire.client(), tools=[report], blob_store=store)
            first.add_before_tool_call_hook(ask)
            paused = await first.run("report, then read its end")
            assert paused.status is RunStatus.PAUSED and paused.state is not None
            state = PauseState.from_json(paused.state.to_json())
            there = ObjectBlobStore.from_url(url, **s3_options(moto_server.endpoint))
            second = Worker(wire.client(), tools=[report], blob_store=there)
            second.add_before_tool_call_hook(ask)
            result = await second.resume(state)
    assert result.status is RunStatus.FINISHED
    [content] = seen
    assert "row 2999 ✓\nrow 3000 ✓" in content and "row 2998" not in content, content
