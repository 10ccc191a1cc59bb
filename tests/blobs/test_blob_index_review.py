"""Review probes of blob index version 2 and of paging a JSON array from a stream.

An index whose `check` is recomputed after the edit (what a buggy writer, not a torn write,
would leave) must still never give a wrong answer; a version-1 index is read around; a page
offset at or past the selection's end, a blob that is not an array and deep nesting are
answered, not crashed on; memory stays bounded on S3 as on a local folder.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import pytest

from blobs.test_object_store_review import (
    ARRAY,
    TAMPERINGS,
    TEXT,
    _answers,
    _expected,
    _tamper,
    inspect,
    local,
)
from llm_worker import Content, ToolError
from llm_worker.blobs import InspectTool, OutputPolicy
from llm_worker.blobs._index import BlobIndex, _check
from llm_worker.blobs._inspect_window import CountedIndexes, inspect_window
from llm_worker.blobs._selectors import parse_selector
from support.blob_stores import make_store, traced_peak

pytestmark = pytest.mark.anyio

_NO_CHECK = {"huge-numbers"}  # past 64 bits: orjson reads them as floats, refused anyway


def _rechecked(doc: dict[str, Any]) -> dict[str, Any]:
    doc["check"] = _check(doc["kind"], doc["bytes"], doc["count"], doc["points"])
    return doc


def _miscounted(doc: dict[str, Any], how: str) -> dict[str, Any]:
    """`doc` tampered `how`: one of `TAMPERINGS`, or a count no index test alone can refute."""
    if how == "count-over":  # past the real count
        doc["count"] += 5
    elif how == "no-points-no-count":  # what an empty blob's index says
        doc["points"], doc["count"] = [], 0
    else:
        _tamper(doc, how)
    return doc


# A count short of the blob's yet past the last point ("count-near"), or past the blob's
# ("count-over"), fits every test of the index alone: the blob's tail is counted against it.
_HOWS = [how for how in [*TAMPERINGS, "count-over", "no-points-no-count"] if how not in _NO_CHECK]


@pytest.mark.parametrize("kind", ["text", "array"])
@pytest.mark.parametrize("how", _HOWS)
async def test_a_tampered_index_with_its_check_recomputed_gives_no_wrong_answer(
    tmp_path: Path, kind: str, how: str
) -> None:
    store = local(tmp_path)
    content = Content.Text(TEXT) if kind == "text" else Content.Structured(ARRAY)
    blob_id = await store.store(content)
    path = tmp_path / f"{blob_id}.idx"
    doc = _rechecked(_miscounted(json.loads(path.read_bytes()), how))
    path.write_bytes(json.dumps(doc).encode())
    assert await _answers(store, blob_id, kind) == await _expected(kind)


@pytest.mark.parametrize("kind", ["text", "array"])
async def test_a_version_1_index_is_read_around(tmp_path: Path, kind: str) -> None:
    store = local(tmp_path)
    content = Content.Text(TEXT) if kind == "text" else Content.Structured(ARRAY)
    blob_id = await store.store(content)
    path = tmp_path / f"{blob_id}.idx"
    doc = json.loads(path.read_bytes())
    doc["version"] = 1
    doc.pop("check")
    doc["count"] = 3  # what a version-1 index could say unseen
    path.write_bytes(json.dumps(doc).encode())
    assert await _answers(store, blob_id, kind) == await _expected(kind)


KINDS = ["memory", "fs", "object-local"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_page_offset_at_or_past_the_end_is_answered_like_the_memory_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    value = [{"big": "y" * (600_000)}, "🧪" * 10, 3]
    blob_id = await store.store(Content.Structured(value))
    size = len(json.dumps(value[0], separators=(",", ":")))
    for selector in [f"slice:0..1@{size}", f"slice:0..1@{size + 1}", "slice:0..3@99999999999"]:
        try:
            out = await inspect(store, blob_id, selector)
        except ToolError as exc:
            out = f"error: {exc}"
        assert "Traceback" not in out and len(out) < 20_000, (selector, out[:300])
        assert '"big":"yyy' not in out, (selector, out[:300])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "value",
    [{"a": "y" * 600_000}, "y" * 600_000, 12345, [[[[[["y" * 600_000]]]]]], []],
    ids=["object", "string", "number", "nested", "empty"],
)
async def test_a_blob_that_is_not_a_flat_array_is_inspected(
    kind: str, value: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    blob_id = await store.store(Content.Structured(value))
    for selector in ["slice:0..1", "slice:-1..", None]:
        try:
            out = await inspect(store, blob_id, selector)
        except ToolError as exc:
            out = f"error: {exc}"
        assert len(out) < 20_000 and "Traceback" not in out, out[:300]


@pytest.mark.parametrize("kind", ["fs", "object-s3"])
async def test_a_huge_entry_deep_in_a_nested_array_is_paged_in_bounded_memory(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    entry = 8 << 20
    value = [0, {"rows": [{"k": i, "v": "é" * 30} for i in range(60_000)], "tail": "y" * entry}]
    blob_id = await store.store(Content.Structured(value))
    at = entry - 50_000 + 60_000 * 40
    with anyio.fail_after(120):
        out, peak = await traced_peak(inspect(store, blob_id, f"slice:1..2@{at}"))
    assert "yyyyyyyyyy" in out, out[:400]
    assert peak < 4 * entry, f"peak {peak >> 20} MiB for an entry of {entry >> 20} MiB"


async def test_an_index_counted_once_is_not_counted_again_but_a_changed_one_is(
    tmp_path: Path,
) -> None:
    # A model pages through one output: its index's tail is read at the first inspect only.
    # An index rewritten since (a writer's bug) is counted again, and read around.
    store = local(tmp_path)
    blob_id = await store.store(Content.Text(TEXT))
    index = await store.blob_index(blob_id)
    assert index is not None
    tail = (index.points[-1][1], index.size)
    reads: list[tuple[int, int]] = []
    read_range = store.read_range

    def counted(blob: str, index: BlobIndex, start: int, end: int) -> AsyncGenerator[bytes, None]:
        reads.append((start, end))
        return read_range(blob, index, start, end)

    store.read_range = counted  # pyright: ignore[reportAttributeAccessIssue]
    tool = InspectTool(store, OutputPolicy())
    args = json.dumps({"blob_id": blob_id, "selector": "lines:1-3"})
    answers = [await tool.execute(args)]
    first, reads[:] = list(reads), []
    answers.append(await tool.execute(args))
    assert tail in first
    assert tail not in reads
    path = tmp_path / f"{blob_id}.idx"
    path.write_bytes(
        json.dumps(_rechecked(_tamper(json.loads(path.read_bytes()), "count-near"))).encode()
    )
    reads[:] = []
    answers.append(await tool.execute(args))
    assert tail in reads
    expected = (await _expected("text"))[0]
    assert [a.replace(blob_id, "ID") for a in answers] == [expected] * 3


@pytest.mark.parametrize(
    "content",
    [
        Content.Text(TEXT),
        Content.Text(TEXT.rstrip("\n")),  # no final newline: the last line still counts
        Content.Text(""),
        Content.Text("\n\n\n"),
        Content.Text("é" * 5000 + "\n" + "x\n" * 25),  # a long line, then a few
        Content.Structured(ARRAY),
        Content.Structured([]),
        Content.Structured([1, 2, 3]),
        Content.Structured([*range(25), {"big": "y" * 20_000}]),  # a long last entry
    ],
    ids=["text", "unended", "empty", "newlines", "long-line", "array", "[]", "short", "long"],
)
async def test_the_stores_own_index_counts_as_its_blob(tmp_path: Path, content: Content) -> None:
    # A count the tail belies is read around: the store's own index must never be.
    store = local(tmp_path)
    blob_id = await store.store(content)
    index = await store.blob_index(blob_id)
    assert index is not None
    counted = CountedIndexes()
    out = await inspect_window(
        store, blob_id, "[blob]", parse_selector(None), 5000, counted=counted
    )
    assert out is not None
    assert (blob_id, index) in counted
