"""Retention of blobs on every store: content-addressed ids, `delete`, `sweep`, `keep`.

Memory, folder, obstore's local files and S3 (moto). Ages are measured from a `now` the test
passes, never by waiting; a blob made old is one whose file time is set back (a real
condition of a folder), or one swept with a `now` in the future.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import BlobStore, ConfigurationError, Content, InvalidBlobIdError
from llm_worker.blobs import (
    FsBlobStore,
    MemoryBlobStore,
    StructuredContent,
    SweepableBlobStore,
    SweepReport,
    TextContent,
    new_blob_id,
    referenced_blob_ids,
)
from llm_worker.errors import BlobError, BlobNotFoundError

pytestmark = pytest.mark.anyio

HOUR = timedelta(hours=1)
LEDGER = "".join(f"{i},INV-{i:05},{i * 3.5:.2f}\n" for i in range(3000))
ROWS = [{"n": i, "name": f"row {i}"} for i in range(400)]
HOSTILE = ["../../etc/passwd", "/etc/passwd", "x.txt", "", " ", "..", "a/b", "\x00"]


def later(hours: float) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


def names_in(folder: Path) -> list[str]:
    return os.listdir(folder)


def sweeper(store: BlobStore) -> SweepableBlobStore:
    assert isinstance(store, SweepableBlobStore)
    return store


async def test_the_same_content_is_stored_once(any_store: BlobStore) -> None:
    with anyio.fail_after(60):
        first = await any_store.store(Content.Text(LEDGER))
        second = await any_store.store(Content.Text(LEDGER))
        rows = await any_store.store(Content.Structured(ROWS))
        rows_again = await any_store.store(Content.Structured([dict(r) for r in ROWS]))
        as_text = await any_store.store(Content.Text('{"a": 1}'))
        as_json = await any_store.store(Content.Structured({"a": 1}))
        other = await any_store.store(Content.Text(LEDGER + "x"))
        loaded = await any_store.load(first)
    assert first == second and rows == rows_again
    assert len({first, rows, as_text, as_json, other}) == 5  # text and JSON are two kinds
    assert uuid.UUID(first).version == 8
    assert isinstance(loaded, TextContent) and loaded.text == LEDGER


async def test_ids_are_keyed_so_content_cannot_be_confirmed_by_a_guess(tmp_path: Path) -> None:
    # Two stores, two keys: a hash of the guessed content alone names neither blob.
    one, two = FsBlobStore(tmp_path / "a"), FsBlobStore(tmp_path / "b")
    secret = Content.Text("password=hunter2")
    with anyio.fail_after(30):
        a, b = await one.store(secret), await two.store(secret)
        again = await FsBlobStore(tmp_path / "a").store(secret)  # the key is kept: same id
    assert a != b and a == again
    key = (tmp_path / "a" / ".llm-worker-blob-key").stat()
    assert key.st_mode & 0o077 == 0  # readable by its owner only
    keyed = FsBlobStore(tmp_path / "c", id_key=b"k" * 32)
    assert await keyed.store(secret) == await FsBlobStore(tmp_path / "d", id_key=b"k" * 32).store(
        secret
    )
    assert not (tmp_path / "c" / ".llm-worker-blob-key").exists()
    with pytest.raises(ConfigurationError, match="32 bytes"):
        FsBlobStore(tmp_path, id_key=b"short")


async def test_one_file_per_content_in_a_folder(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    with anyio.fail_after(30):
        ids = [await store.store(Content.Text(LEDGER)) for _ in range(3)]
    names = sorted(names_in(tmp_path))
    assert names == sorted([f"{ids[0]}.txt", ".llm-worker-blob-key"])


async def test_tasks_storing_the_same_content_at_once_get_one_whole_blob(
    any_store: BlobStore,
) -> None:
    ids: list[str] = []

    async def put() -> None:
        ids.append(await any_store.store(Content.Text(LEDGER)))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(put)
        loaded = await any_store.load(ids[0])
    assert len(set(ids)) == 1
    assert isinstance(loaded, TextContent) and loaded.text == LEDGER


async def test_delete_removes_a_blob_and_says_whether_it_was_there(any_store: BlobStore) -> None:
    with anyio.fail_after(60):
        text_id = await any_store.store(Content.Text(LEDGER))
        json_id = await any_store.store(Content.Structured(ROWS))
        assert await any_store.delete(text_id) is True
        assert not await any_store.exists(text_id)
        with pytest.raises(BlobNotFoundError):
            await any_store.load(text_id)
        assert await any_store.delete(text_id) is False  # deleting twice is no error
        assert await any_store.delete(new_blob_id()) is False
        assert await any_store.exists(json_id)
        assert await any_store.delete(json_id.upper()) is True  # ids are case-blind
        assert not await any_store.exists(json_id)
        stored_again = await any_store.store(Content.Text(LEDGER))  # and it can come back
        assert stored_again == text_id and await any_store.exists(text_id)


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_delete_refuses_what_is_not_an_id(any_store: BlobStore, hostile: str) -> None:
    with anyio.fail_after(30):
        blob_id = await any_store.store(Content.Text("keep me"))
        with pytest.raises(InvalidBlobIdError):
            await any_store.delete(hostile)
        with pytest.raises(InvalidBlobIdError):
            await any_store.delete(f"../{blob_id}")
        with pytest.raises(InvalidBlobIdError):
            await sweeper(any_store).sweep(HOUR, keep=[hostile])
        assert await any_store.exists(blob_id)


async def test_delete_never_reaches_outside_the_folder(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs")
    blob_id = await store.store(Content.Text("inside"))
    outside = tmp_path / f"{blob_id}.txt"
    outside.write_text("outside")
    for hostile in (f"../{blob_id}", str(outside), f"{blob_id}/../../{blob_id}"):
        with pytest.raises(InvalidBlobIdError):
            await store.delete(hostile)
    assert outside.read_text() == "outside"


async def test_sweep_deletes_old_blobs_and_keeps_young_and_protected_ones(
    any_store: BlobStore,
) -> None:
    store = sweeper(any_store)
    with anyio.fail_after(60):
        old = await any_store.store(Content.Text(LEDGER))
        kept = await any_store.store(Content.Structured(ROWS))
        other = await any_store.store(Content.Text("another"))
        young = await store.sweep(HOUR, now=later(0.5))
        assert young == SweepReport()
        report = await store.sweep(HOUR, keep=[kept.upper()], now=later(2))
        assert sorted(report.deleted) == sorted([old, other])
        assert report.kept == (kept,)
        assert not await any_store.exists(old) and not await any_store.exists(other)
        loaded = await any_store.load(kept)
        assert isinstance(loaded, StructuredContent) and loaded.value == ROWS
        assert await store.sweep(HOUR, keep=[kept], now=later(2)) == SweepReport(kept=(kept,))
        assert await store.sweep(timedelta(0), now=later(2)) == SweepReport(deleted=(kept,))


@pytest.mark.parametrize("bad", [-HOUR, 3600, "1h", None])
async def test_sweep_refuses_a_bad_age(any_store: BlobStore, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="older_than"):
        await sweeper(any_store).sweep(bad)
    with pytest.raises(ConfigurationError, match="now"):
        await sweeper(any_store).sweep(HOUR, now="tomorrow")  # type: ignore[arg-type]


async def test_storing_again_makes_an_old_blob_young_in_a_folder(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text(LEDGER))
    path = tmp_path / f"{blob_id}.txt"
    two_days_ago = time.time() - 2 * 86400
    os.utime(path, (two_days_ago, two_days_ago))
    assert await store.store(Content.Text(LEDGER)) == blob_id
    assert (await store.sweep(timedelta(days=1))).deleted == ()
    os.utime(path, (two_days_ago, two_days_ago))
    assert (await store.sweep(timedelta(days=1))).deleted == (blob_id,)


async def test_storing_again_makes_an_old_blob_young_in_memory() -> None:
    clock = [1_000_000.0]
    store = MemoryBlobStore(clock=lambda: clock[0])
    blob_id = await store.store(Content.Text(LEDGER))
    clock[0] += 2 * 86400
    assert await store.store(Content.Text(LEDGER)) == blob_id
    assert await store.sweep(timedelta(days=1)) == SweepReport()
    clock[0] += 2 * 86400
    assert await store.sweep(timedelta(days=1)) == SweepReport(deleted=(blob_id,))


async def test_sweep_removes_a_dead_writers_temporary_files_once_old(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text("x"))
    dead = tmp_path / f".{new_blob_id()}.abc123.tmp"
    dead.write_bytes(b"half a blob")
    tomb = tmp_path / f".{new_blob_id()}.txt.0011223344556677.swept"
    tomb.write_bytes(b"a sweep died here")
    report = await store.sweep(HOUR, keep=[blob_id])
    assert report.orphans == 0 and dead.exists()  # young: a writer may be at work
    report = await store.sweep(HOUR, keep=[blob_id], now=later(2))
    assert report.orphans == 2 and not dead.exists() and not tomb.exists()
    assert (tmp_path / ".llm-worker-blob-key").exists() and await store.exists(blob_id)


async def test_a_blob_stored_again_while_a_sweep_retires_it_stays(tmp_path: Path) -> None:
    # The sweep renames a blob to a tombstone, then reads the tombstone's time: a store that
    # touched the blob just before comes back young, and the blob is put back.
    from llm_worker.blobs._fs_retention import sweep_folder

    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text(LEDGER))
    path = tmp_path / f"{blob_id}.txt"
    old = time.time() - 86400
    os.utime(path, (old, old))
    real_rename = os.rename

    def rename_after_a_store(src: Any, dst: Any) -> None:
        os.utime(path)  # a store in another process touched it after the listing
        real_rename(src, dst)

    os.rename = rename_after_a_store  # type: ignore[assignment]
    try:
        report = sweep_folder(tmp_path, time.time() - 3600, frozenset())
    finally:
        os.rename = real_rename
    assert report.deleted == () and path.exists()
    assert [name for name in names_in(tmp_path) if name.endswith(".swept")] == []


def test_referenced_ids_are_found_in_tags_fields_json_and_histories() -> None:
    a, b, c = new_blob_id(), new_blob_id(), new_blob_id()
    summary = f"[blob:{a}] 3000 lines"
    assert referenced_blob_ids(summary) == {a}
    assert referenced_blob_ids({"blob_id": b.upper(), "x": [summary]}) == {a, b}
    import json

    nested = json.dumps({"text": json.dumps({"blob_id": c})})  # JSON inside a JSON string
    assert referenced_blob_ids(nested, [summary]) == {a, c}
    assert referenced_blob_ids(nested.encode()) == {c}
    assert referenced_blob_ids("no ids here", [], {}) == frozenset()
    with pytest.raises(TypeError):
        referenced_blob_ids(object())


async def test_one_id_passed_bare_as_keep_is_one_id_not_its_characters() -> None:
    clock = [1_000_000.0]
    store = MemoryBlobStore(clock=lambda: clock[0])
    kept = await store.store(Content.Text("kept"))
    gone = await store.store(Content.Text("gone"))
    clock[0] += 7200
    assert await store.sweep(HOUR, keep=kept) == SweepReport(deleted=(gone,), kept=(kept,))


async def test_the_id_key_is_never_in_a_repr_or_an_error(tmp_path: Path) -> None:
    key = b"\x8f" * 16 + b"K3Y-canary-00001"
    store = FsBlobStore(tmp_path, id_key=key)
    await store.store(Content.Text("x"))
    texts = [repr(store)]
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / ".llm-worker-blob-key").write_bytes(key[:-1])
    with pytest.raises(BlobError, match="damaged") as caught:
        await FsBlobStore(tmp_path / "damaged").store(Content.Text("x"))
    texts += [str(caught.value), repr(caught.value)]
    with pytest.raises(ConfigurationError) as bad:
        FsBlobStore(tmp_path, id_key=key + b"!")
    texts += [str(bad.value), repr(bad.value)]
    assert "damaged" in str(caught.value)
    for text in texts:
        assert "K3Y-canary" not in text and key.hex() not in text
