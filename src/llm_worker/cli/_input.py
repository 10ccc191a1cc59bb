"""Reading a line from the terminal while the event loop runs."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading

__all__ = ("read_line",)


async def read_line() -> str | None:
    """One line of stdin without its line break, or `None` at end of input.

    The read blocks in a daemon thread: a thread of `anyio.to_thread` is not a daemon, so after
    a Ctrl-C the process would wait at exit until the user pressed Enter.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def deliver(line: str) -> None:
        if not answer.done():  # the waiter may have been cancelled meanwhile
            answer.set_result(line)

    def read() -> None:
        try:
            line = sys.stdin.readline()
        except (OSError, ValueError):  # stdin closed
            line = ""
        with contextlib.suppress(RuntimeError):  # the loop closed while the user was typing
            loop.call_soon_threadsafe(deliver, line)

    threading.Thread(target=read, name="llm-worker-stdin", daemon=True).start()
    line = await answer
    return line.rstrip("\r\n") if line else None
