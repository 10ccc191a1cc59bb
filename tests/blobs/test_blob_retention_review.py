"""Review probes for content-addressed blobs, delete and sweep (issue 31 item 7, 30 item 6).

A damaged file under a blob's name, two sweeps on one folder, ids nested deep in JSON, a key
file others can read.
"""

from __future__ import annotations

import json
import os
import stat
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from llm_worker import Content
from llm_worker.blobs import (
    BlobId,
    FsBlobStore,
    TextContent,
    _fs_retention,
    new_blob_id,
    referenced_blob_ids,
)

pytestmark = pytest.mark.anyio

LEDGER = "".join(f"{i},INV-{i:05},{i * 3.5:.2f}\n" for i in range(3000))


async def test_a_truncated_file_under_a_blobs_name_is_written_again_by_the_next_store(
    tmp_path: Path,
) -> None:
    # A copy cut short (a restore, a full disk under another tool) must not be trusted by
    # the dedup path forever: the next store of the content puts the whole blob back.
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text(LEDGER))
    path = tmp_path / f"{blob_id}.txt"
    with path.open("r+b") as file:
        file.truncate(100)
    assert await store.store(Content.Text(LEDGER)) == blob_id
    loaded = await store.load(blob_id)
    assert isinstance(loaded, TextContent) and loaded.text == LEDGER


async def test_a_structured_blob_cut_short_is_written_again_too(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    rows = [{"n": i} for i in range(500)]
    blob_id = await store.store(Content.Structured(rows))
    (tmp_path / f"{blob_id}.json").write_bytes(b"")
    assert await store.store(Content.Structured(rows)) == blob_id
    assert (await store.load(blob_id)).json_text == Content.Structured(rows).json_text  # type: ignore[union-attr]


def test_a_tombstone_taken_by_a_second_sweep_is_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two sweeps on one folder: the second lists the first's fresh tombstone (its time is the
    # old blob's) as an old leftover and unlinks it, between the first's look and its unlink.
    import anyio

    store = FsBlobStore(tmp_path)
    blob_id = anyio.run(store.store, Content.Text(LEDGER))
    old = time.time() - 86400
    os.utime(tmp_path / f"{blob_id}.txt", (old, old))
    real_unlink = _fs_retention._unlink  # pyright: ignore[reportPrivateUsage]

    def taken_then_unlink(path: Path) -> None:
        if path.name.endswith(".swept"):
            path.unlink()  # the other sweep's leftover pass, just before this one's unlink
        real_unlink(path)

    monkeypatch.setattr(_fs_retention, "_unlink", taken_then_unlink)
    report = _fs_retention.sweep_folder(tmp_path, time.time() - 3600, frozenset())
    assert not (tmp_path / f"{blob_id}.txt").exists()
    assert report.deleted == (blob_id,)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".swept")] == []


def test_ids_nested_in_json_at_any_depth_are_found() -> None:
    a, b = new_blob_id(), new_blob_id()
    text: Any = {"blob_id": a}
    for _ in range(5):  # JSON in a string in JSON ... (a tool result quoting a saved state)
        text = json.dumps({"result": json.dumps(text)})
    assert referenced_blob_ids(text) == {a}
    spaced = json.dumps({"blob_id": b}, indent=2)
    assert referenced_blob_ids(json.dumps(json.dumps(json.dumps(spaced)))) == {b}


