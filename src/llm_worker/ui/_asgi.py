"""The plain ASGI the adapters need.

A JSON body read with a bound; an SSE body that stops when the browser goes away.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import aclosing
from typing import Any

import anyio
import orjson

__all__ = (
    "BadRequest",
    "Receive",
    "Scope",
    "Send",
    "json_items",
    "read_json",
    "send_json",
    "stream_sse",
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class BadRequest(Exception):
    """A request the adapter refuses, with its HTTP status and what is wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def closes(self) -> bool:
        """Whether the answer closes the connection.

        A body left unread (too slow, too large) would otherwise keep it open for as long as
        its client trickles bytes.
        """
        return self.status in (408, 413)


_WRITTEN_DEPTH = 254  # the deepest nesting orjson writes


async def read_json(
    receive: Receive,
    limit: int,
    *,
    seconds: float | None = None,
    max_items: int | None = None,
    items_cap: str = "max_items",
) -> Any:
    """The request's JSON body, refused when too large, too slow or not JSON.

    Refused past `limit` bytes or `max_items` JSON items (413; see `json_items`), when its
    last byte is not in within `seconds` (408), or when it is not JSON (400).
    """
    body = await _read_body(receive, limit, seconds)
    # Decoding holds the GIL (a worker thread would not free the event loop from it): its
    # cost is in the values it builds, which a count of the bytes that separate them bounds.
    if max_items is not None and (items := json_items(body)) > max_items:
        text = f"the request body holds {items:,} JSON items, over the limit of {max_items:,}"
        raise BadRequest(413, f"{text} ({items_cap})")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(400, f"the request body is not JSON: {exc}") from exc
    # orjson reads 1,024 levels but writes 254: a body nested deeper would be taken, then
    # fail with a bare TypeError mid-stream where it is written back (an AG-UI snapshot
    # echoes the messages, a tool part its input). Fewer openers cannot nest that deep.
    if body.count(b"[") + body.count(b"{") > _WRITTEN_DEPTH:
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            text = f"the request body nests deeper than {_WRITTEN_DEPTH} levels"
            raise BadRequest(400, text) from None
    return value


def json_items(body: bytes | bytearray) -> int:
    """A bound on the values, keys and containers decoding `body` builds.

    Its `{`, `[`, `,` and `:` bytes (one fast count each; those inside strings count too):
    every value past a container's first follows a `,`, every key a `:`; a container opens
    with `{` or `[`. Counting only `{` let a body of 11 million `[]` (33 MB) through: 8.4 s
    of decoding with the GIL held, every stream of the server stopped meanwhile.
    """
    return sum(body.count(byte) for byte in (b"{", b"[", b",", b":"))


async def _read_body(receive: Receive, limit: int, seconds: float | None) -> bytearray:
    # A deadline on the whole body, not per chunk: a client trickling one byte at a time
    # (slowloris) would otherwise hold its connection, and its memory, for ever.
    body = bytearray()
    with anyio.move_on_after(seconds) as deadline:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BadRequest(400, "the client went away before sending its body")
            body += message.get("body", b"")
            if len(body) > limit:
                raise BadRequest(413, f"the request body is over {limit:,} bytes")
            if not message.get("more_body", False):
                return body
    assert deadline.cancelled_caught
    raise BadRequest(408, f"the request body did not arrive within {seconds:g} s")


async def send_json(send: Send, status: int, data: object, *, close: bool = False) -> None:
    """A whole JSON response; with `close`, the connection closes after it."""
    body = orjson.dumps(data)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
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
