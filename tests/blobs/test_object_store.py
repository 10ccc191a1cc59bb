"""ObjectBlobStore on a real S3 (moto) and obstore's local files: layout, index, windows read
with ranged GETs, multipart uploads, atomicity, faults, secrets, the missing extra."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Content, MissingExtraError, RunStatus, ToolError, ToolUsePart, Worker, tool
from llm_worker.blobs import (
    BlobIndex,
    IndexedBlobStore,
    InspectTool,
    ObjectBlobStore,
    OutputPolicy,
    TextStreamStore,
)
from llm_worker.errors import (
    BlobAccessDeniedError,
    BlobContainerNotFoundError,
    BlobStoreUnavailableError,
    ConfigurationError,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse
from support.blob_stores import BUCKET
from support.object_store import ACCESS_KEY, SECRET_KEY, FaultProxy, MotoServer, s3_options

pytestmark = pytest.mark.anyio

_prefixes = iter(range(1 << 30))


@pytest.fixture
def proxy(moto_server: MotoServer) -> Iterator[FaultProxy]:
    """A proxy in front of moto that counts bytes and breaks requests on demand."""
    server = FaultProxy(moto_server.endpoint)
    yield server
    server.stop()


def s3_store(endpoint: str, bucket: str = BUCKET, **extra: Any) -> ObjectBlobStore:
    prefix = f"s3://{bucket}/o{next(_prefixes)}"
    return ObjectBlobStore.from_url(prefix, **s3_options(endpoint, **extra))


async def inspect(store: ObjectBlobStore, blob_id: str, selector: str | None = None) -> str:
    args = {"blob_id": blob_id} | ({"selector": selector} if selector else {})
    with anyio.fail_after(30):
        return await InspectTool(store, OutputPolicy()).execute(json.dumps(args))


def big_text(lines: int) -> str:
    return "".join(
        f"line {i:07d} " + "abcdefghijklmnopqrstuvwxyz"[: i % 27] + "\n"
        for i in range(1, lines + 1)
    )


# -- layout and index --------------------------------------------------------------------------


async def test_it_is_a_streaming_indexed_store(tmp_path: Path) -> None:
    store = ObjectBlobStore.from_url(tmp_path.as_uri())
    assert isinstance(store, TextStreamStore) and isinstance(store, IndexedBlobStore)
    assert repr(store) == f"ObjectBlobStore({tmp_path.as_uri()!r})"


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_layout_the_blob_and_its_index_beside_it(tmp_path: Path) -> None:
    store = ObjectBlobStore.from_url(tmp_path.as_uri(), index_every=100)
    text = big_text(1000)
    with anyio.fail_after(30):
        text_id = await store.store(Content.Text(text))
        array_id = await store.store(Content.Structured(list(range(500))))
        object_id = await store.store(Content.Structured({"a": 1}))
        index = await store.blob_index(text_id)
        array = await store.blob_index(array_id)
        assert index is not None and array is not None
        assert await store.blob_index(object_id) is None
    assert _names(tmp_path) == sorted(
        [
            f"{text_id}.txt",
            f"{text_id}.idx",
            f"{array_id}.json",
            f"{array_id}.idx",
            f"{object_id}.json",
            ".llm-worker-blob-key",
        ]
    )
    assert (tmp_path / f"{text_id}.txt").read_bytes() == text.encode()  # FsBlobStore's bytes
    doc = json.loads((tmp_path / f"{text_id}.idx").read_bytes())
    assert doc["format"] == "llm-worker.blob-index" and doc["version"] == 2
    assert index == BlobIndex("text", len(text), 1000, tuple(tuple(p) for p in doc["points"]))
    data = text.encode()
    for line, offset in index.points:  # every point is the start of its line
        assert data[:offset].count(b"\n") == line - 1 and (offset == 0 or data[offset - 1] == 10)
    assert [n for n, _ in index.points] == list(range(1, 1000, 100))
    assert array is not None and array.count == 500
    raw = (tmp_path / f"{array_id}.json").read_bytes()
    assert all(
        raw[offset:].split(b",")[0].strip(b"[]") == str(n).encode() for n, offset in array.points
    )


async def test_a_promoted_array_is_indexed_from_promotions_scan(tmp_path: Path) -> None:
    # Promotion's one pass kept where entries start; the index must be what a scan gives.
    from llm_worker.blobs import StoredOutput, externalize
    from llm_worker.blobs._index import array_index

    text = json.dumps([{"n": i, "s": "ü" * (i % 3)} for i in range(5000)], ensure_ascii=False)
    store = ObjectBlobStore.from_url(tmp_path.as_uri())
    with anyio.fail_after(30):
        out = await externalize(text, store)
        assert isinstance(out, StoredOutput) and out.blob_id
        index = await store.blob_index(out.blob_id)
    assert index is not None and index == array_index(text) and len(index.points) == 5
    assert (tmp_path / f"{out.blob_id}.json").read_bytes() == text.encode()


async def test_an_index_of_another_version_is_ignored(tmp_path: Path) -> None:
    store = ObjectBlobStore.from_url(tmp_path.as_uri(), index_every=10)
    with anyio.fail_after(30):
        blob_id = await store.store(Content.Text(big_text(100)))
        before = await inspect(store, blob_id, "lines:50-52")
        path = tmp_path / f"{blob_id}.idx"
        path.write_bytes(path.read_bytes().replace(b'"version":2', b'"version":99'))
        assert await store.blob_index(blob_id) is None
        assert await inspect(store, blob_id, "lines:50-52") == before  # read by streaming


# -- ranged windows ----------------------------------------------------------------------------


async def test_a_window_of_a_large_text_fetches_a_few_hundred_kib(proxy: FaultProxy) -> None:
    store = s3_store(proxy.endpoint)
    text = big_text(400_000)  # ~12 MB
    with anyio.fail_after(120):
        blob_id = await store.store(Content.Text(text))
        proxy.reset()
        out = await inspect(store, blob_id, "lines:300000-300050")
    assert "line 0300000 " in out and "line 0300050 " in out and "line 0300051" not in out
    assert "text | 400000 lines" in out
    assert proxy.bytes_out < 1 << 20, proxy.bytes_out
    assert all(method in ("GET", "HEAD") for method, _ in proxy.requests)


async def test_a_slice_of_a_large_array_fetches_a_few_hundred_kib(proxy: FaultProxy) -> None:
    store = s3_store(proxy.endpoint)
    entries = [{"id": i, "name": f"item {i}", "ok": i % 2 == 0} for i in range(200_000)]
    with anyio.fail_after(120):
        blob_id = await store.store(Content.Structured(entries))
        proxy.reset()
        out = await inspect(store, blob_id, "slice:150000..150050")
    assert '"id":150000' in out and '"id":150049' in out and '"id":150050' not in out
    assert "200000 entries" in out
    assert proxy.bytes_out < 1 << 20, proxy.bytes_out


# -- uploads and atomicity ---------------------------------------------------------------------


async def test_a_large_blob_goes_up_in_parts(proxy: FaultProxy) -> None:
    store = s3_store(proxy.endpoint)
    text = big_text(600_000)  # ~18 MB: four parts of 5 MiB
    with anyio.fail_after(120):
        blob_id = await store.store(Content.Text(text))
        loaded = await store.load(blob_id)
    parts = [p for m, p in proxy.requests if m == "PUT" and "partNumber=" in p]
    assert len(parts) >= 3
    assert any(m == "POST" and "uploads" in p for m, p in proxy.requests)
    assert loaded == Content.Text(text)


async def test_a_blob_is_invisible_until_its_upload_completes(
    proxy: FaultProxy, moto_server: MotoServer
) -> None:
    import threading

    store = s3_store(proxy.endpoint)
    reader = ObjectBlobStore.from_url(repr(store).split("'")[1], **s3_options(moto_server.endpoint))
    prefix = repr(store).split("/")[-1].rstrip("')")
    proxy.gate = threading.Event()
    text = big_text(300_000)
    stored: list[str] = []
    blob_id = ""

    async def upload() -> None:
        stored.append(await store.store(Content.Text(text)))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(upload)
            # Every part is up; the completing request waits at the gate.
            assert await anyio.to_thread.run_sync(proxy.held.wait, 30)
            listing = await _list(moto_server.endpoint, prefix)
            [index_name] = [k for k in listing if k.endswith(".idx")]
            blob_id = index_name.rsplit("/", 1)[1].removesuffix(".idx")
            assert not await reader.exists(blob_id)  # the index alone is not a blob
            with pytest.raises(ToolError, match="no blob"):
                await inspect(reader, blob_id, "lines:1-3")
            proxy.gate.set()
        assert stored == [blob_id]
        assert await reader.load(blob_id) == Content.Text(text)


async def test_two_machines_storing_at_once_never_collide(moto_server: MotoServer) -> None:
    first = s3_store(moto_server.endpoint)
    prefix = repr(first).split("'")[1]
    second = ObjectBlobStore.from_url(prefix, **s3_options(moto_server.endpoint))
    stored: dict[str, str] = {}

    async def write(store: ObjectBlobStore, name: str) -> None:
        for i in range(15):
            text = f"{name} {i}\n" * 50
            stored[await store.store(Content.Text(text))] = text

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(write, first, f"a{n}")
                tg.start_soon(write, second, f"b{n}")
        assert len(stored) == 90
        for blob_id, text in stored.items():  # each reads what the other wrote
            assert await first.load(blob_id) == Content.Text(text)
            assert await second.load(blob_id) == Content.Text(text)


async def test_a_dropped_upload_leaves_no_blob(proxy: FaultProxy, moto_server: MotoServer) -> None:
    store = s3_store(proxy.endpoint)
    proxy.fail("PUT", 100, "drop")  # every part upload is cut off half way
    with anyio.fail_after(60), pytest.raises(BlobStoreUnavailableError) as info:
        await store.store(Content.Text(big_text(300_000)))
    assert "could not store blob" in str(info.value)
    proxy.reset()
    prefix = repr(store).split("/")[-1].rstrip("')")
    listing = await _list(moto_server.endpoint, prefix)
    assert not [k for k in listing if k.endswith((".txt", ".json"))], listing


async def test_a_dropped_part_is_retried_by_the_client(proxy: FaultProxy) -> None:
    store = s3_store(proxy.endpoint)
    text = big_text(300_000)
    proxy.fail("PUT", 1, "drop")
    with anyio.fail_after(60):
        blob_id = await store.store(Content.Text(text))
        assert await store.load(blob_id) == Content.Text(text)
    assert proxy.faults_left == 0


async def _list(endpoint: str, prefix: str) -> list[str]:
    import obstore
    from obstore.store import from_url

    raw = from_url(f"s3://{BUCKET}", **s3_options(endpoint))
    return [meta["path"] async for batch in obstore.list(raw, prefix=prefix) for meta in batch]


# -- faults ------------------------------------------------------------------------------------


async def test_throttling_is_retried_by_the_client(proxy: FaultProxy) -> None:
    store = s3_store(proxy.endpoint)
    proxy.fail("PUT", 2, "slowdown")
    proxy.fail("GET", 2, "slowdown")
    with anyio.fail_after(60):
        blob_id = await store.store(Content.Text("hello\n" * 10))
        assert await store.load(blob_id) == Content.Text("hello\n" * 10)
    assert proxy.faults_left == 0  # both answered 503 SlowDown, and the client tried again


async def test_throttling_past_the_retries_is_a_typed_error(proxy: FaultProxy) -> None:
    store = s3_store(proxy.endpoint)
    proxy.fail("PUT", 50, "slowdown")
    with anyio.fail_after(60), pytest.raises(BlobStoreUnavailableError) as info:
        await store.store(Content.Text("hello"))
    assert "throttled" in str(info.value) and "503" in str(info.value)
    assert "SlowDown" in str(info.value)


async def test_a_missing_object_is_an_error_result_the_model_reads(
    moto_server: MotoServer,
) -> None:
    store = s3_store(moto_server.endpoint)
    with pytest.raises(ToolError, match="no blob 0"):
        await inspect(store, "01a20000-0000-7000-8000-000000000000", "lines:1-5")


async def test_a_missing_bucket_is_a_typed_error(moto_server: MotoServer) -> None:
    store = s3_store(moto_server.endpoint, bucket="no-such-bucket-here")
    with anyio.fail_after(30):
        with pytest.raises(BlobContainerNotFoundError, match="bucket"):
            await store.store(Content.Text("x" * 10))
        with pytest.raises(BlobContainerNotFoundError):
            await store.load("01a20000-0000-7000-8000-000000000000")
        with pytest.raises(ToolError, match="bucket"):
            await inspect(store, "01a20000-0000-7000-8000-000000000000")


@pytest.fixture(scope="module")
def moto_with_auth() -> Iterator[MotoServer]:
    """A second moto server that checks credentials: the tests' keys are unknown to it."""
    server = MotoServer(auth=True)
    yield server
    server.stop()


