"""What a browser is told when a run fails: never the internals an exception may carry.

An exception raised in a run (a tool's database error, a hook's bug, a file path) can hold
paths, SQL, host names or data of other users. The protocols' own servers mask them (the `ai`
SDK sends "An error occurred." unless `onError` says otherwise); the adapters do the same with
`on_error`, a callable from the exception to the text the browser sees. The default
(`safe_error_text`) shows what a person can act on — a provider's rate limit, overload,
refusal or rejected request, already scrubbed of credentials by the provider layer — and a
generic text for anything else; the full exception goes to the `llm_worker.ui` log.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_worker._log import logger
from llm_worker.errors import (
    Aborted,
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    ContentFilterError,
    InvalidRequestError,
    LimitExceededError,
    LLMWorkerError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitError,
    SessionBusyError,
    StreamError,
)

__all__ = ("GENERIC_ERROR", "ErrorText", "error_code", "error_text", "safe_error_text")

ErrorText = Callable[[BaseException], str]
"""Turns the exception that ended a run into the text the browser shows."""

GENERIC_ERROR = "An error occurred."
"""What the browser reads of a failure the default does not show (with a log reference)."""

_log = logger("llm_worker.ui")

# Typed failures a person can act on (wait, rephrase, shorten): their text is the provider's
# scrubbed message or the limit that was reached, and says nothing of the server's insides.
_SHOWN: tuple[type[BaseException], ...] = (
    RateLimitError,
    OverloadedError,
    ContentFilterError,
    InvalidRequestError,
    LimitExceededError,
    Aborted,
)
# Failures whose message may name hosts, addresses or keys: a fixed sentence instead.
_SAID: tuple[tuple[type[BaseException], str], ...] = (
    (APITimeoutError, "The model provider did not answer in time. Try again."),
    (APIConnectionError, "The model provider could not be reached. Try again."),
    (StreamError, "The model's answer broke off. Try again."),
    (AuthenticationError, "The model provider refused the server's authentication (API key)."),
    (PermissionDeniedError, "The model provider refused the server access to the model."),
    (NotFoundError, "The model provider does not know the model the server asked for."),
    # A chat kept on the server (`session_from`) that another request holds or answered
    # meanwhile (a second tab): its message names the session's key, the owner's id.
    (SessionBusyError, "Another request is working on this chat, or answered it: reload it."),
)


def safe_error_text(exc: BaseException) -> str:
    """The default `on_error`: the message of a failure a user can act on, else a generic text.

    Shown as they are: rate limits, overload, content filters, requests the provider
    rejected, llm-worker limits and hook aborts. Timeouts, connection failures, broken
    streams and refused credentials get a fixed sentence. Anything else (a tool's or a
    hook's own exception, a configuration problem) gets `GENERIC_ERROR`; the server's log
    has it whole.
    """
    if isinstance(exc, _SHOWN):
        return f"{type(exc).__name__}: {str(exc) or 'no message'}"
    for kind, text in _SAID:
        if isinstance(exc, kind):
            return text
    return GENERIC_ERROR


def error_text(exc: BaseException, on_error: ErrorText | None) -> str:
    """The text the browser sees of `exc`, with the full exception logged on the server.

    A failing `on_error` (one that raises, or gives no text UTF-8 can carry) must not turn
    one failure into a hung or broken stream: its own failure is logged and the generic text
    sent.
    """
    _log.error("a run streamed to a web client failed", exc_info=exc)
    try:
        return _sendable((on_error or safe_error_text)(exc))
    except Exception as failure:
        _log.error("on_error raised while describing a run's failure", exc_info=failure)
        return GENERIC_ERROR


def _sendable(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"on_error gave {type(text).__name__}, not a str")
    text.encode()  # a lone surrogate: no UTF-8 stream can carry it
    return text


def error_code(exc: BaseException) -> str:
    """A machine-readable code of `exc`: llm-worker's error class name, else `RunError`."""
    return type(exc).__name__ if isinstance(exc, LLMWorkerError) else "RunError"
