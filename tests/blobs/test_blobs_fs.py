"""FsBlobStore: layout, round trips, id validation, atomic writes, crashes, concurrency."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from llm_worker import (
    BlobError,
    BlobNotFoundError,
    BlobStore,
    Content,
    FsBlobStore,
    InvalidBlobIdError,
    MemoryBlobStore,
)
from llm_worker.blobs import StructuredContent, TextContent, TextStreamStore, new_blob_id

BLOB_NAME = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\.(txt|json)")


def blob_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if BLOB_NAME.fullmatch(p.name))


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_stores_implement_the_protocols(tmp_path: Path) -> None:
    assert isinstance(FsBlobStore(tmp_path), BlobStore)
    assert isinstance(MemoryBlobStore(), BlobStore)
    assert isinstance(FsBlobStore(tmp_path), TextStreamStore)
    assert repr(FsBlobStore(tmp_path)) == f"FsBlobStore({str(tmp_path)!r})"


@pytest.mark.anyio
async def test_flat_layout_and_exact_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "blobs" / "nested"  # created on the first store
    store = FsBlobStore(root)
    text = "héllo 世界 😀\r\nline two\n\ud800 lone surrogate\n"
    text_id = await store.store(Content.Text(text))
    value = {"a": [1, 2.5, None, True], "é": "😀", "big": 2**70}
    json_id = await store.store(Content.Structured(value))
    assert blob_files(root) == sorted([f"{text_id}.txt", f"{json_id}.json"])
    assert (root / f"{json_id}.json").read_text("utf-8").startswith('{"a":[1,2.5,null,true]')
    loaded = await store.load(text_id)
    assert isinstance(loaded, TextContent) and loaded.text == text
    assert await store.load(json_id) == Content.Structured(value)
    assert await store.exists(text_id) and await store.exists(json_id)
    assert not await store.exists(new_blob_id())
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.anyio
async def test_promoted_json_is_written_as_received(tmp_path: Path) -> None:
    from llm_worker import ToolOutput
    from llm_worker.blobs import StoredOutput

    text = '[ {"n": 1.50} ,\n' + ",".join(['{"n": 2e1}'] * 100) + " ]"
    out = ToolOutput.from_string(text)
    assert isinstance(out, StoredOutput)
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(out.content)
    assert (tmp_path / f"{blob_id}.json").read_bytes() == text.encode()
    loaded = await store.load(blob_id)
    assert isinstance(loaded, StructuredContent) and loaded.json_text == text


@pytest.mark.anyio
async def test_missing_and_damaged_blobs(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    with pytest.raises(BlobNotFoundError):
        await store.load(new_blob_id())
    bad = new_blob_id()
    (tmp_path / f"{bad}.txt").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(BlobError, match="not UTF-8"):
        await store.load(bad)
    folder = new_blob_id()
    (tmp_path / f"{folder}.txt").mkdir()
    with pytest.raises(BlobError):
        await store.load(folder)
    assert await store.stream_text(new_blob_id()) is None


@pytest.mark.anyio
async def test_store_fails_cleanly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(BlobError, match="could not store"):
        await FsBlobStore(blocker / "blobs").store(Content.Text("x"))
    store = FsBlobStore(tmp_path / "ok")
    with pytest.raises(BlobError, match="not JSON"):
        await store.store(Content.Structured({"x": object()}))
    assert not (tmp_path / "ok").exists() or not list((tmp_path / "ok").iterdir())


@pytest.mark.anyio
@pytest.mark.parametrize(
    "bad",
    ["../secret", "../../etc/passwd", "x.txt", "x", "/etc/passwd", "", "secret", "..", "."],
)
async def test_invalid_ids_never_reach_the_disk(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "blobs"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("outside the store")
    (root / "x.txt").write_text("not a blob")
    (root / "secret.txt").write_text("not a blob either")
    store = FsBlobStore(root)
    with pytest.raises(InvalidBlobIdError):
        await store.load(bad)
    with pytest.raises(InvalidBlobIdError):
        await store.exists(bad)
    with pytest.raises(InvalidBlobIdError):
        await store.stream_text(bad)
    with pytest.raises(InvalidBlobIdError):
        await store.load(str(tmp_path / "secret.txt"))


@pytest.mark.anyio
async def test_stream_text_yields_the_bytes(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    text = "abc\n" * 600_000  # 2.4 MB: several chunks
    blob_id = await store.store(Content.Text(text))
    json_id = await store.store(Content.Structured([1]))
    stream = await store.stream_text(blob_id)
    assert stream is not None
    chunks = [chunk async for chunk in stream]
    assert len(chunks) >= 2 and b"".join(chunks) == text.encode()
    assert await store.stream_text(json_id) is None


@pytest.mark.anyio
async def test_file_io_runs_off_the_event_loop(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    text = "y" * (48 << 20)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    ids: list[str] = []
    before = 0
    loaded: Content = Content.Text("")
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            ids.append(await store.store(Content.Text(text)))
            before = ticks
            loaded = await store.load(ids[0])
            tg.cancel_scope.cancel()
    assert before > 10 and ticks > before + 10  # the loop ran during the write and the read
    assert isinstance(loaded, TextContent) and len(loaded.text) == len(text)


@pytest.mark.anyio
async def test_many_tasks_store_at_once(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    ids: dict[str, str] = {}

    async def one(i: int) -> None:
        ids[await store.store(Content.Text(f"blob {i}\n" * 100))] = f"blob {i}\n" * 100

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(one, i)
    assert len(ids) == 200 and len(blob_files(tmp_path)) == 200
    for blob_id, text in ids.items():
        assert await store.load(blob_id) == Content.Text(text)


# -- other processes ---------------------------------------------------------------------------

# Child processes run this; argv: the folder, the mode, a count.
CHILD = textwrap.dedent(
    """
    import sys
    import anyio
    from llm_worker.blobs import _store as blobs
    from llm_worker.blobs import Content, FsBlobStore

    root, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def say(line):
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    if mode == "crash":
        real, calls = blobs._encoded, []

        def stalling(text):
            calls.append(text)  # the first pass hashes the text, the second writes it
            for i, chunk in enumerate(real(text)):
                yield chunk
                if len(calls) == 2 and i == 3:  # four chunks are in the file: wait to be killed
                    say("writing")
                    sys.stdin.readline()

        blobs._encoded = stalling
        anyio.run(FsBlobStore(root).store, Content.Text("x" * (count << 20)))
    else:
        say("ready")
        sys.stdin.readline()  # start together with the parent

        async def main():
            store = FsBlobStore(root)
            for i in range(count):
                content = Content.Text(f"child {i}") if i % 2 else Content.Structured({"child": i})
                say(await store.store(content))

        anyio.run(main)
    """
)


async def start_child(root: Path, mode: str, count: int) -> Process:
    return await anyio.open_process(
        [sys.executable, "-c", CHILD, str(root), mode, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


async def read_line(stream: TextReceiveStream, buffer: list[str]) -> str:
    while "\n" not in "".join(buffer):
        buffer.append(await stream.receive())
    text = "".join(buffer)
    line, rest = text.split("\n", 1)
    buffer[:] = [rest]
    return line


@pytest.mark.anyio
async def test_a_writer_killed_mid_write_leaves_no_blob(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        child = await start_child(tmp_path, "crash", 64)  # a 64 MB text
        assert child.stdout is not None
        try:
            line = await read_line(TextReceiveStream(child.stdout), [])
            assert line == "writing"
            temps = temp_files(tmp_path)
            assert len(temps) == 1 and 0 < temps[0].stat().st_size < 64 << 20
            os.kill(child.pid, signal.SIGKILL)
        finally:
            if child.returncode is None:  # a failed check above must not hang on the child
                child.kill()
            await child.wait()
    assert child.returncode == -signal.SIGKILL
    assert blob_files(tmp_path) == []  # nothing under a blob's name
    half_written_id = temps[0].name.split(".")[1]
    store = FsBlobStore(tmp_path)
    assert not await store.exists(half_written_id)
    with pytest.raises(BlobNotFoundError):
        await store.load(half_written_id)
    blob_id = await store.store(Content.Text("after the crash"))  # the folder still works
    assert await store.load(blob_id) == Content.Text("after the crash")
    later = temps[0].stat().st_mtime + 7200
    report = await store.sweep(timedelta(hours=1), keep=[blob_id], now=later)
    assert report.orphans == 1 and temp_files(tmp_path) == []  # the dead writer's file goes


@pytest.mark.anyio
async def test_two_processes_store_into_one_folder(tmp_path: Path) -> None:
    count = 60
    store = FsBlobStore(tmp_path)
    with anyio.fail_after(60):
        child = await start_child(tmp_path, "store", count)
        assert child.stdin is not None and child.stdout is not None
        lines = TextReceiveStream(child.stdout)
        buffer: list[str] = []
        assert await read_line(lines, buffer) == "ready"
        await child.stdin.send(b"go\n")
        mine = [await store.store(Content.Text(f"parent {i}")) for i in range(count)]
        theirs = [await read_line(lines, buffer) for _ in range(count)]
        assert await child.wait() == 0
    assert len(set(mine) | set(theirs)) == 2 * count
    assert len(blob_files(tmp_path)) == 2 * count
    for i, blob_id in enumerate(mine):
        assert await store.load(blob_id) == Content.Text(f"parent {i}")
    for i, blob_id in enumerate(theirs):
        expected = Content.Text(f"child {i}") if i % 2 else Content.Structured({"child": i})
        assert await store.load(blob_id) == expected
    assert not temp_files(tmp_path)
    assert json.loads((tmp_path / f"{theirs[0]}.json").read_text()) == {"child": 0}
