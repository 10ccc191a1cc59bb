"""`ObjectBlobStore`: blobs in S3, GCS, Azure Blob Storage or local files, through obstore.

Layout under the store's prefix: `{id}.txt` or `{id}.json` (the bytes `FsBlobStore` writes);
for text and JSON arrays, `{id}.idx` (the index, `_index`); `{id}.seen` once the content was
stored again (`_object_retention`); and `.llm-worker-blob-key`, the key of the ids
(`_addressing`). The index is written first and the blob last: the blob's object appearing is
the commit. A large blob goes up as a multipart upload, which the store makes visible only once
complete, so a reader never sees half a blob; a small one as one conditional put
(`mode="create"`). Ids are content-addressed: two machines storing the same content at once
write the same bytes under the same name, and either write is the blob. obstore is imported
through `require_extra` (`llm-worker[obstore]`), never at `import llm_worker`.

Errors of the store become `BlobError`s that name what went wrong without the store's own
message: an S3 error body can echo the access key id.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from llm_worker._extras import require_extra
from llm_worker._log import logger
from llm_worker.blobs._addressing import KEY_NAME, Counted, check_key, content_id, make_key
from llm_worker.blobs._index import BlobIndex, array_index, text_index
from llm_worker.blobs._json_scan import POINT_EVERY, json_kind
from llm_worker.blobs._object_errors import (
    first_line,
    public_url,
    raise_if_no_container,
    redact,
    translate,
    url_secrets,
    withhold,
)
from llm_worker.blobs._object_retention import (
    BLOB_SUFFIXES,
    Group,
    each_at_once,
    group_listing,
    plan,
)
from llm_worker.blobs._output import (
    BlobId,
    Content,
    StructuredContent,
    TextContent,
    parse_blob_id,
)
from llm_worker.blobs._retention import SweepReport, cutoff_of, keep_set
from llm_worker.errors import (
    BlobError,
    BlobNotFoundError,
    ConfigurationError,
)

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ("ObjectBlobStore",)

_log = logger("llm_worker.blobs")

_MiB = 1 << 20
_SMALL = _MiB  # characters: up to this, one conditional put; above, a multipart upload
_CHUNK_CHARS = _MiB  # characters encoded per piece handed to the upload
_READ_CHUNK = 1 << 18  # bytes per ranged read of a window
_SUFFIX = {"text": ".txt", "array": ".json"}


def _obstore() -> Any:
    return require_extra("obstore", "obstore", feature="ObjectBlobStore")


class ObjectBlobStore:
    """Blobs in an object store (S3, GCS, Azure, local files, memory) through obstore.

    Every machine that opens the same bucket and prefix reads the same blobs: a blob stored by
    a tool on one machine can be inspected on another. Same ids, same bytes and same summaries
    as `FsBlobStore`. `inspect` reads windows of large blobs through an index stored beside
    each one (`{id}.idx`), with ranged reads. Needs the `llm-worker[obstore]` extra, and an
    asyncio event loop (obstore's async client runs on asyncio, not trio).

    Args:
        store: An obstore store (`obstore.store.S3Store`, `LocalStore`, …); its prefix is the
            folder of the blobs.
        part_size: Bytes per part of a multipart upload (S3 needs at least 5 MiB).
        max_concurrency: Parts uploaded at once; each holds `part_size` bytes in memory.
        where: How the store is named in `repr` and errors (default: the store's own repr).
        index_every: Lines or entries between two points of a blob's index.
        id_key: The 32-byte key of the content ids, if kept elsewhere (a secrets manager);
            by default the first store makes one and keeps it beside the blobs
            (`.llm-worker-blob-key`). Every store of one prefix must use the same key.

    Content-addressed: the same content stored twice is one blob (see `FsBlobStore`); storing
    it again uploads nothing but an empty `{id}.seen`, which makes the blob young for `sweep`.

    Raises:
        MissingExtraError: obstore is not installed.
        ConfigurationError: `part_size`, `max_concurrency` or `index_every` is not an int >= 1,
            or `id_key` is not 32 bytes.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        part_size: int = 5 * _MiB,
        max_concurrency: int = 2,
        where: str | None = None,
        index_every: int = 1000,
        id_key: bytes | None = None,
    ) -> None:
        settings: dict[str, object] = {
            "part_size": part_size,
            "max_concurrency": max_concurrency,
            "index_every": index_every,
        }
        for name, value in settings.items():  # index_every <= 0: the index's loop never ends
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"ObjectBlobStore: {name} must be an int >= 1: {value!r}")
        self._obs = _obstore()
        self._store = store
        self._part_size, self._concurrency = part_size, max_concurrency
        self._where = where if where is not None else repr(store)
        self._every = index_every
        self._key = None if id_key is None else check_key(id_key, "ObjectBlobStore")

    @classmethod
    def from_url(
        cls, url: str, *, index_every: int = 1000, id_key: bytes | None = None, **options: Any
    ) -> ObjectBlobStore:
        """Open the store at `url` (`s3://bucket/prefix`, `gs://…`, `az://…`, `file:///…`).

        Args:
            url: Where the blobs go; its path is the prefix of every blob.
            index_every: Lines or entries between two points of a blob's index.
            id_key: The key of the content ids (see the class).
            **options: Passed to obstore's `from_url`: `endpoint`, `region`,
                `access_key_id`, `secret_access_key`, `client_options={"allow_http": True}`,
                `retry_config`, `mkdir=True` (local files), … Credentials left out come from
                each cloud's usual environment and config files.

        Raises:
            MissingExtraError: obstore is not installed.
            ConfigurationError: obstore refused the URL or an option (the message never
                holds an option's value), `index_every` is not an int >= 1, or `id_key`
                is not 32 bytes.
        """
        store_module = require_extra("obstore.store", "obstore", feature="ObjectBlobStore")
        where = public_url(url)
        try:
            store = store_module.from_url(url, **options)
        except Exception as exc:
            detail = first_line(str(exc))
        else:
            return cls(store, where=where, index_every=index_every, id_key=id_key)
        # Raised outside the `except`: obstore's error (it may echo the URL) is not chained.
        secrets = {"options": options, "url": url_secrets(url)}
        detail = redact(detail.replace(url, where), secrets)
        raise ConfigurationError(f"cannot open the object store {where}: {detail}")

    def __repr__(self) -> str:
        return f"ObjectBlobStore({self._where!r})"

    async def store(self, content: Content) -> BlobId:
        """Upload `content` (and its index) unless the same content is stored; its id.

        Returns once the blob is visible. When it is there already, only an empty
        `{id}.seen` is put, which makes the blob young again for `sweep`.

        Raises:
            BlobError: It could not be stored (a typed subclass says why), or the structured
                content is not JSON.
        """
        text, suffix = _text_of(content)
        key = await self._id_key()
        kind = "text" if suffix == ".txt" else "json"
        pieces = Counted(_pieces_of(text))
        blob_id = await anyio.to_thread.run_sync(content_id, key, kind, pieces)
        found = await self._size(blob_id, suffix)
        if found == pieces.size and await self._seen_again(blob_id, suffix, pieces.size):
            return blob_id
        # Absent, or an object of another size (damaged): written (over it) whole.
        replace = found is not None
        scanned = _scanned(content) if self._every == POINT_EVERY else None
        index = await anyio.to_thread.run_sync(_index_of, text, suffix, self._every, scanned)
        try:
            if index is not None:  # overwritten, not created: a twin writer's is the same
                await self._put(f"{blob_id}.idx", index.to_json(), blob_id, mode="overwrite")
            await self._put_text(f"{blob_id}{suffix}", text, blob_id, replace=replace)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._drop_index(blob_id, suffix, index is not None)
            raise
        # Cancelled once the blob is up: it stays. Its id is its content's, so the next store
        # of that content finds it, and a sweep deletes it when it is old.
        return blob_id

    async def _seen_again(self, blob_id: BlobId, suffix: str, size: int) -> bool:
        # The blob is there whole: marked young, and looked up again after the mark (a sweep
        # that deleted it in between would leave an id with no blob).
        await self._put(f"{blob_id}.seen", b"", blob_id, mode="overwrite")
        return await self._size(blob_id, suffix) == size

    async def _has(self, blob_id: BlobId, suffix: str) -> bool:
        return await self._size(blob_id, suffix) is not None

    async def _size(self, blob_id: BlobId, suffix: str) -> int | None:
        # The size of the blob's object, or None when there is none.
        try:
            meta = await self._obs.head_async(self._store, f"{blob_id}{suffix}")
        except FileNotFoundError as exc:
            raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise translate(exc, f"could not look up blob {blob_id}") from None
        return int(meta["size"])

    async def _drop_index(self, blob_id: BlobId, suffix: str, indexed: bool) -> None:
        # A failed or cancelled store: its index goes unless the blob is up (a twin writer's,
        # or this one's, complete). If the store fails here too, the index is an orphan that
        # `sweep` removes once old.
        if not indexed:
            return
        with contextlib.suppress(Exception):
            if not await self._has(blob_id, suffix):
                await self._obs.delete_async(self._store, f"{blob_id}.idx")

    async def _id_key(self) -> bytes:
        if self._key is None:
            self._key = await self._load_key()
        return self._key

    async def _load_key(self) -> bytes:
        # Made by the first store of the prefix (a conditional put: two makers agree on one).
        for _ in range(2):
            try:
                result = await self._obs.get_async(self._store, KEY_NAME)
                return _check_stored_key(bytes(await result.bytes_async()), self._where)
            except FileNotFoundError as exc:
                raise_if_no_container(exc, self._where)
            except Exception as exc:
                if isinstance(exc, BlobError):
                    raise
                doing = f"could not store blob in {self._where}: reading its id key"
                raise translate(exc, doing) from None
            try:
                await self._obs.put_async(self._store, KEY_NAME, make_key(), mode="create")
            except Exception as exc:
                errors: Any = self._obs.exceptions  # a twin maker won: read its key
                if not isinstance(exc, errors.AlreadyExistsError | errors.PreconditionError):
                    doing = f"could not store blob in {self._where}: making its id key"
                    raise translate(exc, doing) from None
        raise BlobError(f"the id key of {self._where} could not be read after it was made")

    async def _put_text(self, path: str, text: str, blob_id: BlobId, *, replace: bool) -> None:
        if len(text) <= _SMALL:
            mode = "overwrite" if replace else "create"
            await self._put(path, text.encode("utf-8", "surrogatepass"), blob_id, mode=mode)
            return
        halt, done, failed = anyio.Event(), anyio.Event(), list[Exception]()

        async def upload() -> None:
            # Shielded: a dropped upload future leaves its multipart upload open in the
            # bucket. On cancel the pieces stop instead, and obstore aborts the upload.
            with anyio.CancelScope(shield=True):
                try:
                    await self._obs.put_async(
                        self._store,
                        path,
                        _pieces(text, halt),
                        chunk_size=self._part_size,
                        max_concurrency=self._concurrency,
                    )
                except Exception as exc:
                    failed.append(exc)
                finally:
                    done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(upload)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                halt.set()
                with anyio.CancelScope(shield=True):
                    await done.wait()  # the parts in flight, then obstore's abort
                raise
        if failed:
            raise translate(failed[0], f"could not store blob {blob_id} in {self._where}")

    async def _put(self, path: str, data: bytes, blob_id: BlobId, *, mode: str = "create") -> None:
        try:
            await self._obs.put_async(self._store, path, data, mode=mode)
        except Exception as exc:
            errors: Any = self._obs.exceptions
            if isinstance(exc, errors.AlreadyExistsError | errors.PreconditionError):
                return  # a twin writer stored the same content first: the same bytes
            raise translate(exc, f"could not store blob {blob_id} in {self._where}") from None

    async def load(self, blob_id: str) -> Content:
        """Download the blob `blob_id`.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id (nothing is read).
            BlobNotFoundError: No blob has this id.
            BlobError: It could not be read (a typed subclass says why).
        """
        key = parse_blob_id(blob_id)
        for suffix in (".txt", ".json"):
            data = await self._get(key, suffix)
            if data is None:
                continue
            text = await anyio.to_thread.run_sync(_decode, data, key)
            del data
            if suffix == ".txt":
                return TextContent(text)
            return StructuredContent._from_json(text)  # pyright: ignore[reportPrivateUsage]
        raise BlobNotFoundError(f"no blob {key} in {self._where}")

    async def _get(self, key: BlobId, suffix: str) -> Any:
        try:
            result = await self._obs.get_async(self._store, f"{key}{suffix}")
            return await result.bytes_async()
        except FileNotFoundError as exc:
            raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise translate(exc, f"could not read blob {key}") from None

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The store could not be asked (a typed subclass says why).
        """
        key = parse_blob_id(blob_id)
        for suffix in BLOB_SUFFIXES:
            if await self._has(key, suffix):
                return True
        return False

    async def delete(self, blob_id: str) -> bool:
        """Delete the blob `blob_id`, then its index and mark; whether the blob existed.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id (nothing is deleted).
            BlobError: The store failed (a typed subclass says why).
        """
        key = parse_blob_id(blob_id)
        existed = await self.exists(key)
        # The blob first: an index or mark left by a failure here is an orphan the sweep removes.
        for suffix in (*BLOB_SUFFIXES, ".idx", ".seen"):
            await self._delete(f"{key}{suffix}", key)
        return existed

    async def _delete(self, path: str, blob_id: BlobId) -> None:
        try:
            await self._obs.delete_async(self._store, path)
        except FileNotFoundError as exc:
            raise_if_no_container(exc, self._where)
        except Exception as exc:
            raise translate(exc, f"could not delete blob {blob_id}") from None

    async def sweep(
        self,
        older_than: timedelta,
        *,
        keep: Iterable[str] = (),
        now: datetime | float | None = None,
    ) -> SweepReport:
        """Delete the blobs last stored more than `older_than` ago, except those in `keep`.

        A blob's age counts from the newest of its objects (`{id}.seen` is put each time the
        content is stored again). Indexes and marks without a blob (a writer that failed
        through its cleanup) older than `older_than` go too. Multipart uploads a failed
        writer could not abort are not listed by obstore: give the bucket a lifecycle rule
        (S3 `AbortIncompleteMultipartUpload`, docs/blobs.md). As `SweepableBlobStore.sweep`.

        Raises:
            ConfigurationError: `older_than` is not a `timedelta` >= 0, or `now` not a time.
            InvalidBlobIdError: An id in `keep` is not a blob id.
            BlobError: The store could not be listed or an object not deleted.
        """
        cutoff, kept_ids = cutoff_of(older_than, now), keep_set(keep)
        groups: dict[BlobId, Group] = {}
        try:
            async for page in self._obs.list(self._store, chunk_size=1000):
                group_listing(list(page), groups)
        except Exception as exc:
            raise translate(exc, f"could not list {self._where}") from None
        doomed, kept, orphans = plan(groups, cutoff, kept_ids)

        async def retire(blob_id: BlobId) -> bool:
            return await self._retire(blob_id, groups[blob_id].names, cutoff)

        retired = await each_at_once(doomed, retire)
        deleted = [blob_id for blob_id, gone in zip(doomed, retired, strict=True) if gone]
        if orphans:
            await self._delete_all(orphans, "orphans")
        return SweepReport(tuple(deleted), tuple(kept), len(orphans))

    async def _retire(self, blob_id: BlobId, names: list[str], cutoff: float) -> bool:
        # Stored again since the listing: the mark is young, and the blob stays. Otherwise
        # the objects the listing named go in one request (S3: DeleteObjects), the blob
        # first, and the mark if one was put since.
        try:
            meta = await self._obs.head_async(self._store, f"{blob_id}.seen")
        except FileNotFoundError:
            meta = None
        except Exception as exc:
            raise translate(exc, f"could not look up blob {blob_id}") from None
        if meta is not None and meta["last_modified"].timestamp() >= cutoff:
            return False
        paths = sorted(names, key=lambda name: not name.endswith(BLOB_SUFFIXES))
        if meta is not None and f"{blob_id}.seen" not in paths:
            paths.append(f"{blob_id}.seen")
        await self._delete_all(paths, f"blob {blob_id}")
        return True

    async def _delete_all(self, paths: list[str], what: str) -> None:
        try:
            await self._obs.delete_async(self._store, paths)
        except FileNotFoundError as exc:
            # A local store refuses a missing path (another sweep took it): one by one.
            raise_if_no_container(exc, self._where)
            for path in paths:
                await self._delete(path, parse_blob_id(path.partition(".")[0]))
        except Exception as exc:
            raise translate(exc, f"could not delete {what}") from None

    async def stream_text(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of a text blob in chunks of about 1 MiB, or `None` if not text.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: It could not be read (also raised by the iteration).
        """
        return await self._stream(blob_id, ".txt")

    async def stream_json(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of a JSON blob in chunks of about 1 MiB, or `None` if not JSON.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: It could not be read (also raised by the iteration).
        """
        return await self._stream(blob_id, ".json")

    async def _stream(self, blob_id: str, suffix: str) -> AsyncGenerator[bytes, None] | None:
        key = parse_blob_id(blob_id)
        try:
            result = await self._obs.get_async(self._store, f"{key}{suffix}")
        except FileNotFoundError as exc:
            raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise translate(exc, f"could not read blob {key}") from None
        return _stream(result.stream(min_chunk_size=_MiB), key)

    async def blob_index(self, blob_id: str) -> BlobIndex | None:
        """The index stored beside blob `blob_id`, or `None` if it has none.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The index could not be read.
        """
        key = parse_blob_id(blob_id)
        data = await self._get(key, ".idx")
        index = None if data is None else BlobIndex.from_json(bytes(data))
        if index is None:
            if data is not None:
                _log.warning("the index of blob %s is damaged or of another version", key)
            return None
        try:  # an index is kept only for the blob it describes: same size, and there
            meta = await self._obs.head_async(self._store, f"{key}{_SUFFIX[index.kind]}")
        except FileNotFoundError as exc:
            raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise translate(exc, f"could not look up blob {key}") from None
        return index if meta["size"] == index.size else None

    async def read_range(
        self, blob_id: str, index: BlobIndex, start: int, end: int
    ) -> AsyncGenerator[bytes, None]:
        """The blob's bytes from `start` to `end`, one ranged read of 256 KiB at a time.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The blob could not be read.
        """
        key = parse_blob_id(blob_id)
        path = f"{key}{_SUFFIX[index.kind]}"
        while start < end:
            stop = min(start + _READ_CHUNK, end)
            try:
                data = await self._obs.get_range_async(self._store, path, start=start, end=stop)
            except FileNotFoundError as exc:
                raise_if_no_container(exc, self._where)
                raise BlobNotFoundError(f"no blob {key} in {self._where}") from None
            except Exception as exc:
                raise translate(exc, f"could not read blob {key}") from None
            yield bytes(data)
            start = stop


async def _stream(chunks: AsyncIterator[Any], blob_id: BlobId) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in chunks:
            yield bytes(chunk)
    except FileNotFoundError as exc:
        withhold(exc)
        raise BlobNotFoundError(f"no blob {blob_id}") from None
    except Exception as exc:
        if isinstance(exc, BlobError):
            raise
        raise translate(exc, f"could not read blob {blob_id}") from None


async def _pieces(text: str, halt: anyio.Event) -> AsyncIterator[bytes]:
    # One encoded piece at a time: the upload holds its parts, never a copy of the whole text.
    for start in range(0, len(text), _CHUNK_CHARS):
        if halt.is_set():
            raise _Halted("the store was cancelled")  # obstore aborts the multipart upload
        yield text[start : start + _CHUNK_CHARS].encode("utf-8", "surrogatepass")


class _Halted(Exception):
    pass


def _pieces_of(text: str) -> Iterator[bytes]:
    return (
        text[i : i + _CHUNK_CHARS].encode("utf-8", "surrogatepass")
        for i in range(0, len(text), _CHUNK_CHARS)
    )


def _check_stored_key(data: bytes, where: str) -> bytes:
    try:
        return check_key(data, where)
    except ConfigurationError:
        raise BlobError(f"the id key of {where} is damaged ({len(data)} bytes)") from None


def _text_of(content: Content) -> tuple[str, str]:
    if isinstance(content, TextContent):
        return content.text, ".txt"
    if isinstance(content, StructuredContent):
        try:
            return content.json_text, ".json"
        except (TypeError, ValueError) as exc:
            raise BlobError(f"the structured content is not JSON: {exc}") from exc
    raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")


def _scanned(content: Content) -> tuple[int, list[tuple[int, int]]] | None:
    # Promotion scanned a JSON array already and kept where its entries start.
    if not isinstance(content, StructuredContent):
        return None
    shape = content._shape  # pyright: ignore[reportPrivateUsage]  # the cache blobs keeps
    if shape is None or shape.points is None:
        return None
    return shape.count, shape.points


def _index_of(
    text: str, suffix: str, every: int, scanned: tuple[int, list[tuple[int, int]]] | None
) -> BlobIndex | None:
    if suffix == ".txt":
        step = _CHUNK_CHARS
        pieces = (
            text[i : i + step].encode("utf-8", "surrogatepass") for i in range(0, len(text), step)
        )
        return text_index(pieces, every)
    if json_kind(text) != "array":
        return None
    try:
        return array_index(text, every, scanned=scanned)
    except ValueError:
        return None  # not valid JSON after all: inspect reads it whole and says so


def _decode(data: Any, blob_id: BlobId) -> str:
    try:
        return codecs.utf_8_decode(data, "surrogatepass", True)[0]
    except UnicodeDecodeError as exc:
        raise BlobError(f"blob {blob_id} is not UTF-8 text: {exc}") from exc
