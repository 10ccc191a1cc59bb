"""One installer at a time: pytest-xdist workers share the `.cache` folders npm installs into.

Two workers that each find a package missing would otherwise run `npm install` into the same
folder at once, and one of them reads a half-written `node_modules` (a flaky "Cannot find module").
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Longer than an install's own 300 s timeout: the holder gives the lock up by then.
WAIT_S = 360.0


@contextmanager
def installing(folder: Path) -> Iterator[None]:
    """Hold `folder`'s install lock (a file beside it) while the body installs into it.

    Raises:
        TimeoutError: Another worker held the lock for longer than `WAIT_S`.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".{folder.name}.lock").open("a") as handle:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another test worker holds {folder}'s install lock"
                    ) from None
                time.sleep(0.1)  # polling a lock another process holds: no event to wait on
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
