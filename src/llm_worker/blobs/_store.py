"""The blob stores, and `externalize`: a tool's result made into what the history carries.

`BlobStore` is the protocol (`store`, `load`, `exists`); `MemoryBlobStore` and `FsBlobStore`
implement it, and `TextStreamStore` lets `inspect` read a text blob in chunks. `externalize`
does the Worker's whole step: promote, store, summarize.

Text is stored and read as UTF-8 with lone surrogates passed through (`surrogatepass`), so any
Python string a tool returns comes back equal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.lowlevel
import anyio.to_thread

from llm_worker.blobs._output import (
    DEFAULT_POLICY,
    BlobId,
    Content,
    InlineOutput,
    OutputPolicy,
    StoredOutput,
    StructuredContent,
    TextContent,
    ToolOutput,
    new_blob_id,
    parse_blob_id,
    promote,
)
from llm_worker.blobs._summaries import cut_summary, summarize
from llm_worker.errors import BlobError, BlobNotFoundError

_log = logging.getLogger("llm_worker.blobs")

__all__ = (
    "BlobStore",
    "FsBlobStore",
    "JsonStreamStore",
    "MemoryBlobStore",
    "TextStreamStore",
    "externalize",
)

# -- stores ------------------------------------------------------------------------------------


@runtime_checkable
class BlobStore(Protocol):
    """Where stored outputs are kept. Implementations validate ids with `parse_blob_id`."""

    async def store(self, content: Content) -> BlobId:
        """Keep `content`; return its new id.

        Raises:
            BlobError: It could not be stored.
        """
        ...

    async def load(self, blob_id: str) -> Content:
        """The content stored under `blob_id`.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobNotFoundError: No blob has this id.
            BlobError: It could not be read.
        """
        ...

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        ...


@runtime_checkable
class TextStreamStore(Protocol):
    """Optional for a store: stream a text blob's bytes.

    `inspect` then reads line ranges without loading the whole text.
    """

    async def stream_text(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of the text blob `blob_id` in chunks.

        Returns `None` when it is not a text blob (a JSON blob, or none).

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        ...


@runtime_checkable
class JsonStreamStore(Protocol):
    """Optional for a store: stream a JSON blob's bytes.

    `inspect` then pages through an array without loading it, however large its entries.
    """

    async def stream_json(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of the JSON blob `blob_id` in chunks.

        Returns `None` when it is not a JSON blob (a text blob, or none).

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        ...


_CHUNK_CHARS = 1 << 20  # characters encoded per write
_CHUNK_BYTES = 1 << 20  # bytes per read


def _encoded(text: str) -> Iterator[bytes]:
    # Chunks keep the peak at the text plus one chunk, not twice the text.
    for start in range(0, len(text), _CHUNK_CHARS):
        yield text[start : start + _CHUNK_CHARS].encode("utf-8", "surrogatepass")


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _snapshot(content: Content) -> TextContent | StructuredContent:
    if isinstance(content, TextContent):
        return content
    if isinstance(content, StructuredContent):
        try:
            # Keep the JSON text, not the value: later changes to the value do not reach the
            # blob. The promotion's scan (the shape) is still valid for that text.
            text, shape = content.json_text, content._shape  # pyright: ignore[reportPrivateUsage]
            return StructuredContent._from_json(text, shape)  # pyright: ignore[reportPrivateUsage]
        except (TypeError, ValueError) as exc:
            raise BlobError(f"the structured content is not JSON: {exc}") from exc
    raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")


class MemoryBlobStore:
    """A blob store in memory, for tests and short-lived programs.

    Structured content is kept as its JSON text, so changing a value after storing it does
    not change the blob, and `load` behaves as with `FsBlobStore`.
    """

    def __init__(self) -> None:
        self._blobs: dict[BlobId, TextContent | StructuredContent] = {}

    def __len__(self) -> int:
        return len(self._blobs)

    def __repr__(self) -> str:
        return f"MemoryBlobStore(<{len(self._blobs)} blobs>)"

    async def store(self, content: Content) -> BlobId:
        """Keep `content`; return its new id."""
        await anyio.lowlevel.checkpoint()
        blob_id = new_blob_id()
        self._blobs[blob_id] = _snapshot(content)
        return blob_id

    async def load(self, blob_id: str) -> Content:
        """The content stored under `blob_id`."""
        key = parse_blob_id(blob_id)
        await anyio.lowlevel.checkpoint()
        try:
            return self._blobs[key]
        except KeyError:
            raise BlobNotFoundError(f"no blob {key}") from None

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id."""
        key = parse_blob_id(blob_id)
        await anyio.lowlevel.checkpoint()
        return key in self._blobs


