"""The BlobStore protocol, once for every store: memory, folder, obstore's local files, S3.

Same ids, same bytes back, same summaries and same `inspect` answers whatever the store.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import (
    BlobNotFoundError,
    BlobStore,
    Content,
    InvalidBlobIdError,
    MemoryBlobStore,
    OutputPolicy,
)
from llm_worker.blobs import (
    InspectTool,
    StoredOutput,
    StructuredContent,
    TextContent,
    TextStreamStore,
    externalize,
    new_blob_id,
)
from support.blob_stores import make_store

pytestmark = pytest.mark.anyio

TEXT = "héllo 世界 😀\r\nline two\n\ud800 lone surrogate\n" + "".join(
    f"row {i} " + "é" * (i % 5) + "\n" for i in range(2000)
)
VALUE: Any = {"a": [1, 2.5, None, True], "é": "😀", "big": 2**70}
ARRAY = [{"id": i, "name": f"item {i}", "note": "ü" * (i % 4)} for i in range(3000)]


async def test_the_store_implements_the_protocol(any_store: BlobStore) -> None:
    assert isinstance(any_store, BlobStore)


async def test_exact_round_trips(any_store: BlobStore) -> None:
    with anyio.fail_after(30):
        text_id = await any_store.store(Content.Text(TEXT))
        json_id = await any_store.store(Content.Structured(VALUE))
        array_id = await any_store.store(Content.Structured(ARRAY))
        empty_id = await any_store.store(Content.Text(""))
        text = await any_store.load(text_id)
        value = await any_store.load(json_id)
        array = await any_store.load(array_id)
        empty = await any_store.load(empty_id)
    assert isinstance(text, TextContent) and text.text == TEXT
    assert isinstance(value, StructuredContent) and value.value == VALUE
    assert isinstance(array, StructuredContent) and array.value == ARRAY
    assert isinstance(empty, TextContent) and empty.text == ""


async def test_ids_are_uuid8_one_per_content(any_store: BlobStore) -> None:
    with anyio.fail_after(30):
        ids = [await any_store.store(Content.Text(f"x{i}")) for i in range(5)]
        again = [await any_store.store(Content.Text(f"x{i}")) for i in range(5)]
    assert [uuid.UUID(i).version for i in ids] == [8] * 5
    assert len(set(ids)) == 5 and again == ids


async def test_exists_and_missing_blobs(any_store: BlobStore) -> None:
    with anyio.fail_after(30):
        blob_id = await any_store.store(Content.Text("here"))
        missing = new_blob_id()
        assert await any_store.exists(blob_id)
        assert not await any_store.exists(missing)
        with pytest.raises(BlobNotFoundError):
            await any_store.load(missing)


@pytest.mark.parametrize("bad", ["../etc/passwd", "not-an-id", "", "01234567-89ab-7def-8123"])
async def test_invalid_ids_are_refused_before_any_io(any_store: BlobStore, bad: str) -> None:
    with anyio.fail_after(10):
        with pytest.raises(InvalidBlobIdError):
            await any_store.load(bad)
        with pytest.raises(InvalidBlobIdError):
            await any_store.exists(bad)
        if isinstance(any_store, TextStreamStore):
            with pytest.raises(InvalidBlobIdError):
                await any_store.stream_text(bad)


@pytest.mark.parametrize("kind", ["fs", "object-local", "object-s3"])  # memory: no streaming
async def test_stream_text_yields_the_utf8_bytes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    any_store = make_store(kind, tmp_path, request)
    assert isinstance(any_store, TextStreamStore)
    with anyio.fail_after(30):
        text_id = await any_store.store(Content.Text(TEXT))
        json_id = await any_store.store(Content.Structured(VALUE))
        stream = await any_store.stream_text(text_id)
        assert stream is not None
        data = b"".join([chunk async for chunk in stream])
        assert await any_store.stream_text(json_id) is None
    assert data == TEXT.encode("utf-8", "surrogatepass")


async def test_many_tasks_store_at_once(any_store: BlobStore) -> None:
    ids: list[str] = []

    async def one(i: int) -> None:
        ids.append(await any_store.store(Content.Text(f"blob {i}\n" * 100)))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        loaded = [await any_store.load(i) for i in ids]
    assert len(set(ids)) == 20
    assert sorted(c.text for c in loaded if isinstance(c, TextContent)) == sorted(
        f"blob {i}\n" * 100 for i in range(20)
    )


def _outputs() -> list[str | StoredOutput]:
    return [
        TEXT,
        json.dumps(ARRAY),
        json.dumps({"results": ARRAY[:50], "n": 50}),
        StoredOutput("", Content.Structured(ARRAY)),
        StoredOutput("my own summary", Content.Text(TEXT)),
    ]


async def test_summaries_are_the_same_byte_for_byte(any_store: BlobStore) -> None:
    policy = OutputPolicy()
    for output in _outputs():
        with anyio.fail_after(30):
            here = await externalize(output, any_store, policy, inspect="inspect")
            there = await externalize(output, MemoryBlobStore(), policy, inspect="inspect")
        assert isinstance(here, StoredOutput) and isinstance(there, StoredOutput)
        assert here.blob_id and there.blob_id
        assert here.summary.replace(here.blob_id, "ID") == there.summary.replace(
            there.blob_id, "ID"
        )


SELECTORS: dict[str, list[str | None]] = {
    "text": [
        None,
        "@1000",
        "lines:1-5",
        "lines:500-520",
        "lines:1999-2010",
        "lines:1990-",
        "lines:5000-5010",
        "lines:3-3@4",
        "grep:row 17",
        "slice:0..3",
    ],
    "array": [
        None,
        "@500",
        "slice:0..3",
        "slice:1000..1040",
        "slice:2990..3500",
        "slice:-5..",
        "slice:-10..-3",
        "slice:4000..4010",
        "slice:100..140@200",
        "grep:item 29",
        "lines:1-3",
        "key:x",
    ],
    "object": [None, "key:results", "key:results.3", "grep:item 4", "slice:0..2"],
    "empty": [None, "lines:1-3"],
    "empty_array": [None, "slice:0..3"],
}


async def _answers(store: BlobStore) -> dict[tuple[str, str | None], str]:
    contents: dict[str, Content] = {
        "text": Content.Text(TEXT),
        "array": Content.Structured(ARRAY),
        "object": Content.Structured({"results": ARRAY[:400], "n": 400}),
        "empty": Content.Text(""),
        "empty_array": Content.Structured([]),
    }
    tool = InspectTool(store, OutputPolicy(inspect_max_chars=3_000))
    answers: dict[tuple[str, str | None], str] = {}
    for kind, content in contents.items():
        blob_id = await store.store(content)
        for selector in SELECTORS[kind]:
            args = {"blob_id": blob_id} | ({"selector": selector} if selector else {})
            try:
                out = await tool.execute(json.dumps(args))
            except Exception as exc:
                out = f"{type(exc).__name__}: {exc}"
            answers[kind, selector] = out.replace(blob_id, "ID")
    return answers


async def test_inspect_answers_are_the_same(any_store: BlobStore) -> None:
    with anyio.fail_after(60):
        here = await _answers(any_store)
        there = await _answers(MemoryBlobStore())
    assert here.keys() == there.keys()
    for key, expected in there.items():
        assert here[key] == expected, key
