"""What a failed stream yields last (abort, error, FAILED) and the error it raises (`drive`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from llm_worker.errors import (
    AnswerTooLargeError,
    LLMWorkerError,
    MalformedStreamError,
    ProviderError,
    StreamInterruptedError,
)
from llm_worker.events import ErrorEvent, Event, ResponseStatus, StatusEvent
from llm_worker.providers._secrets import chain_leaks, scrub_error

if TYPE_CHECKING:
    from llm_worker.providers._blocks import BlockEmitter

__all__ = ("Failure",)


@dataclass(slots=True)
class Failure:
    """What a failed stream yields last (abort, error, FAILED), and the error it raises."""

    events: list[Event]
    error: Exception
    cause: BaseException | None

    def throw(self, exc: Exception) -> NoReturn:
        """Raise the error: `exc` itself, or the error made of it, chained to its cause."""
        if self.error is exc:
            raise exc
        raise self.error from self.cause

    @classmethod
    def of(
        cls,
        exc: Exception,
        emitter: BlockEmitter,
        mapper: object,
        end_of_read: Callable[[BlockEmitter], None],
        *,
        provider: str,
        scrub: Callable[[str], str],
    ) -> Failure | None:
        """The failure `exc` is, or `None` when it is no failure of the stream to report."""
        if isinstance(exc, ProviderError):
            _read_ended(end_of_read, emitter)
            _adopt(exc, provider, scrub)
            events = _failure(emitter, exc, scrub)
            caller_error = getattr(mapper, "caller_error", None)  # optional: StreamMapper
            better = caller_error(exc) if caller_error is not None else None
            return cls(events, exc, None) if better is None else cls(events, better, exc)
        if isinstance(exc, LLMWorkerError) or not isinstance(exc, _UNREADABLE):
            return None
        _read_ended(end_of_read, emitter)
        # orjson.JSONDecodeError is a ValueError; the others come from chunks whose shape
        # differs from the protocol (a missing key, a list where an object should be).
        error = _unreadable(exc, provider, scrub)
        cause = None if chain_leaks(exc, scrub) else exc
        return cls(_failure(emitter, error, scrub), error, cause)


_UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def _read_ended(end_of_read: Callable[[BlockEmitter], None], emitter: BlockEmitter) -> None:
    # The events of the read mapped before the failure: what a mapper holds until the read
    # ends (Gemini's running usage) is reported, as it is when the failure comes a read later
    # (the tokens were spent either way). It must not hide the failure itself.
    with contextlib.suppress(Exception):
        end_of_read(emitter)


def _unreadable(exc: Exception, provider: str, scrub: Callable[[str], str]) -> MalformedStreamError:
    """The error of a stream whose data a mapper could not read, naming what it tripped on."""
    return MalformedStreamError(
        f"unreadable data in the stream: {type(exc).__name__}: {scrub(str(exc))[:300]}",
        provider=provider,
        streamed=True,
    )


def _adopt(exc: ProviderError, provider: str, scrub: Callable[[str], str]) -> None:
    # Errors raised by the emitter or a mapper may lack the provider, and a provider's error
    # event may echo the API key: the raised error must read as well as the ErrorEvent.
    if exc.provider is None:
        exc.provider = provider
    scrub_error(exc, scrub)


def _failure(emitter: BlockEmitter, exc: ProviderError, scrub: Callable[[str], str]) -> list[Event]:
    events: list[Event] = list(emitter.out)
    emitter.out.clear()
    emitter.abort(scrub(exc.message))
    events.extend(emitter.out)
    emitter.out.clear()
    events.append(ErrorEvent(exc.error_type or _code(exc), scrub(exc.message)))
    info = emitter.info
    events.append(
        StatusEvent(
            ResponseStatus.FAILED,
            info.response_id,
            info.model,
            info.service_tier,
            info.system_fingerprint,
        )
    )
    return events


def _code(exc: ProviderError) -> str:
    if isinstance(exc, AnswerTooLargeError):
        return "answer_too_large"
    if isinstance(exc, StreamInterruptedError):
        return "stream_interrupted"
    if isinstance(exc, MalformedStreamError):
        return "malformed_stream"
    return type(exc).__name__
