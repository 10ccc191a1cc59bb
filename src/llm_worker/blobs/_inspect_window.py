"""`inspect` through a blob's index: a window of lines or entries read with ranged reads.

For an `IndexedBlobStore`, `lines:`, `slice:` and the overview start reading at the index
point just before what they need and stop once the window is full, so a window of a 100 MB
blob fetches a few hundred KiB, not the object. The answers are those of the streamed readers
(`_inspect_text`, `_inspect_json`) byte for byte: the same renderers make them.
"""

from __future__ import annotations

import contextlib

import anyio.to_thread

from llm_worker.blobs._index import BlobIndex, IndexedBlobStore
from llm_worker.blobs._inspect_json import array_selector_error, counted_bounds, render_array
from llm_worker.blobs._inspect_text import inspect_text
from llm_worker.blobs._json_scan import dumps_json, entries_at
from llm_worker.blobs._selectors import (
    RESERVE,
    LinesSelector,
    Selector,
    SliceSelector,
    WholeSelector,
)
from llm_worker.errors import BlobError, ToolError

__all__ = ("inspect_window",)


async def inspect_window(
    store: IndexedBlobStore, blob_id: str, tag: str, selector: Selector, cap: int
) -> str | None:
    """What `selector` reads of blob `blob_id`, read through its index.

    Returns `None` when the index cannot answer (no index, or a selector that reads the whole
    blob such as `grep:` or `key:`): the caller then reads the blob as usual.

    Raises:
        ToolError: A selector of the wrong kind, or entries that are not JSON.
        BlobError: The blob could not be read.
    """
    if not isinstance(selector, LinesSelector | SliceSelector | WholeSelector):
        return None
    index = await store.blob_index(blob_id)
    if index is None:
        return None
    if index.kind == "text":
        if isinstance(selector, SliceSelector):
            return None  # the streamed reader says why slice: does not apply to text
        first = selector.first if isinstance(selector, LinesSelector) else 1
        line, offset = index.point_at(max(first, 1))
        if not await _starts_at(store, blob_id, index, offset, b"\n"):
            return None  # the index does not match the blob: read it the long way
        chunks = store.read_range(blob_id, index, offset, index.size)
        async with contextlib.aclosing(chunks):
            return await inspect_text(
                tag, chunks, selector, cap, start_line=line, total=index.count
            )
    if isinstance(selector, LinesSelector):
        raise array_selector_error(tag, selector)
    return await _array_window(store, blob_id, index, tag=tag, selector=selector, cap=cap)


async def _array_window(
    store: IndexedBlobStore,
    blob_id: str,
    index: BlobIndex,
    *,
    tag: str,
    selector: SliceSelector | WholeSelector,
    cap: int,
) -> str | None:
    count = index.count
    start, stop = counted_bounds(selector, count)
    low, high = min(start, count), min(stop, count)
    need = selector.offset + cap - RESERVE + 1
    parts: list[str] = []
    first: object = None
    size = 0
    for number, begin, end in index.segments(low) if low < high else []:
        if number >= high or size >= need:
            break
        back = 1 if begin > 0 else 0  # the byte before an entry: a comma, `[` or a space
        chunks = [c async for c in store.read_range(blob_id, index, begin - back, end)]
        data = b"".join(chunks)
        if back and (not data or data[0] not in _BEFORE_ENTRY):
            return None  # the index does not match the blob: read it the long way
        try:
            values = await anyio.to_thread.run_sync(_entries, data[back:], blob_id, tag)
        except ToolError:
            return None  # only valid arrays get an index: the index is off, not the blob
        for at, value in enumerate(values, number):
            first = value if at == 0 else first
            if low <= at < high and size < need:
                parts.append(dumps_json(value))
                size += len(parts[-1]) + 1
    complete = len(parts) >= high - low
    return render_array(tag, selector, (start, stop), (count, parts, complete, first), cap)


_BEFORE_ENTRY = b",[ \t\r\n"


async def _starts_at(
    store: IndexedBlobStore, blob_id: str, index: BlobIndex, offset: int, before: bytes
) -> bool:
    """Whether the byte before `offset` is one of `before` (a point starts its line)."""
    if offset == 0:
        return True
    chunks = store.read_range(blob_id, index, offset - 1, offset)
    async with contextlib.aclosing(chunks):
        data = b"".join([chunk async for chunk in chunks])
    return data[:1] != b"" and data[:1] in before


def _entries(data: bytes, blob_id: str, tag: str) -> list[object]:
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise BlobError(f"blob {blob_id} is not UTF-8 text: {exc}") from exc
    try:
        return list(entries_at(text))
    except ValueError as exc:
        raise ToolError(f"{tag} does not hold valid JSON ({exc})") from exc
