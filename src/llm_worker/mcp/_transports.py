"""The ways to reach an MCP server: a process over stdio, streamable HTTP, legacy SSE.

Each is a factory of async context managers yielding `(read, write)` streams of the SDK's
session messages: the server opens one per connection (a reconnect opens another).
"""

from __future__ import annotations

import os
import re
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, Literal, TypeAlias

import anyio

from llm_worker._extras import require_extra
from llm_worker._log import logger

__all__ = (
    "PASSED_ENV",
    "PASSED_ENV_PREFIXES",
    "StdioTransport",
    "Streams",
    "Transport",
    "http_transport",
    "passed_env",
)

Streams: TypeAlias = tuple[Any, Any]
"""The SDK's (read, write) streams of one connection."""
Transport: TypeAlias = Callable[[], AbstractAsyncContextManager[Streams]]

_log = logger("llm_worker.mcp")
_LINE_LIMIT = 8192  # a line of stderr longer than this is logged in pieces
_CARRY = 64  # bytes of a piece's end logged with the next piece (a token cut between them)


PASSED_ENV: Final = (
    # proxies
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    # certificates
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    # package indexes (pip, npm; uv's own are every `UV_*`)
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    "NPM_CONFIG_REGISTRY",
    "NPM_CONFIG_CAFILE",
    "npm_config_registry",
    "npm_config_cafile",
)
"""Variables a stdio server gets from this process by default, beside the SDK's safe set
(`HOME`, `PATH`, `USER`, …): proxies, certificate bundles and package indexes, without which
`uvx`/`npx` cannot fetch a server behind a corporate proxy or a custom CA. Also passed: every
variable whose name starts with one of `PASSED_ENV_PREFIXES`."""

PASSED_ENV_PREFIXES: Final = ("UV_",)
"""Prefixes of the variables passed as `PASSED_ENV` are (uv's settings: index, native TLS…)."""

_TAIL_LINES = 20  # lines of a server's stderr an MCPConnectionError quotes at most
_TAIL_CHARS = 500  # characters of each such line
# Control characters of a server's stderr (an ANSI escape that would recolour or rewrite the
# terminal an error or a log line is printed on) are shown as `?`; a tab is kept.
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that a stdio server gets by default (see `PASSED_ENV`)."""
    return {
        name: value
        for name, value in environ.items()
        if (name in PASSED_ENV or name.startswith(PASSED_ENV_PREFIXES))
        and not value.startswith("()")  # a shell function, as the SDK skips them
    }


class StdioTransport:
    """Starts `command` with `args` for each connection, its stderr logged and kept.

    Each stderr line goes to the `llm_worker.mcp` logger, and the last lines are kept
    (`stderr_tail`) for the error of a failed start. Every line is scrubbed of the
    server's secrets (`scrub`) before it is logged or kept.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        *,
        name: str,
        scrub: Callable[[str], str],
    ) -> None:
        self._params = (command, list(args), dict(env) if env is not None else None, cwd)
        self._name = name
        self._scrub = scrub
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self) -> AbstractAsyncContextManager[Streams]:
        """One connection: the process, started, and its stdin and stdout as streams."""
        return self._connect()

    @asynccontextmanager
    async def _connect(self) -> AsyncGenerator[Streams]:
        stdio = require_extra("mcp.client.stdio", "mcp", feature="MCPServer.stdio")
        command, args, env, cwd = self._params
        params = stdio.StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
        self._tail.clear()
        errlog = self._stderr()
        try:
            async with stdio.stdio_client(params, errlog=errlog) as (read, write):
                yield read, write
        finally:
            errlog.close()  # the reader thread ends once the process's copy is closed too

    async def stderr_tail(self) -> list[str]:
        """The last lines the latest process wrote to stderr (scrubbed, each cut short).

        Waits (at most 2 s) for the reader to take what the process wrote before it ended.
        """
        reader = self._reader
        if reader is not None:
            await anyio.to_thread.run_sync(reader.join, 2.0)
        with self._lock:  # the reader may still be appending (a child kept stderr open)
            return list(self._tail)

    def _stderr(self) -> Any:
        # The subprocess needs a real file descriptor: a pipe, read line by line by a thread
        # that logs each line at INFO (never the user's terminal unless they configure logging).
        read_fd, write_fd = os.pipe()
        self._reader = threading.Thread(
            target=self._lines, args=(read_fd,), name=f"mcp-stderr {self._name}", daemon=True
        )
        self._reader.start()
        return os.fdopen(write_fd, "w")

    def _lines(self, fd: int) -> None:
        continued = False  # the piece read is the rest of an overlong line
        carry = b""  # the end of the last piece of an overlong line, read again with the next
        with os.fdopen(fd, "rb") as lines:
            while piece := lines.readline(_LINE_LIMIT):
                piece, carry, ends = carry + piece, b"", piece.endswith(b"\n")
                if not ends and len(piece) > _CARRY:
                    # A token cut between two pieces would be masked in neither: the end of
                    # this piece is logged with the next one instead.
                    cut = _boundary(piece, len(piece) - _CARRY)
                    piece, carry = piece[:cut], piece[cut:]
                self._line(piece, continued)
                continued = not ends
            if carry:
                self._line(carry, continued)

    def _line(self, piece: bytes, continued: bool) -> None:
        text = self._scrub(_printable(piece.decode("utf-8", "replace")).rstrip())
        if text and not continued:
            # An overlong line is kept once (its start, cut short), so a 10 MB line does not
            # push the lines that say what failed out of the tail.
            with self._lock:
                self._tail.append(text[:_TAIL_CHARS])
        _log.info("[%s] %s", self._name, text)


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


def _printable(text: str) -> str:
    return _CONTROLS.sub("?", text)


def _boundary(data: bytes, index: int) -> int:
    """`index`, moved back to the start of the UTF-8 character it falls in."""
    while index > 0 and data[index] & 0xC0 == 0x80:  # a continuation byte
        index -= 1
    return index
