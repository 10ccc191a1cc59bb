"""Who may act on a chat: the `authorize` seam every request of the adapters goes through.

A chat (thread) id is chosen by the browser and travels in URLs and bodies: knowing it must
not let a second client answer the chat's pause, read its run or stop it. So the adapters
ask the application, once per request, who the request's owner is (`authorize`), and keep
every pause and every resumable run under the owner *and* the chat id: a client only ever
reaches the chats it owns, whatever ids it sends.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from llm_worker._extras import require_extra
from llm_worker._log import logger
from llm_worker.ui._asgi import BadRequest, Scope
from llm_worker.ui._errors import GENERIC_ERROR

__all__ = ("Authorize", "Refused", "chat_key", "owner_of", "owner_part")

_log = logger("llm_worker.ui")

Authorize = Callable[[Any, str], "str | Awaitable[str | None] | None"]
"""`authorize(request, chat_id) -> owner | None`, sync or async.

`request` is a `starlette.requests.Request` of the ASGI scope (its headers, cookies,
`request.user` under Starlette's `AuthenticationMiddleware`; its body is already read), and
`chat_id` the chat (thread) id the request names ("" for a Vercel request without one).
Return the request's owner (a user id, a session id: any non-empty string that is the same
for every request of one person), or `None` to refuse the request (403; so is "" or
anything not a string). The adapters key pauses and runs by owner and chat id, so
returning the user's id is enough: another user's chat id
names, for this user, a chat of their own."""


class Refused(Exception):
    """`authorize` refused the request (answered 403, whatever the chat holds)."""


async def owner_of(authorize: Authorize | None, scope: Scope, chat_id: str) -> str:
    """The owner of the request `scope` naming `chat_id`.

    Without `authorize` it is the authenticated user of the ASGI scope (Starlette's
    `AuthenticationMiddleware` sets `scope["user"]`), else "": every client is one user,
    which is safe only on a loopback address (`llm-worker serve` binds to 127.0.0.1 then).

    Raises:
        Refused: `authorize` returned `None` (or "", or not a string).
        BadRequest: `authorize` raised (500, a generic text; the exception is logged on
            `llm_worker.ui`: it may name hosts or credentials).
    """
    if authorize is None:
        return _scope_user(scope)
    request = require_extra("starlette.requests", "web", feature="llm_worker.ui").Request(scope)
    try:
        owner = authorize(request, chat_id)
        if inspect.isawaitable(owner):
            owner = await owner
    except Exception as exc:
        _log.error("authorize failed", exc_info=exc)
        raise BadRequest(500, GENERIC_ERROR) from exc
    # "" is the one owner of every request when nothing authenticates them: an authorize
    # answering it (a `.get("user", "")` slip) would pool its unknown requests into one.
    if not isinstance(owner, str) or not owner:
        raise Refused
    return owner


def _scope_user(scope: Scope) -> str:
    user = scope.get("user")
    if user is None or not getattr(user, "is_authenticated", False):
        return ""
    return str(getattr(user, "identity", None) or getattr(user, "display_name", ""))


def chat_key(owner: str, chat_id: str) -> str:
    """The key of `owner`'s chat `chat_id` in the pause store and the resumable runs.

    "" for a request naming no chat: such a request's run is never kept and never reaches
    another's pause. The owner's length leads, so no owner and chat id pair can spell another
    pair's key.
    """
    if not chat_id:
        return ""
    return f"{len(owner)}:{owner}:{chat_id}"


def owner_part(key: str) -> str:
    """The owner in a `chat_key` (its length leads); any other key is an owner of its own."""
    length, colon, rest = key.partition(":")
    if (
        colon
        and length.isdecimal()
        and len(length) < 10
        and len(rest) > int(length)
        and rest[int(length)] == ":"
    ):
        return rest[: int(length)]
    return key