async def test_bad_credentials_are_a_typed_error_without_the_secret(
    moto_with_auth: MotoServer,
) -> None:
    store = s3_store(moto_with_auth.endpoint)
    with anyio.fail_after(30), pytest.raises(BlobAccessDeniedError) as info:
        await store.store(Content.Text("x"))
    error: BaseException | None = info.value
    assert "credentials" in str(info.value)
    while error is not None:  # nothing in the chain echoes the keys
        for text in (str(error), repr(error)):
            assert ACCESS_KEY not in text and SECRET_KEY not in text
        error = error.__cause__ or error.__context__
    assert ACCESS_KEY not in repr(store) and SECRET_KEY not in repr(store)


async def test_secrets_stay_out_of_reprs_and_configuration_errors() -> None:
    url = "s3://user:hunter22@bucket/prefix?X-Amz-Signature=abcdef0123"
    store = ObjectBlobStore.from_url(url, access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)
    assert repr(store) == "ObjectBlobStore('s3://bucket/prefix')"
    with pytest.raises(ConfigurationError) as info:
        ObjectBlobStore.from_url("s3://bucket/p", secret_access_key=SECRET_KEY, no_such=SECRET_KEY)
    assert SECRET_KEY not in str(info.value) and info.value.__cause__ is None


async def test_a_store_failure_in_a_run_is_a_tool_result(moto_server: MotoServer) -> None:
    @tool
    async def report() -> str:
        """A long report."""
        return "row\n" * 2000

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "report", {})]), ScriptedResponse.text("ok")]
    )
    store = s3_store(moto_server.endpoint, bucket="no-such-bucket-here")
    worker = Worker(client, tools=[report], blob_store=store)
    with anyio.fail_after(30):
        result = await worker.run("go")
    assert result.status is RunStatus.FINISHED
    [tool_result] = client.requests[1].messages[-1].tool_results
    assert tool_result.is_error and "bucket" in tool_result.content


