"""Review probes: an S3 sweep's round trips per blob, and its speed on many blobs (moto)."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from llm_worker.blobs import ObjectBlobStore, TextContent
from support.blob_stores import BUCKET
from support.object_store import FaultProxy, MotoServer, s3_options

pytestmark = pytest.mark.anyio

_prefixes = iter(range(1 << 30))


@pytest.fixture
def proxy(moto_server: MotoServer) -> Iterator[FaultProxy]:
    server = FaultProxy(moto_server.endpoint)
    yield server
    server.stop()


async def test_a_sweep_retires_each_old_blob_in_few_round_trips(proxy: FaultProxy) -> None:
    # Each blob: one look at its mark, then only the objects the listing named (no second
    # lookup, no delete of objects that were never there).
    prefix = f"rev{next(_prefixes)}"
    store = ObjectBlobStore.from_url(f"s3://{BUCKET}/{prefix}", **s3_options(proxy.endpoint))
    count = 60
    with anyio.fail_after(120):
        for i in range(count):
            await store.store(TextContent(f"output {i}\n" * 50))
        proxy.reset()
        started = time.perf_counter()
        report = await store.sweep(timedelta(hours=1), now=datetime.now(UTC) + timedelta(hours=2))
        took = time.perf_counter() - started
    assert len(report.deleted) == count
    methods = Counter(method for method, _ in proxy.requests)
    print(f"{count} blobs swept in {took:.2f}s: {dict(methods)}")
    assert methods["HEAD"] <= count and methods["DELETE"] <= 2 * count


async def test_two_sweeps_at_once_on_local_files_both_finish(tmp_path: Path) -> None:
    # obstore's local store refuses to delete a missing file; two sweeps of one folder take
    # objects from under each other, and neither fails for it.
    folder = tmp_path / "objects"
    folder.mkdir()
    stores = [ObjectBlobStore.from_url(folder.as_uri(), index_every=7) for _ in range(2)]
    later = datetime.now(UTC) + timedelta(hours=2)
    with anyio.fail_after(120):
        ids = [await stores[0].store(TextContent(f"line {i}\n" * 40)) for i in range(40)]
        async with anyio.create_task_group() as tg:
            for store in stores:
                tg.start_soon(sweep_at, store, later)
        assert not any(name.endswith((".txt", ".idx")) for name in os.listdir(folder))
        assert [b for b in ids if await stores[1].exists(b)] == []


async def sweep_at(store: ObjectBlobStore, now: datetime) -> None:
    await store.sweep(timedelta(hours=1), now=now)
