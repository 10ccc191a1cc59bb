"""`ObjectBlobStore`: blobs in S3, GCS, Azure Blob Storage or local files, through obstore.

Layout under the store's prefix: `{id}.txt` or `{id}.json` (the bytes `FsBlobStore` writes)
and, for text and JSON arrays, `{id}.idx` (the index, `_index`). The index is written first and
the blob last: the blob's object appearing is the commit. A large blob goes up as a multipart
upload, which the store makes visible only once complete, so a reader never sees half a blob;
a small one as one conditional put (`mode="create"`). Ids are UUIDv7, so two machines storing
at once never write the same name. obstore is imported through `require_extra`
(`llm-worker[obstore]`), never at `import llm_worker`.

Errors of the store become `BlobError`s that name what went wrong without the store's own
message: an S3 error body can echo the access key id.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import anyio.lowlevel
import anyio.to_thread

from llm_worker._extras import require_extra
from llm_worker.blobs._index import BlobIndex, array_index, text_index
from llm_worker.blobs._json_scan import POINT_EVERY, json_kind
from llm_worker.blobs._output import (
    BlobId,
    Content,
    StructuredContent,
    TextContent,
    new_blob_id,
    parse_blob_id,
)
from llm_worker.errors import (
    BlobAccessDeniedError,
    BlobContainerNotFoundError,
    BlobError,
    BlobNotFoundError,
    BlobStoreUnavailableError,
    ConfigurationError,
)

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ("ObjectBlobStore",)

_log = logging.getLogger("llm_worker.blobs")

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

    Raises:
        MissingExtraError: obstore is not installed.
        ConfigurationError: `part_size`, `max_concurrency` or `index_every` is not an int >= 1.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        part_size: int = 5 * _MiB,
        max_concurrency: int = 2,
        where: str | None = None,
        index_every: int = 1000,
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

    @classmethod
    def from_url(cls, url: str, *, index_every: int = 1000, **options: Any) -> ObjectBlobStore:
        """Open the store at `url` (`s3://bucket/prefix`, `gs://…`, `az://…`, `file:///…`).

        Args:
            url: Where the blobs go; its path is the prefix of every blob.
            index_every: Lines or entries between two points of a blob's index.
            **options: Passed to obstore's `from_url`: `endpoint`, `region`,
                `access_key_id`, `secret_access_key`, `client_options={"allow_http": True}`,
                `retry_config`, `mkdir=True` (local files), … Credentials left out come from
                each cloud's usual environment and config files.

        Raises:
            MissingExtraError: obstore is not installed.
            ConfigurationError: obstore refused the URL or an option (the message never
                holds an option's value), or `index_every` is not an int >= 1.
        """
        store_module = require_extra("obstore.store", "obstore", feature="ObjectBlobStore")
        where = _public_url(url)
        try:
            store = store_module.from_url(url, **options)
        except Exception as exc:
            detail = _first_line(str(exc))
        else:
            return cls(store, where=where, index_every=index_every)
        # Raised outside the `except`: obstore's error (it may echo the URL) is not chained.
        secrets = {"options": options, "url": _url_secrets(url)}
        detail = _redact(detail.replace(url, where), secrets)
        raise ConfigurationError(f"cannot open the object store {where}: {detail}")

    def __repr__(self) -> str:
        return f"ObjectBlobStore({self._where!r})"

    async def store(self, content: Content) -> BlobId:
        """Upload `content` (and its index); return its new id once the blob is visible.

        Raises:
            BlobError: It could not be stored (a typed subclass says why), or the structured
                content is not JSON.
        """
        text, suffix = _text_of(content)
        blob_id = new_blob_id()
        scanned = _scanned(content) if self._every == POINT_EVERY else None
        index = await anyio.to_thread.run_sync(_index_of, text, suffix, self._every, scanned)
        if index is not None:
            await self._put(f"{blob_id}.idx", index.to_json(), blob_id)
        try:
            await self._put_text(f"{blob_id}{suffix}", text, blob_id)
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            # Cancelled once the blob was up: take it down too, no one will know its id.
            names = [f"{blob_id}{suffix}"] + ([f"{blob_id}.idx"] if index is not None else [])
            with anyio.CancelScope(shield=True):
                for name in names:
                    with contextlib.suppress(Exception):
                        await self._obs.delete_async(self._store, name)
            raise
        return blob_id

    async def _put_text(self, path: str, text: str, blob_id: BlobId) -> None:
        if len(text) <= _SMALL:
            await self._put(path, text.encode("utf-8", "surrogatepass"), blob_id)
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
            raise _translate(failed[0], f"could not store blob {blob_id} in {self._where}")

    async def _put(self, path: str, data: bytes, blob_id: BlobId) -> None:
        try:
            await self._obs.put_async(self._store, path, data, mode="create")
        except Exception as exc:
            raise _translate(exc, f"could not store blob {blob_id} in {self._where}") from None

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
            _raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise _translate(exc, f"could not read blob {key}") from None

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The store could not be asked (a typed subclass says why).
        """
        key = parse_blob_id(blob_id)
        for suffix in (".txt", ".json"):
            try:
                await self._obs.head_async(self._store, f"{key}{suffix}")
            except FileNotFoundError as exc:
                _raise_if_no_container(exc, self._where)
                continue
            except Exception as exc:
                raise _translate(exc, f"could not look up blob {key}") from None
            return True
        return False

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
            _raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise _translate(exc, f"could not read blob {key}") from None
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
            _raise_if_no_container(exc, self._where)
            return None
        except Exception as exc:
            raise _translate(exc, f"could not look up blob {key}") from None
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
                _raise_if_no_container(exc, self._where)
                raise BlobNotFoundError(f"no blob {key} in {self._where}") from None
            except Exception as exc:
                raise _translate(exc, f"could not read blob {key}") from None
            yield bytes(data)
            start = stop


async def _stream(chunks: AsyncIterator[Any], blob_id: BlobId) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in chunks:
            yield bytes(chunk)
    except FileNotFoundError as exc:
        _withhold(exc)
        raise BlobNotFoundError(f"no blob {blob_id}") from None
    except Exception as exc:
        if isinstance(exc, BlobError):
            raise
        raise _translate(exc, f"could not read blob {blob_id}") from None


async def _pieces(text: str, halt: anyio.Event) -> AsyncIterator[bytes]:
    # One encoded piece at a time: the upload holds its parts, never a copy of the whole text.
    for start in range(0, len(text), _CHUNK_CHARS):
        if halt.is_set():
            raise _Halted("the store was cancelled")  # obstore aborts the multipart upload
        yield text[start : start + _CHUNK_CHARS].encode("utf-8", "surrogatepass")


class _Halted(Exception):
    pass


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


# -- errors ------------------------------------------------------------------------------------

_CODE = re.compile(r"<Code>([A-Za-z]{1,64})</Code>")
_STATUS = re.compile(r"status(?: code)?:? (\d{3})")
_DENIED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken")


def _facts(exc: BaseException) -> tuple[str | None, str | None]:
    text = str(exc)
    code, status = _CODE.search(text), _STATUS.search(text)
    return (code.group(1) if code else None), (status.group(1) if status else None)


def _withhold(exc: BaseException) -> None:
    # The store's text can echo an access key id or a signed URL, and an error raised while
    # handling it keeps it as `__context__`: what is kept of it says nothing.
    with contextlib.suppress(Exception):
        exc.args = (f"{type(exc).__name__}: the store's message is withheld",)


def _raise_if_no_container(exc: BaseException, where: str) -> None:
    code, _ = _facts(exc)
    _withhold(exc)
    if code in ("NoSuchBucket", "ContainerNotFound"):
        raise BlobContainerNotFoundError(f"the bucket of {where} does not exist ({code})")


def _translate(exc: BaseException, doing: str) -> BlobError:
    """A typed `BlobError` for a store failure: its kind, status and code, never its text."""
    code, status = _facts(exc)
    _withhold(exc)
    said = ", ".join(part for part in (status and f"HTTP {status}", code) if part)
    said = f" ({said})" if said else ""
    errors: Any = _obstore().exceptions
    if code in ("NoSuchBucket", "ContainerNotFound"):
        return BlobContainerNotFoundError(f"{doing}: the bucket does not exist{said}")
    denied = isinstance(exc, errors.PermissionDeniedError | errors.UnauthenticatedError)
    if denied or code in _DENIED or status in ("401", "403"):
        return BlobAccessDeniedError(f"{doing}: the store refused the credentials{said}")
    if isinstance(exc, FileNotFoundError):
        return BlobNotFoundError(f"{doing}: not found{said}")
    kind = "throttled" if code == "SlowDown" or status in ("429", "503") else "failed"
    return BlobStoreUnavailableError(
        f"{doing}: the store {kind} after its client's retries{said}: {type(exc).__name__}"
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "invalid configuration"


def _redact(text: str, options: dict[str, Any]) -> str:
    for value in _values(options):
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _values(options: Any) -> list[str]:
    if isinstance(options, str):
        return [options]
    if isinstance(options, dict):
        return [v for item in options.values() for v in _values(item)]  # pyright: ignore[reportUnknownVariableType]
    return []


def _url_secrets(url: str) -> dict[str, str]:
    # User info and query values: an account key, a SAS token, a presigned signature.
    try:
        parts = urlsplit(url)
        found = [parts.username, parts.password, parts.query, parts.netloc.rpartition("@")[0]]
    except ValueError:
        return {}
    found += [value for _, value in parse_qsl(parts.query)]
    return {str(i): value for i, value in enumerate(found) if value}


def _public_url(url: str) -> str:
    # Neither user info nor a query (a SAS token, a signature) goes into a repr.
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else url.split("?", maxsplit=1)[0]
