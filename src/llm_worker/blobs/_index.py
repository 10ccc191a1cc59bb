"""The index beside a blob: where its lines or array entries start, so a window is a ranged read.

A store that keeps one (`IndexedBlobStore`, e.g. `ObjectBlobStore`) writes it before the blob,
and `inspect` then fetches only the bytes around the lines or entries asked for, not the
whole object. The format (version 2, UTF-8 JSON, documented in docs/internals.md):

    {"format": "llm-worker.blob-index", "version": 2, "kind": "text" | "array",
     "bytes": <blob size>, "count": <lines | entries>, "points": [[number, offset], ...],
     "check": <BLAKE2b-64 of [kind, bytes, count, points], hex>}

For text a point is `[line, offset]`: line `line` (1-based) starts at byte `offset`; for a JSON
array it is `[entry, offset]`: entry `entry` (0-based) starts at byte `offset`. A point is kept
every `every` lines or entries, and sooner when `span` bytes have passed since the last one, so
a window never starts more than about `span` bytes (or one long line) before what it needs.
An index of another format or version, or whose `check` does not match its fields, is ignored:
the reader falls back to a streamed read.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import Any, Literal, Protocol, runtime_checkable

import orjson

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker.blobs._json_scan import POINT_EVERY, POINT_SPAN, array_points

__all__ = (
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "BlobIndex",
    "IndexedBlobStore",
    "array_index",
    "text_index",
)

INDEX_FORMAT = "llm-worker.blob-index"
INDEX_VERSION = 2  # 2: the `check` field (a count short of the real one went unseen)
EVERY = POINT_EVERY  # lines or entries between points
SPAN = POINT_SPAN  # bytes (for arrays: characters) after which a point comes sooner


@dataclass(slots=True, frozen=True)
class BlobIndex:
    """Where the lines of a text blob, or the entries of a JSON array blob, start.

    Attributes:
        kind: `"text"` or `"array"`.
        size: The blob's size in bytes.
        count: Its lines (text) or entries (array).
        points: `(number, offset)` pairs in order: line `number` (1-based) or entry `number`
            (0-based) starts at byte `offset`.
    """

    kind: Literal["text", "array"]
    size: int
    count: int
    points: tuple[tuple[int, int], ...]

    def point_at(self, number: int) -> tuple[int, int]:
        """The last point at or before line / entry `number` (the first point if none)."""
        numbers = [n for n, _ in self.points]
        at = max(bisect.bisect_right(numbers, number) - 1, 0)
        return self.points[at] if self.points else (self._first, 0)

    def segments(self, number: int) -> list[tuple[int, int, int]]:
        """`(first number, start, end)` byte ranges from the point at or before `number` on."""
        if not self.points:
            return []
        numbers = [n for n, _ in self.points]
        at = max(bisect.bisect_right(numbers, number) - 1, 0)
        ends = [offset for _, offset in self.points[at + 1 :]] + [self.size]
        return [(n, start, end) for (n, start), end in zip(self.points[at:], ends, strict=True)]

    @property
    def _first(self) -> int:
        return 1 if self.kind == "text" else 0

    def to_json(self) -> bytes:
        """The index as the versioned JSON document stored beside the blob."""
        points = [list(point) for point in self.points]
        return orjson.dumps(
            {
                "format": INDEX_FORMAT,
                "version": INDEX_VERSION,
                "kind": self.kind,
                "bytes": self.size,
                "count": self.count,
                "points": points,
                "check": _check(self.kind, self.size, self.count, points),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> BlobIndex | None:
        """The index in `data`, or `None` if it is not an index of this format and version.

        Also `None` when its `check` does not match its fields: a torn or edited index (say a
        `count` short of the blob's, which no other test of the fields can see).
        """
        try:
            doc = as_dict(orjson.loads(data))
            if doc.get("format") != INDEX_FORMAT or doc.get("version") != INDEX_VERSION:
                return None
            kind = as_str(doc.get("kind"))
            if kind not in ("text", "array"):
                return None
            raw = as_list(doc.get("points"))
            points = tuple(_point(item) for item in raw)
        except (orjson.JSONDecodeError, ValueError):
            return None
        size, count = as_int(doc.get("bytes")), as_int(doc.get("count"))
        if size is None or count is None or doc.get("check") != _check(kind, size, count, raw):
            return None
        index = cls("text" if kind == "text" else "array", size, count, points)
        return index if index._consistent() else None

    def _consistent(self) -> bool:
        # A torn or tampered index must not steer a ranged read: points in order, inside the
        # blob, starting at its first line or entry, and no further than the count.
        if self.size < 0 or self.count < 0:
            return False
        if not self.points:
            return self.count == 0
        numbers, offsets = [n for n, _ in self.points], [o for _, o in self.points]
        last = max(self.count, 1) if self.kind == "text" else self.count - 1
        first_ok = numbers[0] == self._first and (offsets[0] == 0 or self.kind == "array")
        if not first_ok or offsets[0] < 0 or numbers[-1] > last:
            return False
        ordered = all(a < b for a, b in pairwise(numbers))
        return (
            ordered
            and all(a < b for a, b in pairwise(offsets))
            and (offsets[-1] < self.size or self.size == 0)
        )


def _check(kind: str, size: int, count: int, points: list[Any]) -> str:
    # Not a signature (anyone who can write the index can recompute it): it tells a damaged
    # or hand-edited index from the one the store wrote.
    fields = orjson.dumps([kind, size, count, points])
    return hashlib.blake2b(fields, digest_size=8).hexdigest()


def _point(item: Any) -> tuple[int, int]:
    pair = [as_int(n) for n in as_list(item)]
    if len(pair) != 2 or pair[0] is None or pair[1] is None:
        raise ValueError("a point is [number, offset]")
    return pair[0], pair[1]


@runtime_checkable
class IndexedBlobStore(Protocol):
    """Optional for a store: an index beside each blob and ranged reads of the blob.

    `inspect` then reads a window of lines or entries with a few small reads.
    """

    async def blob_index(self, blob_id: str) -> BlobIndex | None:
        """The index of blob `blob_id`, or `None` when it has none (a JSON object, or none).

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The index could not be read.
        """
        ...

    def read_range(
        self, blob_id: str, index: BlobIndex, start: int, end: int
    ) -> AsyncGenerator[bytes, None]:
        """The blob's bytes from `start` to `end`, in chunks fetched one at a time.

        A reader that stops early (closing the generator) fetches no further chunk.

        Raises:
            BlobError: The blob could not be read (raised by the iteration).
        """
        ...


def text_index(chunks: Iterable[bytes], every: int = EVERY, span: int = SPAN) -> BlobIndex:
    """The index of the UTF-8 text whose bytes are `chunks`."""
    points: list[tuple[int, int]] = [(1, 0)]
    newlines = size = 0
    ends_with_newline = True
    for chunk in chunks:
        # Where each line after a newline starts, counted in C (split, len, accumulate).
        ends = list(accumulate(map(len, chunk.split(b"\n")[:-1])))
        starts = [end + j + 1 for j, end in enumerate(ends)]
        while True:  # the next point: `every` lines on, or the first line `span` bytes on
            last_line, last_start = points[-1]
            by_count = max(last_line + every - newlines - 2, 0)
            by_span = bisect.bisect_left(starts, last_start + span - size)
            j = min(by_count, by_span)
            if j >= len(starts):
                break
            points.append((newlines + j + 2, size + starts[j]))
        newlines += len(starts)
        size += len(chunk)
        if chunk:
            ends_with_newline = chunk.endswith(b"\n")
    if points[-1][1] >= size and len(points) > 1:
        points.pop()  # the "line" after a final newline does not exist
    lines = newlines + (0 if ends_with_newline else 1)
    return BlobIndex("text", size, lines, tuple(points))


def array_index(
    text: str,
    every: int = EVERY,
    span: int = SPAN,
    scanned: tuple[int, list[tuple[int, int]]] | None = None,
) -> BlobIndex:
    """The index of the JSON array `text` (stored as UTF-8; `span` counts characters here).

    `scanned` is what `array_points(text, every, span)` returned, when a scan already ran
    (promotion's, kept on the content's shape): the text is not scanned again.

    Raises:
        ValueError: `text` is not a JSON array.
    """
    count, found = scanned if scanned is not None else array_points(text, every, span)
    if text.isascii():
        return BlobIndex("array", len(text), count, tuple(found))
    points: list[tuple[int, int]] = []
    char = offset = 0
    for number, start in found:  # byte offsets: encode what lies between two points
        offset += len(text[char:start].encode("utf-8", "surrogatepass"))
        char = start
        points.append((number, offset))
    size = offset + len(text[char:].encode("utf-8", "surrogatepass"))
    return BlobIndex("array", size, count, tuple(points))