class FsBlobStore:
    """Blobs as files in one flat folder: `root/{id}.txt` for text, `root/{id}.json` for JSON.

    Independent of sessions: a summary's `[blob:<id>]` is the link. A write goes to a
    temporary file in the same folder (`.{id}.….tmp`), is flushed and fsynced, then renamed
    into place (and the folder fsynced), so a reader never sees a partial blob and a writer
    that dies leaves at most a `.tmp` file, never a partial file under a blob's name. Several
    tasks and several processes may store into one folder at once. All file I/O runs in
    worker threads, off the event loop. The folder is created on the first store.

    Args:
        root: The folder.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        """The folder."""
        return self._root

    def __repr__(self) -> str:
        return f"FsBlobStore({str(self._root)!r})"

    def _path(self, blob_id: BlobId, suffix: str) -> Path:
        return self._root / f"{blob_id}{suffix}"

    async def store(self, content: Content) -> BlobId:
        """Write `content` atomically; return its new id.

        Raises:
            BlobError: The folder or the file could not be written, or the structured
                content is not JSON.
        """
        if not isinstance(content, TextContent | StructuredContent):
            raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")
        blob_id = new_blob_id()
        await anyio.to_thread.run_sync(self._write, blob_id, content)
        return blob_id

    def _write(self, blob_id: BlobId, content: TextContent | StructuredContent) -> None:
        try:
            text = content.text if isinstance(content, TextContent) else content.json_text
        except (TypeError, ValueError) as exc:
            raise BlobError(f"the structured content is not JSON: {exc}") from exc
        suffix = ".txt" if isinstance(content, TextContent) else ".json"
        try:
            self._root.mkdir(parents=True, exist_ok=True)
            _write_atomically(self._path(blob_id, suffix), _encoded(text))
        except OSError as exc:
            raise BlobError(f"could not store blob {blob_id} in {self._root}: {exc}") from exc

    async def load(self, blob_id: str) -> Content:
        """Read the blob `blob_id`.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id (nothing is read).
            BlobNotFoundError: No blob has this id.
            BlobError: It could not be read.
        """
        key = parse_blob_id(blob_id)
        return await anyio.to_thread.run_sync(self._read, key)

    def _read(self, blob_id: BlobId) -> Content:
        for suffix in (".txt", ".json"):
            try:
                data = self._path(blob_id, suffix).read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise BlobError(f"could not read blob {blob_id}: {exc}") from exc
            try:
                text = _decoded(data)
            except UnicodeDecodeError as exc:
                raise BlobError(f"blob {blob_id} is not UTF-8 text: {exc}") from exc
            del data
            if suffix == ".txt":
                return TextContent(text)
            return StructuredContent._from_json(text)  # pyright: ignore[reportPrivateUsage]
        raise BlobNotFoundError(f"no blob {blob_id} in {self._root}")

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        key = parse_blob_id(blob_id)
        return await anyio.to_thread.run_sync(self._exists, key)

    def _exists(self, blob_id: BlobId) -> bool:
        return any(self._path(blob_id, suffix).is_file() for suffix in (".txt", ".json"))

    async def stream_text(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of a text blob in chunks of 1 MiB, or `None` if it is not text.

        The file opens on the first iteration; close the generator when done early
        (`contextlib.aclosing`) and it closes the file.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The file could not be read (raised by the iteration).
        """
        return await self._stream(blob_id, ".txt")

    async def stream_json(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of a JSON blob in chunks of 1 MiB, or `None` if it is not JSON.

        As `stream_text`, for a JSON blob.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The file could not be read (raised by the iteration).
        """
        return await self._stream(blob_id, ".json")

    async def _stream(self, blob_id: str, suffix: str) -> AsyncGenerator[bytes, None] | None:
        key = parse_blob_id(blob_id)
        path = self._path(key, suffix)
        if not await anyio.to_thread.run_sync(path.is_file):
            return None
        return _read_chunks(path, key)


async def _read_chunks(path: Path, blob_id: BlobId) -> AsyncGenerator[bytes, None]:
    # The file opens on the first read, so a generator never started holds no file.
    try:
        file = await anyio.to_thread.run_sync(path.open, "rb")
    except FileNotFoundError:
        raise BlobNotFoundError(f"no blob {blob_id}") from None
    except OSError as exc:
        raise BlobError(f"could not read blob {blob_id}: {exc}") from exc
    try:
        while True:
            try:
                chunk: bytes = await anyio.to_thread.run_sync(file.read, _CHUNK_BYTES)
            except OSError as exc:
                raise BlobError(f"could not read blob {blob_id}: {exc}") from exc
            if not chunk:
                return
            yield chunk
    finally:
        file.close()  # sync: closing a read-only file does not block, and survives cancellation


def _write_atomically(path: Path, chunks: Iterator[bytes]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable (POSIX); Windows cannot open a folder this way.
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the Worker's step -------------------------------------------------------------------------

# Above this many characters, promotion and summaries run in a worker thread: scanning a
# large JSON text takes long enough to stall the event loop.
_THREAD_MIN_CHARS = 1 << 16


async def externalize(
    output: str | ToolOutput,
    store: BlobStore | None,
    policy: OutputPolicy | None = None,
    *,
    inspect: str | None = None,
) -> InlineOutput | StoredOutput:
    """Turn a tool's result into what the history carries.

    Without a store everything stays inline, as if there were no blobs: a string or an
    `Inline` as it is, a `Stored` as its content's text (a `Content.Text`'s text, or a
    `Content.Structured`'s JSON text). With a store, a string is promoted by
    `policy.inline_threshold` (an `Inline` a tool returned stays inline, whatever its size:
    the tool chose); a `Stored` is stored (unless it has a `blob_id` already) and gets the
    automatic summary. A summary the tool wrote is kept, prefixed with `[blob:<id>] ` unless it
    already holds that tag, and cut to `policy.summary_max_bytes`.

    Args:
        output: The tool's result.
        store: The blob store, if any.
        policy: Thresholds and caps (the defaults when `None`).
        inspect: The name of the tool that reads stored outputs back; the automatic summary
            then ends with a line naming it and its `grep:` selector (see `summarize`).

    Returns:
        An `Inline`, or a `Stored` with its `blob_id` and summary.

    Raises:
        BlobError: The content could not be stored.
    """
    policy = policy or DEFAULT_POLICY
    if store is None:
        return _inline(output)
    if isinstance(output, str):
        promoted = await _off_loop(len(output), _promote_with, output, policy)
    elif isinstance(output, InlineOutput | StoredOutput):
        promoted = output
    else:
        raise TypeError(f"not a str or a ToolOutput: {output!r}")
    if isinstance(promoted, InlineOutput):
        return promoted
    blob_id = promoted.blob_id
    if blob_id is None:
        blob_id = await store.store(promoted.content)
        _log.debug("stored a tool output as blob %s", blob_id)
    summary = await _off_loop(_THREAD_MIN_CHARS, _summary, promoted, blob_id, policy, inspect)
    return StoredOutput(summary, promoted.content, blob_id)


async def _off_loop(size: int, func: Any, *args: Any) -> Any:
    if size < _THREAD_MIN_CHARS:
        return func(*args)
    return await anyio.to_thread.run_sync(func, *args)


def _inline(output: str | ToolOutput) -> InlineOutput:
    if isinstance(output, str):
        return InlineOutput(output)
    if isinstance(output, InlineOutput):
        return output
    if isinstance(output, StoredOutput):
        content = output.content
        if isinstance(content, TextContent):
            return InlineOutput(content.text)
        if isinstance(content, StructuredContent):
            return InlineOutput(content.json_text)
    raise TypeError(f"not a str or a ToolOutput: {output!r}")


def _summary(
    output: StoredOutput, blob_id: BlobId, policy: OutputPolicy, inspect: str | None
) -> str:
    if not output.summary:
        return summarize(blob_id, output.content, policy, inspect=inspect)
    tag = f"[blob:{blob_id}]"
    summary = output.summary if tag in output.summary else f"{tag} {output.summary}"
    return cut_summary(summary, policy.summary_max_bytes)


def _promote_with(output: str, policy: OutputPolicy) -> InlineOutput | StoredOutput:
    return promote(output, policy.inline_threshold, policy.array_head)
