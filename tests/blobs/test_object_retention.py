"""Retention on S3 (moto): the objects of a blob, a store that fails mid-upload or through its
own cleanup, orphans the sweep removes, and blobs stored before ids were content-addressed."""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import anyio
import httpx
import pytest

from llm_worker.blobs import (
    ObjectBlobStore,
    StructuredContent,
    SweepReport,
    TextContent,
    new_blob_id,
)
from llm_worker.blobs._object_retention import Group, plan
from llm_worker.errors import BlobError, BlobStoreUnavailableError
from support.blob_stores import BUCKET
from support.object_store import FaultProxy, MotoServer, s3_options

pytestmark = pytest.mark.anyio

HOUR = timedelta(hours=1)
_prefixes = iter(range(1 << 30))


class BreakingProxy(FaultProxy):
    """A `FaultProxy` that drops the connection of every request `breaks(method, path)` names."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.breaks: Callable[[str, str], bool] = lambda method, path: False

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        if not self.breaks(req.command, req.path):
            super().handle(req)
            return
        length = int(req.headers.get("Content-Length") or 0)
        req.rfile.read(length // 2)  # half the body, then hang up: a connection lost
        req.connection.shutdown(socket.SHUT_RDWR)
        req.close_connection = True


@pytest.fixture
def proxy(moto_server: MotoServer) -> Iterator[BreakingProxy]:
    server = BreakingProxy(moto_server.endpoint)
    yield server
    server.stop()


def s3_store(endpoint: str) -> tuple[ObjectBlobStore, str]:
    prefix = f"ret{next(_prefixes)}"
    store = ObjectBlobStore.from_url(f"s3://{BUCKET}/{prefix}", **s3_options(endpoint))
    return store, prefix


def keys(endpoint: str, prefix: str) -> list[str]:
    body = httpx.get(f"{endpoint}/{BUCKET}", params={"prefix": f"{prefix}/"}, timeout=10).text
    return sorted(k.removeprefix(f"{prefix}/") for k in re.findall(r"<Key>([^<]+)</Key>", body))


def put_object(endpoint: str, key: str, data: bytes) -> None:
    """An object put by another program (or an older version of the store)."""
    httpx.put(f"{endpoint}/{BUCKET}/{key}", content=data, timeout=10).raise_for_status()


def uploads(endpoint: str, prefix: str) -> list[str]:
    """Multipart uploads begun under `prefix` and never completed or aborted."""
    body = httpx.get(f"{endpoint}/{BUCKET}?uploads&prefix={prefix}/", timeout=10).text
    return [k for k in re.findall(r"<Key>([^<]+)</Key>", body) if k.startswith(prefix)]


def deleting(method: str, path: str) -> bool:
    """A delete: one object's, or many at once (obstore deletes through `POST ?delete`)."""
    return method == "DELETE" or (method == "POST" and path.endswith("?delete"))


def big_text(lines: int) -> str:
    return "".join(f"line {i:07d} {'é' * (i % 5)}\n" for i in range(1, lines + 1))


def later(hours: float) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


async def test_storing_again_uploads_only_a_mark_and_delete_takes_every_object(
    moto_server: MotoServer,
) -> None:
    store, prefix = s3_store(moto_server.endpoint)
    with anyio.fail_after(60):
        blob_id = await store.store(TextContent(big_text(2000)))
        assert keys(moto_server.endpoint, prefix) == sorted(
            [".llm-worker-blob-key", f"{blob_id}.idx", f"{blob_id}.txt"]
        )
        assert await store.store(TextContent(big_text(2000))) == blob_id
        assert keys(moto_server.endpoint, prefix) == sorted(
            [".llm-worker-blob-key", f"{blob_id}.idx", f"{blob_id}.seen", f"{blob_id}.txt"]
        )
        assert await store.delete(blob_id) is True
    assert keys(moto_server.endpoint, prefix) == [".llm-worker-blob-key"]


