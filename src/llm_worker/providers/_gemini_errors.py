"""Gemini's failures read from its stream: an `error` object, a blocked prompt, a filtered answer.

Each becomes the typed error of `llm_worker.errors` that `drive` reports after the abort, the
error event and the FAILED status (`gemini.py` maps the rest of the stream).
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker.errors import ContentFilterError
from llm_worker.providers._http import error_class

_PROVIDER: Final = "gemini"


def stream_error(error: dict[str, Any]) -> Exception:
    """The typed error of an `error` object sent inside the stream (its code and status)."""
    code = as_int(error.get("code"))
    status = as_str(error.get("status"))
    message = as_str(error.get("message")) or "Gemini reported an error in the stream"
    cls = error_class(code, status)
    return cls(message, provider=_PROVIDER, status_code=code, error_type=status, streamed=True)


def check_prompt(feedback: dict[str, Any]) -> None:
    """Raise `ContentFilterError` when `promptFeedback` says the prompt was blocked."""
    reason = as_str(feedback.get("blockReason"))
    if reason is None:
        return
    detail = as_str(feedback.get("blockReasonMessage"))
    categories = _blocked_categories(feedback)
    raise ContentFilterError(
        f"the prompt was blocked (blockReason {reason}{categories})"
        + (f": {detail}" if detail else ""),
        provider=_PROVIDER,
        error_type=reason,
        streamed=True,
    )


def filtered(reason: str, candidate: dict[str, Any]) -> ContentFilterError:
    """The error of an answer a filter finished before any content (`finishReason` `reason`)."""
    detail = as_str(candidate.get("finishMessage"))
    return ContentFilterError(
        f"the answer was blocked before any content (finishReason {reason}"
        f"{_blocked_categories(candidate)})" + (f": {detail}" if detail else ""),
        provider=_PROVIDER,
        error_type=reason,
        streamed=True,
    )


def _blocked_categories(holder: dict[str, Any]) -> str:
    blocked = [
        str(as_dict(r).get("category"))
        for r in as_list(holder.get("safetyRatings"))
        if as_dict(r).get("blocked")
    ]
    return f"; blocked: {', '.join(blocked)}" if blocked else ""
