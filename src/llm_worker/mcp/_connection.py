"""One live connection to an MCP server: transport, SDK session, fault watch.

The connection runs in a task of its own (the SDK's context managers must be entered and left
in one task). Between the transport and the SDK's session sits a forwarder, which notices what
the SDK would not tell: the server exited or dropped the connection, or it sent something that
is not JSON-RPC. Either ends the connection at once, and every request waiting on it (see
`guarded`) fails instead of hanging.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import anyio

from llm_worker._extras import require_extra
from llm_worker._log import logger
from llm_worker.mcp._transports import Transport

__all__ = ("ConnectionLost", "Live", "guarded", "open_connection")

_log = logger("llm_worker.mcp")
T = TypeVar("T")


class ConnectionLost(Exception):
    """The connection ended while a request waited on it (the reason is the message)."""


@dataclass(slots=True)
class Live:
    """A connection: its session once initialized, and how it ended."""

    session: Any = None
    stop: anyio.Event = field(default_factory=anyio.Event)
    """Set to close the connection (by the owner, or by the forwarder on a fault)."""
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set once no answer can come any more."""
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set when initialized, or when it failed to be (then `error`)."""
    fault: str = "the connection was closed"
    error: BaseException | None = None

    def end(self, why: str) -> None:
        """End the connection, saying why (the first reason wins)."""
        if not self.closed.is_set():
            self.fault = why
            self.closed.set()
        self.stop.set()


async def guarded(live: Live, request: Callable[[], Awaitable[T]]) -> T:
    """Run `request` on the connection; raise `ConnectionLost` if the connection ends first."""
    outcome: list[T] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await live.closed.wait()
            group.cancel_scope.cancel()

        group.start_soon(watch)
        try:
            outcome.append(await request())
        except Exception as exc:  # re-raised below, unwrapped by the task group
            failure.append(exc)
        group.cancel_scope.cancel()
    if failure:
        raise failure[0]
    if not outcome:
        raise ConnectionLost(live.fault)
    return outcome[0]


async def open_connection(
    live: Live,
    transport: Transport,
    init_timeout: float,
    on_message: Callable[[Any], Awaitable[None]],
    on_log: Callable[[Any], Awaitable[None]],
) -> None:
    """Connect, initialize and hold the connection until `live.stop`; never raises.

    `live.ready` is set once the session is initialized, or with `live.error` when it could
    not be within `init_timeout` seconds.
    """
    try:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(transport())
            stack.push_async_callback(read.aclose)  # the forwarder's; the SDK leaves it open
            sdk = require_extra("mcp", "mcp", feature="MCPServer")
            inner, outer = anyio.create_memory_object_stream[Any](16)
            stack.enter_context(inner)
            stack.enter_context(outer)
            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(_forward, read, inner, live)
            session = await stack.enter_async_context(
                sdk.ClientSession(outer, write, message_handler=on_message, logging_callback=on_log)
            )
            stack.callback(group.cancel_scope.cancel)  # the forwarder, before the session ends
            with anyio.fail_after(init_timeout):
                await guarded(live, session.initialize)
            live.session = session
            live.ready.set()
            await live.stop.wait()
    except Exception as exc:  # a failed start, or a failing transport: the connection ended
        if not live.ready.is_set():
            live.error = _leaf(exc)
        leaf = _leaf(exc)
        status: object = getattr(getattr(leaf, "response", None), "status_code", None)
        # httpx's message holds the URL, and keys travel in URLs: the status is enough.
        _log.debug("MCP connection ended: %s", f"HTTP {status}" if status else repr(leaf))
    finally:
        live.end(live.fault)
        live.ready.set()


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested task groups' exception groups."""
    found: BaseException = exc
    while isinstance(found, BaseExceptionGroup):
        inner = cast("tuple[BaseException, ...]", found.exceptions)  # pyright: ignore[reportUnknownMemberType]
        if len(inner) != 1:
            break
        found = inner[0]
    return cast("BaseException", found)


async def _forward(source: Any, sink: Any, live: Live) -> None:
    why = "the server closed the connection (it exited, or the transport ended)"
    try:
        async with sink:
            async for item in source:
                if isinstance(item, Exception):
                    why = f"the server sent a message that is not valid JSON-RPC ({item})"
                    break
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    live.end(why)
