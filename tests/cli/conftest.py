"""Helpers of the CLI tests: a model server in a background thread, and a child on a pty.

The CLI blocks (it runs its own event loop, in-process or as a child process), so the
`ScriptedModelServer` it talks to runs on an event loop of its own, in a thread, and outlives
the command.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TypeVar

import pytest
from anyio.from_thread import start_blocking_portal

from llm_worker.testing import WireServer

API_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|[\r\x01\x02]")

# The child makes the pty its controlling terminal (it is a session leader: start_new_session),
# so that the terminal turns a typed Ctrl-C into SIGINT, as for a user.
_CTTY_SHIM = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No provider key in this process's environment (a key makes the demo go live); the
    environment for a child, with a terminal type set."""
    for key in API_KEYS:
        monkeypatch.delenv(key, raising=False)
    return {**os.environ, "TERM": "xterm-256color"}


def plain(raw: bytes) -> str:
    """Terminal output without colour codes, cursor moves and carriage returns."""
    return _ANSI.sub("", raw.decode("utf-8", "replace"))


S = TypeVar("S", bound=WireServer)


class Serve(Protocol):
    def __call__(self, server: S) -> AbstractContextManager[S]: ...


@pytest.fixture
def serve() -> Iterator[Serve]:
    """`with serve(ScriptedModelServer(...)) as server:` — started on a loop in a thread."""
    with start_blocking_portal() as portal:

        @contextmanager
        def start(server: S) -> Iterator[S]:
            with portal.wrap_async_context_manager(server):
                yield server

        yield start


class PtyChild:
    """A child process on a pseudo-terminal; every read is bounded by a timeout."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CTTY_SHIM, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.raw = b""
        self.seen = 0  # `expect` searches the output after what it matched last

    def expect(self, needle: str, timeout: float = 15.0) -> str:
        """Read until `needle` shows (colour codes stripped); return the output up to it."""
        deadline = time.monotonic() + timeout
        while True:
            text = plain(self.raw)
            found = text.find(needle, self.seen)
            if found >= 0:
                start, self.seen = self.seen, found + len(needle)
                return text[start : self.seen]
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"{needle!r} did not show; the terminal shows:\n{text}")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.raw += data
        return bool(data)

    def send(self, data: str) -> None:
        """Type `data` (control characters included: \\x03 is Ctrl-C, \\x04 Ctrl-D)."""
        os.write(self.master, data.encode())

    def wait(self, timeout: float = 15.0) -> int:
        """The exit code, reading the rest of the output meanwhile."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        """Kill the child if it still runs; close the terminal."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        os.close(self.master)


@pytest.fixture
def pty_child() -> Iterator[Callable[..., PtyChild]]:
    """`pty_child(args, env)` starts a child on a pty; it is killed at the end of the test."""
    children: list[PtyChild] = []

    def start(args: list[str], env: dict[str, str], cwd: str | None = None) -> PtyChild:
        child = PtyChild(args, env, cwd)
        children.append(child)
        return child

    yield start
    for child in children:
        child.close()
