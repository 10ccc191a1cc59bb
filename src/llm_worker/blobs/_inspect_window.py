"""`inspect` through a blob's index: a window of lines or entries read with ranged reads.

For an `IndexedBlobStore`, `lines:`, `slice:` and the overview start reading at the index
point just before what they need and stop once the window is full, so a window of a 100 MB
blob fetches a few hundred KiB, not the object. The answers are those of the streamed readers
(`_inspect_text`, `_inspect_json`) byte for byte: the same renderers make them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, TypeVar

import anyio.from_thread
import anyio.to_thread

from llm_worker._log import logger
from llm_worker.blobs._index import BlobIndex, IndexedBlobStore
from llm_worker.blobs._inspect_json import (
    Pull,
    array_selector_error,
    counted_bounds,
    page_array,
)
from llm_worker.blobs._inspect_text import inspect_text
from llm_worker.blobs._json_pager import page_entries
from llm_worker.blobs._json_scan import NotJson
from llm_worker.blobs._selectors import (
    LinesSelector,
    Selector,
    SliceSelector,
    WholeSelector,
)
from llm_worker.blobs._store import JsonStreamStore
from llm_worker.errors import BlobError, ToolError

__all__ = ("CountedIndexes", "inspect_array_stream", "inspect_window")

_log = logger("llm_worker.blobs")


class CountedIndexes:
    """The indexes whose count was checked against their blob, by blob id (the latest few).

    A blob never changes under its id (content addressed), so an index read again that is
    the one already counted needs no second count: a model paging through one output calls
    `inspect` again and again. An index written anew is counted again.
    """

    __slots__ = ("_counted",)

    def __init__(self) -> None:
        self._counted: OrderedDict[str, bytes] = OrderedDict()

    def __contains__(self, item: tuple[str, BlobIndex]) -> bool:
        blob_id, index = item
        return self._counted.get(blob_id) == _fingerprint(index)

    def add(self, blob_id: str, index: BlobIndex) -> None:
        """Remember `index` of `blob_id` as counted."""
        self._counted[blob_id] = _fingerprint(index)
        self._counted.move_to_end(blob_id)
        while len(self._counted) > _COUNTED:
            self._counted.popitem(last=False)


_COUNTED = 64  # blobs: a fingerprint each (16 bytes)


def _fingerprint(index: BlobIndex) -> bytes:
    return hashlib.blake2b(index.to_json(), digest_size=16).digest()


async def inspect_window(
    store: IndexedBlobStore,
    blob_id: str,
    tag: str,
    selector: Selector,
    cap: int,
    *,
    counted: CountedIndexes | None = None,
) -> str | None:
    """What `selector` reads of blob `blob_id`, read through its index.

    Returns `None` when the index cannot answer (no index, a selector that reads the whole
    blob such as `grep:` or `key:`, or an index the blob belies): the caller then reads the
    blob as usual. `counted`: the indexes whose count was checked already.

    Raises:
        ToolError: A selector of the wrong kind, or entries that are not JSON.
        BlobError: The blob could not be read.
    """
    if not isinstance(selector, LinesSelector | SliceSelector | WholeSelector):
        return None
    index = await store.blob_index(blob_id)
    if index is None or not await _count_holds(store, blob_id, index, counted):
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
    start, _ = counted_bounds(selector, index.count)
    number, begin = index.point_at(min(start, index.count))
    if not await _starts_at(store, blob_id, index, begin, _BEFORE_ENTRY):
        return None  # the index does not match the blob: read it the long way
    streams = _Streams(lambda: _opened(store.read_range(blob_id, index, begin, index.size)))
    try:
        at = (number if begin else None, index.count)  # no points: read from the `[`
        return await streams.run(page_array, tag, selector, cap, at=at)
    except NotJson:
        return None  # only valid arrays get an index: the index is off, not the blob
    finally:
        await streams.aclose()


async def inspect_array_stream(
    store: JsonStreamStore, blob_id: str, tag: str, selector: Selector, cap: int
) -> str | None:
    """What a `slice:` selector or none reads of a JSON array blob, streamed from the store.

    Returns `None` when the blob is not a JSON array (an object, a scalar, a text blob) or the
    selector reads something else: the caller then reads the blob as usual.

    Raises:
        ToolError: The blob is not valid JSON.
        BlobError: The blob could not be read.
    """
    if not isinstance(selector, SliceSelector | WholeSelector):
        return None
    stream = await store.stream_json(blob_id)
    if stream is None:
        return None
    streams = _Streams(lambda: store.stream_json(blob_id))
    try:
        first = await _next(stream)
        streams.pending.append(_prepend(first or b"", stream))
        if (first or b"").lstrip()[:1] != b"[":
            return None  # an object or a scalar (or a blob starting with spaces): read whole
        return await streams.run(page_array, tag, selector, cap)
    except NotJson as exc:
        raise ToolError(f"{tag} does not hold valid JSON ({exc})") from exc
    finally:
        await stream.aclose()
        await streams.aclose()


Chunks = AsyncGenerator[bytes, None]
_T = TypeVar("_T")


class _Streams:
    """Streams a worker thread reads chunk by chunk (`source`), all closed by `aclose`."""

    def __init__(self, open_stream: Callable[[], Coroutine[Any, Any, Chunks | None]]) -> None:
        self._open = open_stream
        self.pending: list[Chunks] = []
        self._opened: list[Chunks] = []

    async def run(self, func: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """`func(*args, source, **kwargs)` in a worker thread (`source` placed after `args`)."""
        call = functools.partial(func, *args, self.source, **kwargs)
        return await anyio.to_thread.run_sync(call)

    def source(self) -> Pull:
        """A new stream's next chunk (`None` at its end); called in the worker thread."""
        stream = self.pending.pop() if self.pending else _from_thread(self._open)
        if stream is None:
            raise BlobError("the blob went away while it was read")
        self._opened.append(stream)
        return lambda: _from_thread(_next, stream)

    async def aclose(self) -> None:
        """Close every stream opened."""
        for stream in [*self.pending, *self._opened]:
            await stream.aclose()