async def test_a_key_file_others_can_read_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await FsBlobStore(tmp_path).store(Content.Text("first"))
    key = tmp_path / ".llm-worker-blob-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    secret = key.read_bytes()
    key.chmod(0o644)
    with caplog.at_level("WARNING", logger="llm_worker.blobs"):
        await FsBlobStore(tmp_path).store(Content.Text("second"))
    warned = [r.getMessage() for r in caplog.records if "readable" in r.getMessage()]
    assert warned and str(key) in warned[0]
    assert all(secret.hex() not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("kind", ["object-local", "object-s3"])
@pytest.mark.parametrize("size", [100, 3 << 20], ids=["one-put", "multipart"])
async def test_an_object_cut_short_under_a_blobs_name_is_uploaded_again(
    kind: str, size: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import anyio

    from support.blob_stores import make_store

    store: Any = make_store(kind, tmp_path, request)
    text = (LEDGER * (size // len(LEDGER) + 1))[:size]
    with anyio.fail_after(120):
        blob_id = await store.store(Content.Text(text))
        await store._obs.put_async(store._store, f"{blob_id}.txt", b"cut", mode="overwrite")
        assert await store.store(Content.Text(text)) == blob_id
        loaded = await store.load(blob_id)
    assert isinstance(loaded, TextContent) and loaded.text == text


async def test_a_sweep_removes_only_its_own_leftovers_never_other_dotfiles(tmp_path: Path) -> None:
    # A folder shared with anything else (an editor's or a backup tool's `.x.tmp`): only the
    # names the store and the sweep make are leftovers.
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text("x"))
    theirs = [".editor-swap.tmp", ".backup.swept", ".tmp", f".{blob_id}.notes.tmp.bak"]
    ours = [
        f".{blob_id}.k2j_9x0a.tmp",  # a store's temporary file (mkstemp)
        ".key.ab12cd34.tmp",  # the id key's
        f".{blob_id}.txt.0123456789abcdef.swept",  # a sweep's tombstone
    ]
    old = time.time() - 86400
    for name in theirs + ours:
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (old, old))
    report = await store.sweep(timedelta(hours=1))
    assert report.orphans == len(ours)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith(".")) == sorted(
        [".llm-worker-blob-key", *theirs]
    )


@pytest.mark.parametrize("now", [float("inf"), float("-inf"), float("nan")])
async def test_a_time_that_is_not_finite_is_refused_and_nothing_is_deleted(
    tmp_path: Path, now: float
) -> None:
    from llm_worker import ConfigurationError

    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text("young"))
    with pytest.raises(ConfigurationError, match="now must be"):
        await store.sweep(timedelta(days=7), now=now)
    assert await store.exists(blob_id)


def test_the_web_adapters_blob_parts_name_their_ids() -> None:
    # A chat the browser saved (Vercel AI UI messages, AG-UI events) names a stored output in
    # its blob part even where an application dropped or rewrote the tool's output text.
    a, b = new_blob_id(), new_blob_id()
    vercel = {"type": "data-llm-worker-blob", "id": "blob_c1", "data": {"blobId": a}}
    agui = {"type": "CUSTOM", "name": "llm-worker.blob", "value": {"blobId": b.upper()}}
    assert referenced_blob_ids([vercel, json.dumps([agui])]) == {a, b}


async def test_every_blob_a_store_returned_during_sweeps_is_there_after_them(
    tmp_path: Path,
) -> None:
    # Real interleavings (stores and two sweeps in worker threads on one folder): a store that
    # returned an id made its blob young, so no sweep may take it; the others go.
    import anyio

    texts = [f"output {i}\n" * 30 for i in range(200)]
    writer, sweepers = FsBlobStore(tmp_path), [FsBlobStore(tmp_path), FsBlobStore(tmp_path)]
    ids = [await writer.store(Content.Text(text)) for text in texts]
    old = time.time() - 7200
    for blob_id in ids:
        os.utime(tmp_path / f"{blob_id}.txt", (old, old))
    returned: list[BlobId] = []

    async def store_half() -> None:
        for text in texts[::2]:
            returned.append(await writer.store(Content.Text(text)))

    async def sweep(store: FsBlobStore) -> None:
        await store.sweep(timedelta(hours=1))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store_half)
            for store in sweepers:
                tg.start_soon(sweep, store)
    assert [b for b in returned if not await writer.exists(b)] == []
    assert [n for n in os.listdir(tmp_path) if n.endswith((".swept", ".tmp"))] == []
    for blob_id in returned:
        loaded = await writer.load(blob_id)
        assert isinstance(loaded, TextContent) and loaded.text == texts[ids.index(blob_id)]


LOOKALIKES = [
    "\uff10\uff11\uff19\uff12f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a",  # full-width digits
    "\u0660\u0661\u0669\u0662f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a",  # Arabic-Indic digits
    "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a\n",  # a trailing newline ($ would take it)
    "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8\ud800",  # a lone surrogate
    "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a/../../x",
    "0192f0c45a1e7c3d9b2a3f4e5d6c7b8a",  # no hyphens: uuid.UUID takes it, the stores do not
]


