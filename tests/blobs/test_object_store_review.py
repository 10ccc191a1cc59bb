"""Adversarial probes of ObjectBlobStore: cancellation mid-upload, torn and missing indexes,
unicode lines, hostile sizes, a second provider, and credentials kept out of every text."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Content
from llm_worker.blobs import InspectTool, ObjectBlobStore, OutputPolicy
from llm_worker.errors import BlobStoreUnavailableError
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


async def test_cancel_while_a_part_uploads_leaves_no_blob_no_index_no_upload(
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
    keys = _keys(moto_server.endpoint, prefix)
    assert not [k for k in keys if k.endswith((".txt", ".json", ".idx"))], keys
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


async def test_cancel_while_the_upload_completes_leaves_no_blob(
    proxy: FaultProxy, moto_server: MotoServer
) -> None:
    # The completing request is already on its way when the store is cancelled: the blob
    # appears, and the cancelled store takes it (and its index) down, since no one has its id.
    store, prefix = s3_store(proxy.endpoint)
    proxy.gate = threading.Event()
    with anyio.fail_after(60):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.store, Content.Text(big_text(300_000)))
                assert await anyio.to_thread.run_sync(proxy.held.wait, 30)
                scope.cancel()
                proxy.gate.set()
    keys = _keys(moto_server.endpoint, prefix)
    assert not [k for k in keys if k.endswith((".txt", ".json", ".idx"))], keys
    assert _uploads(moto_server.endpoint, prefix) == []
