"""Deleting and sweeping the files of an `FsBlobStore` (run in worker threads).

A sweep never unlinks a blob in place: it renames it to a tombstone (`.{name}.{random}.swept`)
first and looks at the tombstone's time. A store that found the blob made it young again
(`os.utime`) before the rename, so the tombstone is young and goes back; a store after the
rename found no blob and wrote it anew. Either way a store that returned an id leaves its blob
in place, and putting a tombstone back over a newer copy loses nothing: both have the same
bytes, since the name is the content's hash.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from pathlib import Path

from llm_worker.blobs._output import BlobId, parse_blob_id
from llm_worker.blobs._retention import SweepReport
from llm_worker.errors import BlobError

__all__ = ("delete_files", "sweep_folder")

_SUFFIXES = (".txt", ".json")
_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_BLOB = re.compile(rf"({_ID})\.(?:txt|json)", re.ASCII)
# Only the names this package makes: a store's temporary file (mkstemp's `.{id}.XXXX.tmp`,
# the key's `.key.XXXX.tmp`) and a sweep's tombstone. Anything else in the folder (an
# editor's `.x.tmp`) is not ours to delete.
_LEFTOVER = re.compile(
    rf"\.(?:{_ID}|key)\.[a-z0-9_]+\.tmp|\.{_ID}\.(?:txt|json)\.[0-9a-f]{{16}}\.swept", re.ASCII
)


def delete_files(root: Path, blob_id: BlobId) -> bool:
    """Delete blob `blob_id`'s file; whether there was one.

    Raises:
        BlobError: It could not be deleted.
    """
    gone = False
    for suffix in _SUFFIXES:
        try:
            (root / f"{blob_id}{suffix}").unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise BlobError(f"could not delete blob {blob_id}: {type(exc).__name__}") from exc
        gone = True
    return gone


def sweep_folder(root: Path, cutoff: float, keep: frozenset[BlobId]) -> SweepReport:
    """Delete the blobs last stored before `cutoff` (not in `keep`), and old leftovers.

    Raises:
        BlobError: The folder could not be listed.
    """
    try:
        names = sorted(entry.name for entry in os.scandir(root))
    except FileNotFoundError:
        return SweepReport()
    except OSError as exc:
        raise BlobError(f"could not list {root}: {type(exc).__name__}") from exc
    deleted: list[BlobId] = []
    kept: list[BlobId] = []
    orphans = 0
    for name in names:
        found = _BLOB.fullmatch(name)
        if found is not None:
            blob_id = parse_blob_id(found.group(1))
            if not _older(root / name, cutoff):
                continue
            if blob_id in keep:
                kept.append(blob_id)
            elif _retire(root, name, cutoff):
                deleted.append(blob_id)
        elif _LEFTOVER.fullmatch(name) and _older(root / name, cutoff):
            with contextlib.suppress(FileNotFoundError):
                _unlink(root / name)
                orphans += 1
    return SweepReport(tuple(deleted), tuple(kept), orphans)


def _older(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime < cutoff
    except FileNotFoundError:
        return False  # gone meanwhile: another sweep, or a delete
    except OSError as exc:
        raise BlobError(f"could not look at {path.name}: {type(exc).__name__}") from exc


def _retire(root: Path, name: str, cutoff: float) -> bool:
    path = root / name
    tomb = root / f".{name}.{secrets.token_hex(8)}.swept"
    try:
        os.rename(path, tomb)
    except FileNotFoundError:
        return False  # another sweep took it first
    except OSError as exc:
        raise BlobError(f"could not delete {name}: {type(exc).__name__}") from exc
    try:
        young = tomb.stat().st_mtime >= cutoff
    except FileNotFoundError:
        return True  # a second sweep took the tombstone as an old leftover: the blob is gone
    except OSError as exc:
        raise BlobError(f"could not look at {tomb.name}: {type(exc).__name__}") from exc
    if young:  # stored again since the listing: it stays
        try:
            os.replace(tomb, path)
        except FileNotFoundError:
            return False  # a sweep with a shorter age took it meanwhile: its policy, not ours
        except OSError as exc:
            raise BlobError(f"could not keep {name}: {type(exc).__name__}") from exc
        return False
    # A second sweep may have taken the tombstone as an old leftover meanwhile (it bears the
    # blob's old time): the blob is gone all the same.
    with contextlib.suppress(FileNotFoundError):
        _unlink(tomb)
    return True


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BlobError(f"could not delete {path.name}: {type(exc).__name__}") from exc
