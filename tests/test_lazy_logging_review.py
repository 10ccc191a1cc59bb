"""The library's lazy loggers under a user's configuration (review of I42's `_log`, R43).

The named loggers are made at the library's first record, not at import: a user's handler,
level and `logging.disable` must act as they did when they were made at import, whether
logging is configured before the import, after it, or after the first record; two threads
writing the first record at once each reach the user's handler once. One fresh
interpreter runs every case (the test process has logging configured already).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CASES = r"""
import logging, sys, threading

records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.name, record.funcName, record.filename, record.attempt))

def configure():
    package = logging.getLogger("llm_worker")
    package.handlers[:] = [h for h in package.handlers if isinstance(h, logging.NullHandler)]
    package.addHandler(Keep())
    package.setLevel(logging.INFO)

def retry():
    from llm_worker._retries import retrying
    from llm_worker.errors import ProviderError
    retrying("stream", ProviderError("overloaded"), 1, 0.5)

mode = sys.argv[1]
if mode == "before-import":
    configure()
import llm_worker  # noqa: E402
if mode in ("after-import", "child-level", "disabled"):
    configure()
if mode == "after-first-record":
    retry()  # no configuration yet: dropped, and nothing on stderr
    configure()
if mode == "child-level":
    logging.getLogger("llm_worker.retries").setLevel(logging.ERROR)
if mode == "disabled":
    logging.disable(logging.CRITICAL)
if mode == "threads":
    configure()
    start = threading.Barrier(4)
    def first():
        start.wait(timeout=10)
        retry()
    threads = [threading.Thread(target=first) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
else:
    retry()
nulls = [h for h in logging.getLogger("llm_worker").handlers if type(h) is logging.NullHandler]
print(len(records), sorted(set(records)), min(len(nulls), 1))  # (two: as harmless as one)
"""

RETRY = ("llm_worker.retries", "retrying", "_retries.py", 1)


def run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CASES), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.strip()


def test_a_users_configuration_sees_the_records_as_when_loggers_were_made_at_import() -> None:
    for mode in ("before-import", "after-import", "after-first-record"):
        assert run(mode) == f"1 [{RETRY!r}] 1", mode
    assert run("child-level") == "0 [] 1"  # a level on the child logger still applies
    assert run("disabled") == "0 [] 1"
    assert run("threads") == f"4 [{RETRY!r}] 1"  # the first record from four threads at once
