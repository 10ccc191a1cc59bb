"""The ways to reach an MCP server: a process over stdio, streamable HTTP, legacy SSE.

Each is a factory of async context managers yielding `(read, write)` streams of the SDK's
session messages: the server opens one per connection (a reconnect opens another).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, TypeAlias

from llm_worker._extras import require_extra

__all__ = ("Streams", "Transport", "http_transport", "stdio_transport")

Streams: TypeAlias = tuple[Any, Any]
"""The SDK's (read, write) streams of one connection."""
Transport: TypeAlias = Callable[[], AbstractAsyncContextManager[Streams]]

_log = logging.getLogger("llm_worker.mcp")
_LINE_LIMIT = 8192  # a line of stderr longer than this is logged in pieces


def stdio_transport(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    name: str,
) -> Transport:
    """Start `command` with `args`; its stderr goes to the `llm_worker.mcp` logger."""

    @asynccontextmanager
    async def connect() -> AsyncGenerator[Streams]:
        stdio = require_extra("mcp.client.stdio", "mcp", feature="MCPServer.stdio")
        params = stdio.StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        errlog = _stderr_logger(name)
        try:
            async with stdio.stdio_client(params, errlog=errlog) as (read, write):
                yield read, write
        finally:
            errlog.close()  # the reader thread ends once the process's copy is closed too

    return connect


def _stderr_logger(name: str) -> Any:
    # The subprocess needs a real file descriptor: a pipe, read line by line by a thread
    # that logs each line at INFO (never the user's terminal unless they configure logging).
    read_fd, write_fd = os.pipe()
    thread = threading.Thread(
        target=_log_lines, args=(read_fd, name), name=f"mcp-stderr {name}", daemon=True
    )
    thread.start()
    return os.fdopen(write_fd, "w")


def _log_lines(fd: int, name: str) -> None:
    with os.fdopen(fd, "rb") as lines:
        while line := lines.readline(_LINE_LIMIT):
            _log.info("[%s] %s", name, line.decode("utf-8", "replace").rstrip())


def http_transport(
    url: str,
    headers: Mapping[str, str] | None,
    kind: Literal["streamable", "sse"],
    connect_timeout: float,
) -> Transport:
    """Reach the server at `url` over streamable HTTP (or the legacy SSE transport)."""

    @asynccontextmanager
    async def connect() -> AsyncGenerator[Streams]:
        given = dict(headers) if headers is not None else None
        if kind == "sse":
            sse = require_extra("mcp.client.sse", "mcp", feature="MCPServer.http")
            async with sse.sse_client(url, headers=given, timeout=connect_timeout) as streams:
                yield streams[0], streams[1]
            return
        http = require_extra("mcp.client.streamable_http", "mcp", feature="MCPServer.http")
        if not hasattr(http, "streamable_http_client"):  # mcp < 1.24
            async with http.streamablehttp_client(url, headers=given, timeout=connect_timeout) as s:
                yield s[0], s[1]
            return
        import httpx

        # The SDK's own timeouts: connecting bounded, a stream's silence up to 5 minutes.
        timeout = httpx.Timeout(connect_timeout, read=300)
        async with (
            httpx.AsyncClient(headers=given, timeout=timeout, follow_redirects=True) as client,
            http.streamable_http_client(url, http_client=client) as s,
        ):
            yield s[0], s[1]

    return connect
