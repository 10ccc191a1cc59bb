"""Content-addressed blob ids: a keyed hash of the content, shaped as a UUID (version 8).

A store names a blob by `HMAC-SHA256(key, domain ‖ kind ‖ UTF-8 bytes)`, cut to 122 bits and
laid out as an RFC 9562 version 8 UUID, so the same content stored twice is one blob, and an
id still passes `parse_blob_id` (ids stored before, UUIDv7, keep working: they are simply
never matched by new content). The kind (text or JSON) is part of the hash: the same string
stored as text and as JSON is two blobs, each with its own suffix.

Why keyed: a plain hash of secret content is a guessable id (hash the candidates, look for
the id in a history or a log), and an id in a summary would confirm a guess. With a per-store
secret key only a holder of the key can compute an id, and anyone holding it can read the
blobs anyway. A store makes its key on the first store (`make_key`) and keeps it beside the
blobs; two processes making it at once agree on one (`fs_key`, the object store's
conditional put).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from llm_worker._log import logger
from llm_worker.blobs._output import BlobId
from llm_worker.errors import BlobError, ConfigurationError

_log = logger("llm_worker.blobs")

__all__ = (
    "KEY_BYTES",
    "KEY_NAME",
    "Counted",
    "Kind",
    "check_key",
    "content_id",
    "fs_key",
    "make_key",
)

KEY_BYTES = 32
KEY_NAME = ".llm-worker-blob-key"  # beside the blobs; never matches an id's name
_DOMAIN = b"llm-worker.blob-id.v1\x00"

Kind = Literal["text", "json"]


def content_id(key: bytes, kind: Kind, chunks: Iterable[bytes]) -> BlobId:
    """The id of the content whose UTF-8 bytes are `chunks`, under the store's `key`."""
    mac = hmac.new(key, _DOMAIN + kind.encode() + b"\x00", hashlib.sha256)
    for chunk in chunks:
        mac.update(chunk)
    raw = bytearray(mac.digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80  # version 8: "custom", RFC 9562 §5.8
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC's variant bits
    return BlobId(str(uuid.UUID(bytes=bytes(raw))))


class Counted:
    """The chunks of a content, counting their bytes as the id's hash reads them.

    A store compares the count with the size of what is under the id already: a file or an
    object of another size (cut short by a copy or a restore) is not the content, and is
    written anew rather than trusted forever.
    """

    __slots__ = ("_chunks", "size")

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks, self.size = chunks, 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.size += len(chunk)
            yield chunk


def make_key() -> bytes:
    """A fresh random key for a store's content ids."""
    return secrets.token_bytes(KEY_BYTES)


def check_key(key: object, where: str) -> bytes:
    """`key` if it is a key of `KEY_BYTES` bytes.

    Raises:
        ConfigurationError: It is not (the message never holds the key).
    """
    if not isinstance(key, bytes) or len(key) != KEY_BYTES:
        raise ConfigurationError(f"{where}: the id key must be {KEY_BYTES} bytes")
    return key


def fs_key(root: Path) -> bytes:
    """The key kept in `root`, made (with mode 0600) by the first process that needs it.

    The key is written to a temporary file and linked into place, which fails if another
    process linked its key first: every process then reads the one that won.

    Raises:
        BlobError: The key could not be made or read, or the file is damaged.
    """
    path = root / KEY_NAME
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".key.", suffix=".tmp", dir=root)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(make_key())
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return _read_key(path)
    except OSError as exc:
        raise BlobError(
            f"could not store blobs in {root}: its id key could not be made ({type(exc).__name__})"
        ) from exc


def _read_key(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BlobError(
            f"could not store blobs in {path.parent}: its id key could not be read "
            f"({type(exc).__name__})"
        ) from exc
    if len(data) != KEY_BYTES:
        raise BlobError(f"the id key {path} is damaged ({len(data)} bytes, not {KEY_BYTES})")
    _warn_if_shared(path)
    return data


def _warn_if_shared(path: Path) -> None:
    # Made 0600; a key others can read lets them compute the id of a guessed content and
    # confirm the guess by the file name in a listing. Warned, not refused: a folder shared
    # by one group of service users is a deliberate choice.
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        mode = os.stat(path).st_mode & 0o777
        if mode & 0o077:
            _log.warning(
                "the blob id key %s is readable by others (mode %o): chmod 600 it", path, mode
            )
