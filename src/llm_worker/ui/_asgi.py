"""The plain ASGI the adapters need.

A JSON body read with a bound; an SSE body that stops when the browser goes away.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import aclosing
from typing import Any

import anyio
import orjson

__all__ = ("BadRequest", "Receive", "Scope", "Send", "read_json", "send_json", "stream_sse")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class BadRequest(Exception):
    """A request the adapter refuses, with its HTTP status and what is wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_json(receive: Receive, limit: int) -> Any:
    """The request's JSON body, refused past `limit` bytes (413) or when not JSON (400)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BadRequest(400, "the client went away before sending its body")
        body += message.get("body", b"")
        if len(body) > limit:
            raise BadRequest(413, f"the request body is over {limit:,} bytes")
        if not message.get("more_body", False):
            break
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(400, f"the request body is not JSON: {exc}") from exc


async def send_json(send: Send, status: int, data: object) -> None:
    """A whole JSON response."""
    body = orjson.dumps(data)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def stream_sse(
    receive: Receive, send: Send, events: AsyncGenerator[str, None], headers: Mapping[str, str]
) -> bool:
    """Send `events` as the response body until they end or the client disconnects.

    A disconnect cancels the reading of `events` and closes it (so the run behind it is
    cancelled and cleaned up before this returns). Returns whether the stream ran to its end.
    """
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": 200, "headers": raw})
    finished = False

    async def pump(scope: anyio.CancelScope) -> None:
        nonlocal finished
        try:
            async with aclosing(events) as body:
                async for text in body:
                    chunk = {"type": "http.response.body", "body": text.encode(), "more_body": True}
                    await send(chunk)
            await send({"type": "http.response.body", "body": b""})
            finished = True
        except OSError:  # the socket broke while sending: a disconnect too
            pass
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(pump, group.cancel_scope)
        while (await receive())["type"] != "http.disconnect":
            pass
        group.cancel_scope.cancel()
    return finished
