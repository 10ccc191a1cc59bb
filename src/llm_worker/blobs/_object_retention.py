"""Sweeping an `ObjectBlobStore`: which objects belong to which blob, and which are old.

Objects of blob `id` under the store's prefix: `{id}.txt` or `{id}.json` (the blob), `{id}.idx`
(its index) and `{id}.seen` (an empty object put each time the content is stored again). A
blob's age is the newest `last_modified` of these, so storing the content again makes it
young without uploading it again. Objects of an id whose blob is missing (an index left by a
writer that failed through its own cleanup, a `.seen` of a deleted blob) are orphans.

Just before deleting a blob the sweep looks at its `.seen` again: a store that found the blob
after the listing made it young, and it stays. A store that finds the blob in the one round
trip between that look and the delete gets an id whose blob is gone; with `older_than` far
above the time between two stores of the same content, no blob that is still being stored
is old enough to be swept.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio

from llm_worker.blobs._output import BlobId, parse_blob_id

__all__ = ("BLOB_SUFFIXES", "Group", "each_at_once", "group_listing", "plan")

BLOB_SUFFIXES = (".txt", ".json")
_NAME = re.compile(
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(\.txt|\.json|\.idx|\.seen)",
    re.ASCII,
)


@dataclass(slots=True)
class Group:
    """The objects of one id, and the newest time among them (POSIX seconds)."""

    names: list[str] = field(default_factory=lambda: [])
    newest: float = float("-inf")

    @property
    def has_blob(self) -> bool:
        """Whether the blob itself is among them."""
        return any(name.endswith(BLOB_SUFFIXES) for name in self.names)


def group_listing(metas: list[Any], groups: dict[BlobId, Group]) -> None:
    """Add one page of obstore's listing to `groups` (other objects are ignored)."""
    for meta in metas:
        path = str(meta["path"])
        found = _NAME.fullmatch(path)
        if found is None:
            continue  # the id key, another program's object, a nested prefix's blobs
        group = groups.setdefault(parse_blob_id(found.group(1)), Group())
        group.names.append(path)
        group.newest = max(group.newest, _seconds(meta["last_modified"]))


def plan(
    groups: dict[BlobId, Group], cutoff: float, keep: frozenset[BlobId]
) -> tuple[list[BlobId], list[BlobId], list[str]]:
    """The ids to delete, the old ids kept, and the orphan objects to delete."""
    doomed: list[BlobId] = []
    kept: list[BlobId] = []
    orphans: list[str] = []
    for blob_id, group in sorted(groups.items()):
        if group.newest >= cutoff:
            continue
        if blob_id in keep:
            kept.append(blob_id)
        elif group.has_blob:
            doomed.append(blob_id)
        else:
            orphans.extend(group.names)
    return doomed, kept, orphans


_AT_ONCE = 8  # blobs retired at once: round trips overlap, memory stays a few tasks


async def each_at_once(
    items: Sequence[BlobId], action: Callable[[BlobId], Awaitable[bool]]
) -> list[bool]:
    """`action` of each item, `_AT_ONCE` at a time; what each returned, in order.

    A few tasks share one iterator (not a task per item: 100,000 blobs are 8 tasks). The
    first error stops the others from taking more items and is raised as itself, not as an
    exception group.
    """
    results = [False] * len(items)
    failed: list[Exception] = []
    todo = iter(enumerate(items))

    async def work() -> None:
        for i, item in todo:
            if failed:
                return
            try:
                results[i] = await action(item)
            except Exception as exc:  # raised below, once every task has stopped
                failed.append(exc)
                return

    async with anyio.create_task_group() as tg:
        for _ in range(min(_AT_ONCE, len(items))):
            tg.start_soon(work)
    if failed:
        raise failed[0]
    return results


def _seconds(moment: Any) -> float:
    if isinstance(moment, datetime):
        return moment.timestamp()
    return float(moment)