@pytest.mark.parametrize("hostile", LOOKALIKES)
async def test_lookalike_ids_are_refused_by_delete_keep_and_load(
    tmp_path: Path, hostile: str
) -> None:
    from llm_worker import InvalidBlobIdError

    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text("x"))
    with pytest.raises(InvalidBlobIdError):
        await store.delete(hostile)
    with pytest.raises(InvalidBlobIdError):
        await store.sweep(timedelta(0), keep=[blob_id, hostile])
    with pytest.raises(InvalidBlobIdError):
        await store.load(hostile)
    assert await store.exists(blob_id)  # a refused keep deleted nothing


async def test_an_uppercase_id_or_another_stores_uuid7_is_one_id(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text("x"))
    report = await store.sweep(timedelta(0), keep=[blob_id.upper()], now=time.time() + 60)
    assert report.kept == (blob_id,) and await store.exists(blob_id)
    assert await store.delete(new_blob_id()) is False
    assert await store.delete(blob_id.upper()) is True and not await store.exists(blob_id)


@pytest.mark.parametrize("after", [0.0, 0.005, 0.05])
async def test_a_store_cancelled_mid_write_leaves_no_temporary_file_and_no_half_blob(
    tmp_path: Path, after: float
) -> None:
    import anyio

    store = FsBlobStore(tmp_path)
    await store.store(Content.Text("makes the key"))
    text = "".join(f"line {i} of a large output\n" for i in range(600_000))  # ~17 MB
    with anyio.move_on_after(after):
        await store.store(Content.Text(text))
    names = os.listdir(tmp_path)
    assert [n for n in names if n.endswith(".tmp")] == []
    for name in names:
        if name.endswith(".txt") and (tmp_path / name).stat().st_size > 100:
            assert (tmp_path / name).read_text() == text  # whole, or not there


def test_a_tombstone_taken_before_the_first_sweep_looks_at_it_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other order of the two-sweeps race: the second sweep unlinks the fresh tombstone
    # (it bears the blob's old time) before the first one reads its time.
    import anyio

    store = FsBlobStore(tmp_path)
    blob_id = anyio.run(store.store, Content.Text(LEDGER))
    old = time.time() - 86400
    os.utime(tmp_path / f"{blob_id}.txt", (old, old))
    real_rename = os.rename

    def rename_then_taken(src: Any, dst: Any) -> None:
        real_rename(src, dst)
        if str(dst).endswith(".swept"):
            os.unlink(dst)  # the other sweep's leftover pass

    monkeypatch.setattr(os, "rename", rename_then_taken)
    report = _fs_retention.sweep_folder(tmp_path, time.time() - 3600, frozenset())
    assert report.deleted == (blob_id,) and os.listdir(tmp_path) == [".llm-worker-blob-key"]


def test_a_young_tombstone_taken_by_a_sweep_with_a_shorter_age_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store touched the blob just before this sweep's rename (the tombstone is young, it
    # goes back), but a sweep with a shorter `older_than` took the tombstone first.
    import anyio

    store = FsBlobStore(tmp_path)
    blob_id = anyio.run(store.store, Content.Text(LEDGER))
    old = time.time() - 86400
    os.utime(tmp_path / f"{blob_id}.txt", (old, old))
    real_rename, real_replace = os.rename, os.replace

    def rename_after_a_store(src: Any, dst: Any) -> None:
        os.utime(src)
        real_rename(src, dst)

    def replace_once_taken(src: Any, dst: Any) -> None:
        if str(src).endswith(".swept"):
            os.unlink(src)
        real_replace(src, dst)

    monkeypatch.setattr(os, "rename", rename_after_a_store)
    monkeypatch.setattr(os, "replace", replace_once_taken)
    report = _fs_retention.sweep_folder(tmp_path, time.time() - 3600, frozenset())
    assert report.deleted == () and os.listdir(tmp_path) == [".llm-worker-blob-key"]
