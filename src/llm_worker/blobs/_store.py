"""The blob stores, and `externalize`: a tool's result made into what the history carries.

`BlobStore` is the protocol (`store`, `load`, `exists`, `delete`); `SweepableBlobStore`
(`_retention`) adds the retention sweep; `MemoryBlobStore` and `FsBlobStore` implement both,
and `TextStreamStore` lets `inspect` read a text blob in chunks. `externalize` does the
Worker's whole step: promote, store, summarize.

Both stores are content-addressed (`_addressing`): a blob's id is a keyed hash of its content,
so the same output stored twice is one blob, and storing it again makes it young again for
the sweep (`_retention`).

Text is stored and read as UTF-8 with lone surrogates passed through (`surrogatepass`), so any
Python string a tool returns comes back equal.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.lowlevel
import anyio.to_thread

from llm_worker._log import logger
from llm_worker.blobs._addressing import Counted, Kind, check_key, content_id, fs_key, make_key
from llm_worker.blobs._fs_retention import delete_files, sweep_folder
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
    parse_blob_id,
    promote,
)
from llm_worker.blobs._retention import SweepReport, cutoff_of, keep_set
from llm_worker.blobs._summaries import cut_summary, summarize
from llm_worker.errors import BlobError, BlobNotFoundError

_log = logger("llm_worker.blobs")

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
        """Keep `content`; return its id (the shipped stores: the same id for the same content).

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

    async def delete(self, blob_id: str) -> bool:
        """Delete the blob `blob_id` (and what the store keeps beside it); whether it existed.

        Deleting an id that has no blob is not an error. With a content-addressed store,
        every output of the same content shares the blob: delete it only when no saved
        state still names it (`referenced_blob_ids`).

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id (nothing is deleted).
            BlobError: It could not be deleted.
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


def _text_kind(content: TextContent | StructuredContent) -> tuple[str, Kind]:
    if isinstance(content, TextContent):
        return content.text, "text"
    try:
        return content.json_text, "json"
    except (TypeError, ValueError) as exc:
        raise BlobError(f"the structured content is not JSON: {exc}") from exc


def _touch(path: Path, size: int) -> bool:
    # Whether the blob is there whole, made young again. A sweep renames a blob before
    # deleting it, so a blob touched here is either still in place or comes back
    # (`_fs_retention`). A file of another size under the name (cut short by a restore or a
    # copy, emptied by hand) is not the content: it is written anew, never trusted forever.
    try:
        os.utime(path)
        return os.stat(path).st_size == size
    except OSError:
        return False  # absent (or not ours to touch): written anew, the same bytes


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
    not change the blob, and `load` behaves as with `FsBlobStore`. Content-addressed like the
    other stores (a random key per store).

    Args:
        clock: The time a store records, for the sweep (default: `time.time`).
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._blobs: dict[BlobId, TextContent | StructuredContent] = {}
        self._stored: dict[BlobId, float] = {}  # when each was last stored
        self._key = make_key()
        self._clock = clock

    def __len__(self) -> int:
        return len(self._blobs)

    def __repr__(self) -> str:
        return f"MemoryBlobStore(<{len(self._blobs)} blobs>)"

    async def store(self, content: Content) -> BlobId:
        """Keep `content`; return its id (the same for the same content)."""
        await anyio.lowlevel.checkpoint()
        snapshot = _snapshot(content)
        text, kind = _text_kind(snapshot)
        blob_id = await _off_loop(len(text), content_id, self._key, kind, _encoded(text))
        self._blobs.setdefault(blob_id, snapshot)
        self._stored[blob_id] = self._clock()
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

    async def delete(self, blob_id: str) -> bool:
        """Delete the blob `blob_id`; whether it existed."""
        key = parse_blob_id(blob_id)
        await anyio.lowlevel.checkpoint()
        self._stored.pop(key, None)
        return self._blobs.pop(key, None) is not None

    async def sweep(
        self,
        older_than: timedelta,
        *,
        keep: Iterable[str] = (),
        now: datetime | float | None = None,
    ) -> SweepReport:
        """Delete the blobs last stored more than `older_than` ago, except those in `keep`.

        As `SweepableBlobStore.sweep`; `now` defaults to the store's clock.
        """
        cutoff = cutoff_of(older_than, self._clock() if now is None else now)
        kept_ids, deleted, kept = keep_set(keep), list[BlobId](), list[BlobId]()
        await anyio.lowlevel.checkpoint()
        for blob_id, stored in list(self._stored.items()):
            if stored >= cutoff:
                continue
            if blob_id in kept_ids:
                kept.append(blob_id)
            else:
                del self._blobs[blob_id], self._stored[blob_id]
                deleted.append(blob_id)
        return SweepReport(tuple(deleted), tuple(kept))


class FsBlobStore:
    """Blobs as files in one flat folder: `root/{id}.txt` for text, `root/{id}.json` for JSON.

    Independent of sessions: a summary's `[blob:<id>]` is the link. A write goes to a
    temporary file in the same folder (`.{id}.….tmp`), is flushed and fsynced, then renamed
    into place (and the folder fsynced), so a reader never sees a partial blob and a writer
    that dies leaves at most a `.tmp` file (the sweep removes it), never a partial file under
    a blob's name. Several tasks and several processes may store into one folder at once. All
    file I/O runs in worker threads, off the event loop. The folder is created on the first
    store.

    Content-addressed: the id is a keyed hash of the content (`HMAC-SHA256`, shaped as a
    UUID), so the same content is one file, and storing it again only makes the file young
    again (its modification time, which the sweep reads). The key is made on the first store
    and kept in `root/.llm-worker-blob-key` (mode 0600): without it an id cannot be computed
    from a guess of the content. Two processes storing the same content at once both return
    the id of one complete file.

    Args:
        root: The folder.
        id_key: The 32-byte key of the ids, if kept elsewhere (say a secrets manager):
            the folder then holds none. Every store of one folder must use the same key.

    Raises:
        ConfigurationError: `id_key` is not 32 bytes.
    """

    def __init__(self, root: str | os.PathLike[str], *, id_key: bytes | None = None) -> None:
        self._root = Path(root)
        self._key = None if id_key is None else check_key(id_key, "FsBlobStore")

    @property
    def root(self) -> Path:
        """The folder."""
        return self._root

    def __repr__(self) -> str:
        return f"FsBlobStore({str(self._root)!r})"

    def _path(self, blob_id: BlobId, suffix: str) -> Path:
        return self._root / f"{blob_id}{suffix}"

    async def store(self, content: Content) -> BlobId:
        """Write `content` atomically, unless a blob of the same content is there; its id.

        Raises:
            BlobError: The folder, the file or the id key could not be written, or the
                structured content is not JSON.
        """
        if not isinstance(content, TextContent | StructuredContent):
            raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")
        return await anyio.to_thread.run_sync(self._write, content)

    def _write(self, content: TextContent | StructuredContent) -> BlobId:
        text, kind = _text_kind(content)
        if self._key is None:
            self._key = fs_key(self._root)
        chunks = Counted(_encoded(text))
        blob_id = content_id(self._key, kind, chunks)
        path = self._path(blob_id, ".txt" if kind == "text" else ".json")
        if _touch(path, chunks.size):
            return blob_id  # stored before: the same bytes, young again
        try:
            self._root.mkdir(parents=True, exist_ok=True)
            _write_atomically(path, _encoded(text))
        except OSError as exc:
            raise BlobError(f"could not store blob {blob_id} in {self._root}: {exc}") from exc
        return blob_id

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

    async def delete(self, blob_id: str) -> bool:
        """Delete the blob `blob_id`'s file; whether there was one.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id (nothing is deleted).
            BlobError: The file could not be deleted.
        """
        key = parse_blob_id(blob_id)
        return await anyio.to_thread.run_sync(delete_files, self._root, key)

    async def sweep(
        self,
        older_than: timedelta,
        *,
        keep: Iterable[str] = (),
        now: datetime | float | None = None,
    ) -> SweepReport:
        """Delete the blobs last stored more than `older_than` ago, except those in `keep`.

        A blob's age is its file's modification time (storing the content again sets it).
        Temporary files of writers that died go too once older than `older_than`. Safe
        beside stores and other sweeps in any process: a blob stored again while the sweep
        runs stays (see `_fs_retention`). As `SweepableBlobStore.sweep`.
        """
        cutoff, kept = cutoff_of(older_than, now), keep_set(keep)
        return await anyio.to_thread.run_sync(sweep_folder, self._root, cutoff, kept)

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