def _from_thread(func: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
    # A coroutine started from the thread joins the host task's cancel scope; started once that
    # scope is cancelled, it waits for a cancellation never delivered (and the host waits for
    # the thread): the thread stops at the cancellation instead, and each read is shielded.
    anyio.from_thread.check_cancelled()
    return anyio.from_thread.run(_shielded, func, *args)


async def _shielded(func: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
    result: list[_T] = []  # typed, a CancelScope may swallow exceptions (a shield never does)
    with anyio.CancelScope(shield=True):
        result.append(await func(*args))
    return result[0]


async def _opened(stream: Chunks) -> Chunks:
    return stream


async def _next(stream: Chunks) -> bytes | None:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None


async def _prepend(first: bytes, rest: Chunks) -> Chunks:
    yield first
    async with contextlib.aclosing(rest):
        async for chunk in rest:
            yield chunk


_BEFORE_ENTRY = b",[ \t\r\n"


async def _count_holds(
    store: IndexedBlobStore, blob_id: str, index: BlobIndex, counted: CountedIndexes | None
) -> bool:
    """Whether the blob holds the lines or entries `index.count` says.

    The index's `check` covers only its own fields, and a count short of the blob's yet
    past the last point fits every other test: the tail after the last point is counted
    (at most about `SPAN` bytes or `EVERY` lines or entries, or one long one), once per
    index read (`counted`).
    """
    if counted is not None and (blob_id, index) in counted:
        return True
    found = await (_text_tail if index.kind == "text" else _array_tail)(store, blob_id, index)
    if found != index.count:
        _log.warning("the index of blob %s does not count its blob: it is read whole", blob_id)
        return False
    if counted is not None:
        counted.add(blob_id, index)
    return True


async def _text_tail(store: IndexedBlobStore, blob_id: str, index: BlobIndex) -> int:
    """The blob's lines, counted from the index's last point (a final newline ends a line)."""
    line, offset = index.points[-1] if index.points else (1, 0)
    newlines, last = 0, b"\n"
    chunks = store.read_range(blob_id, index, offset, index.size)
    async with contextlib.aclosing(chunks):
        async for chunk in chunks:
            newlines += chunk.count(b"\n")
            last = chunk[-1:] or last
    return line - 1 + newlines + (0 if last == b"\n" else 1)


async def _array_tail(store: IndexedBlobStore, blob_id: str, index: BlobIndex) -> int | None:
    """The array's entries, counted from the index's last point; `None` if they do not parse."""
    number, offset = index.points[-1] if index.points else (None, 0)
    streams = _Streams(lambda: _opened(store.read_range(blob_id, index, offset, index.size)))
    try:
        return await streams.run(_entries_from, number)
    except NotJson:
        return None
    finally:
        await streams.aclose()


def _entries_from(number: int | None, source: Callable[[], Pull]) -> int:
    """The number after the last entry of the stream (read from entry `number`, or the `[`)."""
    paged = page_entries(source(), number=number, bounds=(0, 0), window=(0, 0), to_the_end=True)
    return paged.count


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