def test_a_blob_stored_again_after_the_listing_is_young() -> None:
    blob, seen, orphan = (uuid.UUID(new_blob_id()) for _ in range(3))
    now = time.time()
    groups = {
        str(blob): Group([f"{blob}.txt", f"{blob}.idx"], now - 7200),
        str(seen): Group([f"{seen}.json", f"{seen}.seen"], now - 60),  # the mark is young
        str(orphan): Group([f"{orphan}.idx"], now - 7200),
    }
    doomed, kept, orphans = plan(groups, now - 3600, frozenset())  # type: ignore[arg-type]
    assert (doomed, kept, orphans) == ([str(blob)], [], [f"{orphan}.idx"])


async def test_a_failure_mid_upload_leaves_no_multipart_upload_and_no_index(
    proxy: BreakingProxy, moto_server: MotoServer
) -> None:
    store, prefix = s3_store(proxy.endpoint)
    await store.store(TextContent("the key is made"))
    before = keys(moto_server.endpoint, prefix)
    proxy.breaks = lambda method, path: method == "PUT" and "partNumber=2" in path
    with anyio.fail_after(60), pytest.raises(BlobStoreUnavailableError):
        await store.store(TextContent(big_text(300_000)))
    assert keys(moto_server.endpoint, prefix) == before
    assert uploads(moto_server.endpoint, prefix) == []


async def test_an_index_left_by_a_store_failing_through_its_cleanup_is_swept_once_old(
    proxy: BreakingProxy, moto_server: MotoServer
) -> None:
    store, prefix = s3_store(proxy.endpoint)
    kept = await store.store(StructuredContent({"a blob that stays": True}))  # no index
    # The parts fail, and so does every delete: the index cannot be taken down.
    proxy.breaks = lambda method, path: deleting(method, path) or "partNumber=" in path
    with anyio.fail_after(60), pytest.raises(BlobStoreUnavailableError):
        await store.store(TextContent(big_text(300_000)))
    left = [k for k in keys(moto_server.endpoint, prefix) if k.endswith(".idx")]
    assert len(left) == 1
    proxy.breaks = lambda method, path: False
    with anyio.fail_after(60):
        young = await store.sweep(HOUR, keep=[kept])
        assert young == SweepReport()  # a young index may be a writer's at work
        report = await store.sweep(HOUR, keep=[kept], now=later(2))
    assert report == SweepReport(kept=(kept,), orphans=1)
    assert keys(moto_server.endpoint, prefix) == sorted([".llm-worker-blob-key", f"{kept}.json"])


async def test_a_sweep_that_cannot_delete_fails_typed_and_a_later_one_finishes(
    proxy: BreakingProxy, moto_server: MotoServer
) -> None:
    store, prefix = s3_store(proxy.endpoint)
    blob_id = await store.store(TextContent(big_text(100)))
    proxy.breaks = deleting
    with anyio.fail_after(60), pytest.raises(BlobError):
        await store.sweep(HOUR, now=later(2))
    proxy.breaks = lambda method, path: False
    with anyio.fail_after(60):
        report = await store.sweep(HOUR, now=later(2))
    assert blob_id in report.deleted or report.orphans >= 1
    assert keys(moto_server.endpoint, prefix) == [".llm-worker-blob-key"]


async def test_blobs_stored_with_uuid7_ids_are_read_deleted_and_swept(
    moto_server: MotoServer,
) -> None:
    store, prefix = s3_store(moto_server.endpoint)
    legacy = new_blob_id()
    put_object(moto_server.endpoint, f"{prefix}/{legacy}.txt", b"from before")
    with anyio.fail_after(60):
        loaded = await store.load(legacy)
        assert isinstance(loaded, TextContent) and loaded.text == "from before"
        new = await store.store(TextContent("from before"))
        assert new != legacy and uuid.UUID(new).version == 8  # new content, new kind of id
        report = await store.sweep(HOUR, keep=[new], now=later(2))
    assert report == SweepReport(deleted=(legacy,), kept=(new,))


async def test_a_damaged_id_key_is_a_typed_error(moto_server: MotoServer) -> None:
    store, prefix = s3_store(moto_server.endpoint)
    put_object(moto_server.endpoint, f"{prefix}/.llm-worker-blob-key", b"short")
    with anyio.fail_after(30), pytest.raises(BlobError, match="damaged"):
        await store.store(TextContent("x"))
