"""A ContextPolicy's view of a history as JSON data, carried by `PauseState.context`.

A resuming Worker (a fresh one, in another process) seeds its view from it and sends the
request the pausing Worker would: same cut, same summary, same replaced messages — no new
summary and no prompt-cache miss per resume. Data that does not fit the history (an edited
state, another version) is dropped: compacting afresh is always correct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_worker._json import as_dict, as_int, as_str
from llm_worker._tokens import message_chars
from llm_worker.messages import Message
from llm_worker.providers._media import inline_size

if TYPE_CHECKING:
    from llm_worker.worker._context import _View  # pyright: ignore[reportPrivateUsage]

__all__ = ("restore", "saved")

_FORMAT = 1


def saved(view: _View) -> dict[str, Any] | None:
    """The view as JSON data; None when nothing is compacted."""
    if not view.sent and view.lead is None and not view.boundary:
        return None
    return {
        "format": _FORMAT,
        "length": len(view.seen),
        "boundary": view.boundary,
        "cut": view.cut,
        "lead": None if view.lead is None else view.lead.to_dict(),
        "summary": view.summary,
        "rearm": view.rearm,
        "sent": {str(i): m.to_dict() for i, m in view.sent.items()},
    }


def restore(view: _View, data: dict[str, Any]) -> bool:
    """Seed a fresh view of the resumed history from `saved` data; False if it does not fit."""
    try:
        body = as_dict(data)
        n = len(view.history)
        boundary, cut = as_int(body.get("boundary")), as_int(body.get("cut"))
        length, rearm = as_int(body.get("length")), as_int(body.get("rearm")) or 0
        lead = body.get("lead")
        sent = {int(k): Message.from_dict(v) for k, v in as_dict(body.get("sent")).items()}
        if boundary is None or cut is None or length is None or body.get("format") != _FORMAT:
            return False
        if not (0 <= cut <= boundary <= length <= n and all(cut <= i < boundary for i in sent)):
            return False
        view.reset()
        view.seen = list(view.history[:length])
        view.media = inline_size(view.seen)
        for message in view.seen:
            view.prefix.append(view.prefix[-1] + message_chars(message, view.provider))
        view.boundary, view.cut, view.rearm = boundary, cut, rearm
        view.sent = sent
        view.sent_chars = {i: message_chars(m, view.provider) for i, m in sent.items()}
        view.lead = None if lead is None else Message.from_dict(lead)
        view.summary = as_str(body.get("summary"))
    except (KeyError, TypeError, ValueError):
        view.reset()
        return False
    view.lead_chars = message_chars(view.lead, view.provider) if view.lead is not None else 0
    view.old_chars = sum(
        view.sent_chars.get(i, view.own_chars(i)) for i in range(view.cut, view.boundary)
    )
    return True
