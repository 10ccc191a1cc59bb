"""`inspect` on a text blob: a line range found by counting newlines in a stream of bytes.

Nothing outside the range is decoded; the window kept is bounded by the output cap, so a
100 MB text is read in constant memory.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

import anyio.lowlevel
import anyio.to_thread

from llm_worker.blobs._grep import MAX_LINE, Grep, render_grep
from llm_worker.blobs._selectors import (
    RESERVE,
    Body,
    GrepSelector,
    KeySelector,
    LinesSelector,
    Selector,
    SliceSelector,
    WholeSelector,
    render,
)
from llm_worker.errors import ToolError

__all__ = ("inspect_text", "str_chunks")


@dataclass(slots=True)
class _LineScan:
    total: int = 0  # lines in the whole text
    window: bytearray = field(default_factory=bytearray)  # from line `first` on
    complete: bool = False  # the window reaches the end of line `last` (or of the text)


def _after_newline(data: bytes, nth: int, start: int = 0) -> int:
    """The index just after the `nth` (1-based) newline of `data` at or after `start`."""
    pos = start
    for _ in range(nth):
        pos = data.index(b"\n", pos) + 1
    return pos


class _LineScanner:
    """Feeds chunks of UTF-8 bytes, keeps the bytes of lines `first`..`last` (at most `limit`)."""

    def __init__(self, first: int, last: int | None, limit: int, seen: int = 0) -> None:
        self.first, self.limit = first, limit
        self.want = None if last is None else last - first + 1  # newlines that end the range
        self.taken = 0  # newlines inside the window
        self.seen = seen  # newlines before the current chunk
        self.state: Literal["seek", "take", "done"] = "seek" if first > seen + 1 else "take"
        self.scan = _LineScan()
        self.ends_with_newline = True

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        count = chunk.count(b"\n")
        start = 0
        if self.state == "seek" and self.seen + count >= self.first - 1:
            start = _after_newline(chunk, self.first - 1 - self.seen)
            self.state = "take"
        if self.state == "take":
            self._take(chunk, start)
        self.seen += count
        self.ends_with_newline = chunk.endswith(b"\n")

    def _take(self, chunk: bytes, start: int) -> None:
        window = self.scan.window
        end = len(chunk)
        if self.want is not None:
            count = chunk.count(b"\n", start)
            if self.taken + count >= self.want:
                end = _after_newline(chunk, self.want - self.taken, start) - 1
                self.state, self.scan.complete = "done", True
            else:
                self.taken += count
        window += chunk[start:end]
        if len(window) > self.limit:
            del window[self.limit :]
            self.state, self.scan.complete = "done", False

    def finish(self, total: int | None = None) -> _LineScan:
        if self.state == "take":  # the range runs to the end of the text
            self.scan.complete = True
            if self.scan.window.endswith(b"\n"):  # it ends the last line; it is not a line
                del self.scan.window[-1:]
        counted = self.seen + (0 if self.ends_with_newline else 1)
        self.scan.total = counted if total is None else total
        return self.scan


async def str_chunks(text: str) -> AsyncIterator[bytes]:
    """`text` as UTF-8 bytes (lone surrogates passed through), 1 MiB at a time."""
    step = 1 << 20
    for start in range(0, len(text), step):
        yield text[start : start + step].encode("utf-8", "surrogatepass")
        await anyio.lowlevel.checkpoint()


def _decode(window: bytearray, final: bool) -> str:
    return codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(window), final)


def _line_notes(selector: LinesSelector, total: int) -> tuple[int, int, list[str]]:
    first = max(selector.first, 1)
    last = total if selector.last is None else min(selector.last, total)
    notes: list[str] = []
    if selector.first < 1:
        notes.append("Line numbers start at 1: shown from line 1.")
    if total == 0:
        notes.append("The text is empty (0 lines).")
    elif first > total:
        notes.append(f"Line {first} is past the end: the text has {total} lines (lines:1-{total}).")
    elif selector.last is not None and selector.last > total:
        notes.append(f"The text has {total} lines: the range is clamped to lines {first}-{total}.")
    return first, last, notes


class _Lines:
    """Splits chunks of UTF-8 bytes into numbered lines, each kept to at most `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0  # lines completed so far
        self.current = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        pieces = chunk.split(b"\n")
        out: list[tuple[str, str]] = []
        for piece in pieces[:-1]:
            out.append(self._line(piece))
        self._add(pieces[-1])
        return out

    def finish(self) -> list[tuple[str, str]]:
        return [self._line(b"")] if self.current else []

    def _add(self, piece: bytes) -> None:
        room = self.limit - len(self.current)
        if room > 0:
            self.current += piece[:room]

    def _line(self, piece: bytes) -> tuple[str, str]:
        self._add(piece)
        text = bytes(self.current).decode("utf-8", "replace").removesuffix("\r")
        self.current.clear()
        self.count += 1
        return str(self.count), text


async def _grep_text(
    tag: str, chunks: AsyncIterator[bytes], selector: GrepSelector, cap: int
) -> str:
    grep = Grep(selector, selector.offset + cap - RESERVE + 1)
    lines = _Lines(4 * MAX_LINE + 4)
    async for chunk in chunks:
        batch = lines.feed(chunk)
        if batch and not grep.out_of_time:  # matching may take a while: off the event loop
            await anyio.to_thread.run_sync(grep.feed_all, batch)
    grep.feed_all(lines.finish())
    units = ("line", "lines", "line number: line")
    return render_grep(f"{tag} text | {lines.count} lines", grep, units, cap)


async def inspect_text(
    tag: str,
    chunks: AsyncIterator[bytes],
    selector: Selector,
    cap: int,
    *,
    start_line: int = 1,
    total: int | None = None,
) -> str:
    """What `selector` reads of the text in `chunks`, at most `cap` characters.

    `chunks` may start at the beginning of line `start_line` rather than of the text (a point
    of the blob's index); with the text's line count `total` known, reading stops as soon as
    the window is complete.

    Raises:
        ToolError: A selector for JSON, or a grep pattern that is not a regular expression.
    """
    if isinstance(selector, GrepSelector):
        return await _grep_text(tag, chunks, selector, cap)
    if isinstance(selector, SliceSelector | KeySelector):
        kind = "slice:" if isinstance(selector, SliceSelector) else "key:"
        raise ToolError(f"{tag} is text: {kind} selects in JSON; select lines, e.g. lines:1-50")
    lines = (
        selector if isinstance(selector, LinesSelector) else LinesSelector(1, None, selector.offset)
    )
    budget = cap - RESERVE
    limit = 4 * (lines.offset + budget + 1) + 4
    scanner = _LineScanner(max(lines.first, 1), lines.last, limit, start_line - 1)
    async for chunk in chunks:
        scanner.feed(chunk)
        if total is not None and scanner.state == "done":
            break
    scan = scanner.finish(total)
    first, last, notes = _line_notes(lines, scan.total)
    text = _decode(scan.window, scan.complete) if first <= last else ""
    whole = isinstance(selector, WholeSelector)
    end = f"{last}" if lines.last is not None or whole else ""
    body = Body(
        f"lines {first}-{last}" if first <= last else "lines",
        text,
        scan.complete or first > last,
        first,
        "line",
        page=(lambda n: f"@{n}") if whole else (lambda n: f"lines:{first}-{end}@{n}"),
        resume=lambda k: f"lines:{k}-{end}",
        notes=notes,
    )
    return render(f"{tag} text | {scan.total} lines", body, lines.offset, budget, cap)