async def test_a_blob_stored_on_one_machine_is_inspected_on_another(
    moto_server: MotoServer,
) -> None:
    @tool
    async def report() -> str:
        """A long report."""
        return "".join(f"row {i}\n" for i in range(1, 5001))

    here = s3_store(moto_server.endpoint)
    where = repr(here).split("'")[1]
    there = ObjectBlobStore.from_url(where, **s3_options(moto_server.endpoint))
    first = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "report", {})]), ScriptedResponse.text("stored")]
    )
    with anyio.fail_after(30):
        await Worker(first, tools=[report], blob_store=here).run("make the report")
    [stored] = first.requests[1].messages[-1].tool_results
    blob_id = stored.content.split("[blob:", 1)[1].split("]", 1)[0]
    args = {"blob_id": blob_id, "selector": "lines:4000-4002"}
    second = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c2", "inspect", args)]), ScriptedResponse.text("ok")]
    )
    with anyio.fail_after(30):
        await Worker(second, blob_store=there).run("read it")
    [read] = second.requests[1].messages[-1].tool_results
    assert not read.is_error
    assert "row 4000\nrow 4001\nrow 4002" in read.content and "row 4003" not in read.content


# -- the extra ---------------------------------------------------------------------------------


def test_without_obstore_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "obstore", None)
    monkeypatch.setitem(sys.modules, "obstore.store", None)
    with pytest.raises(MissingExtraError, match=r"llm-worker\[obstore\]"):
        ObjectBlobStore.from_url(tmp_path.as_uri())
    with pytest.raises(MissingExtraError, match="ObjectBlobStore") as info:
        ObjectBlobStore(object())  # pyright: ignore[reportArgumentType]
    assert isinstance(info.value, ConfigurationError)
