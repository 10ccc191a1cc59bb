"""Retention: what a sweep did (`SweepReport`), and which ids a saved state still needs.

The policy every store's `sweep` follows (docs/blobs.md):

- A blob's age is the time since it was last stored: storing the same content again (a
  content-addressed store finds it already there) makes it young again.
- A blob older than `older_than` is deleted, unless its id is in `keep`.
- Leftovers of writers that failed or died are removed once older than `older_than`: an
  index without its blob, a store's temporary file, a sweep's own tombstone.

`referenced_blob_ids` lists the ids a `PauseState`, a history or any JSON still names, so an
application passes them as `keep`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import orjson

from llm_worker.blobs._output import BlobId, parse_blob_id
from llm_worker.errors import ConfigurationError

__all__ = ("SweepReport", "SweepableBlobStore", "cutoff_of", "keep_set", "referenced_blob_ids")

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# A summary's tag, and a `blob_id` field (a stored output, an inspect call's arguments) as it
# reads in JSON text, escaped any number of times (JSON inside a JSON string, say a tool's
# result quoting a saved state, inside a state).
_TAG = re.compile(rf"\[blob:({_UUID})\]", re.ASCII)
# `blobId`: the web adapters' blob parts (data-llm-worker-blob, llm-worker.blob), as a chat
# the browser saved holds them.
_FIELD = re.compile(rf'(?:blob_id|blobId)\\*"\s*:\s*\\*"({_UUID})', re.ASCII)


@dataclass(slots=True, frozen=True)
class SweepReport:
    """What a sweep did.

    Attributes:
        deleted: The blobs it deleted.
        kept: Blobs old enough to go that it kept because `keep` named them.
        orphans: Leftovers it removed: indexes without a blob, temporary files of writers that
            died, its own tombstones.
    """

    deleted: tuple[BlobId, ...] = ()
    kept: tuple[BlobId, ...] = ()
    orphans: int = 0


@runtime_checkable
class SweepableBlobStore(Protocol):
    """Optional for a store: retention. `MemoryBlobStore`, `FsBlobStore` and `ObjectBlobStore`."""

    async def sweep(
        self,
        older_than: timedelta,
        *,
        keep: Iterable[str] = (),
        now: datetime | float | None = None,
    ) -> SweepReport:
        """Delete the blobs last stored more than `older_than` ago, except those in `keep`.

        A blob's age counts from the last time its content was stored (storing it again makes
        it young). Leftovers of failed or dead writers older than `older_than` go too.

        Args:
            older_than: How long a blob is kept after it was last stored.
            keep: Ids never deleted (see `referenced_blob_ids`).
            now: The time to measure ages from (a `datetime` or POSIX seconds; default: now).

        Raises:
            ConfigurationError: `older_than` is not a `timedelta` >= 0, or `now` not a time.
            InvalidBlobIdError: An id in `keep` is not a blob id.
            BlobError: The store could not be listed or a blob not deleted.
        """
        ...


def referenced_blob_ids(*sources: object) -> frozenset[BlobId]:
    """The blob ids that `sources` name, so a sweep can keep them (`keep=`).

    A source is a `PauseState`, a `Message`, anything else with `to_json()` or `to_dict()`,
    JSON text (what `PauseState.to_json` returned, as `str` or `bytes`), JSON-ready data
    (dicts, lists, strings), or an iterable of any of these (a history). Ids are found in a
    summary's `[blob:<id>]` tag (a stored output's result, as the history carries it) and in
    `blob_id` fields (the arguments of an `inspect` call).

    Raises:
        TypeError: A source is none of these (say an object that cannot be made JSON).
    """
    found: set[BlobId] = set()
    for source in sources:
        _collect(source, found)
    return frozenset(found)


def _collect(source: object, found: set[BlobId]) -> None:
    text = _text_of(source)
    if text is not None:
        found.update(parse_blob_id(m) for m in _TAG.findall(text))
        found.update(parse_blob_id(m) for m in _FIELD.findall(text))
        return
    if isinstance(source, Iterable):
        items: Iterable[object] = source  # pyright: ignore[reportUnknownVariableType]  # any source
        for item in items:
            _collect(item, found)
        return
    raise TypeError(f"not a state, a message, JSON or an iterable of them: {type(source)!r}")


def _text_of(source: object) -> str | None:
    if isinstance(source, str):
        return source
    if isinstance(source, bytes | bytearray):
        return source.decode("utf-8", "replace")
    to_json: Any = getattr(source, "to_json", None)
    if callable(to_json):
        return _text_of(to_json())
    to_dict: Any = getattr(source, "to_dict", None)
    if callable(to_dict):
        source = to_dict()
    if isinstance(source, dict | list | tuple):
        try:
            return orjson.dumps(source, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError as exc:
            if isinstance(source, dict):
                raise TypeError(f"not JSON-ready data: {exc}") from None
    return None  # a list of messages: each is collected on its own


def cutoff_of(older_than: object, now: object) -> float:
    """The POSIX time before which a blob last stored is old enough to go.

    Raises:
        ConfigurationError: `older_than` is not a `timedelta` >= 0, or `now` not a time.
    """
    # Checked at run time: the arguments come from application code that may be untyped.
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise ConfigurationError(f"older_than must be a timedelta >= 0: {older_than!r}")
    if now is None:
        moment = datetime.now().timestamp()
    elif isinstance(now, datetime):
        moment = now.timestamp()
    elif isinstance(now, int | float) and not isinstance(now, bool) and math.isfinite(now):
        moment = float(now)  # not inf: every blob, however young, would be old
    else:
        raise ConfigurationError(f"now must be a datetime or a POSIX time: {now!r}")
    return moment - older_than.total_seconds()


def keep_set(keep: Iterable[str]) -> frozenset[BlobId]:
    """The ids in `keep`, checked.

    Raises:
        InvalidBlobIdError: One is not a blob id.
    """
    if isinstance(keep, str):  # one id passed bare would be iterated as characters
        keep = [keep]
    return frozenset(parse_blob_id(blob_id) for blob_id in keep)
