"""`POST {path}/{chat id}/steer`: a message for the chat's run while it streams.

The body is `{"message": "text"}` (and `"mode": "follow_up"` for a message taken in when the
run would finish; `"steer"` by default). The chat is found under its owner, as every request
of the adapters is (`Authorize`): a request of another user gets the same 403 whether the
chat exists or not, and can never reach another owner's run. The answers:

- 202 `{"queued": true}`: the running Worker has it (`Worker.steer` / `follow_up`); the run
  takes it in at its next boundary and its stream goes on with the answer to it;
- 404: no run of this chat is streaming on this server (start a new one with the message);
- 400 / 413 / 403: a body that is not such an object, too large, or a refused caller.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from llm_worker._json import as_dict, as_str
from llm_worker.ui._asgi import BadRequest, Receive, Scope, Send, read_json, send_json
from llm_worker.ui._auth import Authorize, Refused, chat_key, owner_of

if TYPE_CHECKING:
    from llm_worker.worker import Worker

__all__ = ("MAX_STEER_CHARS", "Running", "steer_id")

MAX_STEER_CHARS = 32_000
"""The longest message a steer request may carry (characters)."""
_MAX_STEER_BYTES = 4 * MAX_STEER_CHARS + 1024  # UTF-8 and the JSON around it


class Running:
    """The Workers whose runs stream now, by chat key (owner and chat id)."""

    __slots__ = ("_workers",)

    def __init__(self) -> None:
        self._workers: dict[str, Worker[Any]] = {}

    async def streaming(
        self, key: str, worker: Worker[Any], events: AsyncGenerator[str, None]
    ) -> AsyncGenerator[str, None]:
        """`events`, with `worker` reachable under `key` while they are read."""
        if key:  # a request naming no chat has no key to steer by
            self._workers[key] = worker
        try:
            async with aclosing(events) as stream:
                async for text in stream:
                    yield text
        finally:
            if self._workers.get(key) is worker:
                del self._workers[key]

    async def answer(
        self, authorize: Authorize | None, scope: Scope, receive: Receive, send: Send, chat_id: str
    ) -> None:
        """Answer one steer request (see the module docstring)."""
        if scope["method"] != "POST":
            await send_json(send, 405, {"error": "POST a message here"})
            return
        try:
            key = chat_key(await owner_of(authorize, scope, chat_id), chat_id)
            mode, text = _message(await read_json(receive, _MAX_STEER_BYTES, seconds=30.0))
        except Refused:
            await send_json(send, 403, {"error": "this request may not act on the chat"})
            return
        except BadRequest as exc:
            await send_json(send, exc.status, {"error": str(exc)}, close=exc.closes)
            return
        worker = self._workers.get(key)
        if worker is None:
            await send_json(send, 404, {"error": "no run of this chat is streaming"})
            return
        (worker.follow_up if mode == "follow_up" else worker.steer)(text)
        await send_json(send, 202, {"queued": True, "mode": mode})


def _message(raw: object) -> tuple[str, str]:
    body = as_dict(raw)
    text, mode = as_str(body.get("message")), body.get("mode", "steer")
    if not text or not text.strip():
        raise BadRequest(400, 'the body must be {"message": "a non-empty text"}')
    if len(text) > MAX_STEER_CHARS:
        raise BadRequest(413, f"the message is over {MAX_STEER_CHARS:,} characters")
    if mode not in ("steer", "follow_up"):
        raise BadRequest(400, '"mode" is "steer" or "follow_up"')
    return str(mode), text


def steer_id(scope: Scope) -> str | None:
    """The chat id of `…/{id}/steer`, or `None` for another path."""
    head, _, tail = str(scope.get("path", "")).rstrip("/").rpartition("/")
    if tail != "steer" or not head:
        return None
    return head.rpartition("/")[2] or None  # ASGI's path is already percent-decoded
