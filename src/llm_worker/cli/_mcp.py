"""`--mcp` servers for `chat` / `run`, and `llm-worker mcp-serve module:tools`."""

from __future__ import annotations

import asyncio
import importlib
import shlex
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from llm_worker.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_worker.mcp import MCPServer

__all__ = ("HeldServers", "load_tools", "mcp_servers", "serve_tools")


def mcp_servers(specs: Sequence[str]) -> list[MCPServer]:
    """One `MCPServer` per `--mcp`: a URL (streamable HTTP) or a command line (stdio).

    Raises:
        ConfigurationError: An empty command line.
        MissingExtraError: The `mcp` extra is not installed.
    """
    if not specs:
        return []
    from llm_worker._extras import require_extra

    require_extra("mcp", "mcp", feature="llm-worker --mcp")
    from llm_worker.mcp import MCPServer

    servers: list[MCPServer] = []
    for spec in specs:
        if spec.startswith(("http://", "https://")):
            servers.append(MCPServer.http(spec))
            continue
        argv = shlex.split(spec)
        if not argv:
            raise ConfigurationError("--mcp needs a command line, e.g. --mcp 'uvx mcp-server-time'")
        servers.append(MCPServer.stdio(argv[0], argv[1:], name=spec))
    return servers


class HeldServers:
    """MCP servers kept connected across the turns of `chat`.

    Each turn runs in a task of its own (`asyncio.Runner.run`), but a server must be closed by
    the task that opened it: one task holds them all, from `start` to `stop`.
    """

    def __init__(self, servers: Sequence[MCPServer]) -> None:
        self.servers = list(servers)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect every server.

        Raises:
            MCPConnectionError: A server could not be started or initialized.
        """
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready))
        await ready

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                for server in self.servers:
                    await stack.enter_async_context(server)
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
                return
            raise

    async def stop(self) -> None:
        """Close every server (stdio servers' processes end)."""
        self._stop.set()
        if self._task is not None:
            await self._task


def load_tools(target: str) -> list[Any]:
    """The tools `module:name` names: a list of tools, or one tool.

    Raises:
        ConfigurationError: Not `module:name`, or the module or the name cannot be found.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"{target!r} is not module:name, e.g. my_app.tools:tools")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current folder, as `python -m` does
    try:
        value: object = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {target!r}: {exc}") from exc
    if isinstance(value, list | tuple):
        return list(value)  # pyright: ignore[reportUnknownArgumentType]
    return [value]


def serve_tools(target: str, name: str | None, http: str | None) -> int:
    """`llm-worker mcp-serve`: serve the tools over stdio, or over HTTP at `host:port`."""
    import anyio

    from llm_worker.mcp import serve

    tools = load_tools(target)
    server_name = name or target
    if http is None:
        anyio.run(lambda: serve(tools, name=server_name))
        return 0
    host, _, port = http.rpartition(":")
    if not port.isdigit():
        raise ConfigurationError(f"--http {http!r} is not HOST:PORT, e.g. 127.0.0.1:8000")
    address = host or "127.0.0.1"
    anyio.run(
        lambda: serve(tools, name=server_name, transport="http", host=address, port=int(port))
    )
    return 0
