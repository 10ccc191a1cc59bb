"""KeyPool: several API keys of one provider and model, rotated on 429, a refused key dropped.

A pool is an `LLMClient` (one `HttpClient` per key, the same model and settings), so it
stands wherever a client does — alone, or as one client of a `FallbackClient`. A request
goes to the current key; a 429 puts that key in a cooldown (its `Retry-After`, else
`key_cooldown` seconds) and the pool moves on to the next key at once; a 401 drops the key
for good. Keys never appear in a repr, a log record or an error: they are named by their
index in the pool (`key #1`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Self, cast

from llm_worker._log import logger
from llm_worker.errors import (
    AuthenticationError,
    ConfigurationError,
    ProviderError,
    RateLimitError,
)
from llm_worker.events import ErrorEvent, Event, ResponseStatus, StatusEvent
from llm_worker.messages import Request
from llm_worker.providers._base import HttpClient
from llm_worker.providers._http import RetryPolicy, Transport

__all__ = ("KeyPool",)

_log = logger("llm_worker.fallback")


class KeyPool:
    """An `LLMClient` over several API keys of one model, rotated on rate limits.

    Each key's client retries by its `RetryPolicy` as usual, except that a `Retry-After` is
    not waited for: the pool moves to the next key instead, and the key sits out that long.
    When no key is left to try, the last failure is raised: a `RateLimitError` (every key
    cooling down; `retry_after` says when the first is back, so a `FallbackClient` falls
    over) or an `AuthenticationError` naming the refused keys by index.

    Args:
        model: A model string, `"anthropic:claude-sonnet-4-5"`.
        keys: The API keys (two or more make sense; each used at most once per request).
        key_cooldown: Seconds a key sits out after a 429 that gave no `Retry-After`.
        max_retry_after: The longest `Retry-After` honoured, in seconds (a longer one is cut
            to this, as a `Cooldown`'s), so a wrong header cannot shut a key out for a day.
        clock: The monotonic clock (seconds); tests give their own.
        **options: More arguments for each key's client (`base_url`, `timeout`, `retry`, …).

    Raises:
        ConfigurationError: No key, an empty key, a key given twice, a wait that is not
            seconds (negative, NaN), or a bad model string.
    """

    __slots__ = (
        "_clients",
        "_clock",
        "_current",
        "_dropped",
        "_lock",
        "_until",
        "key_cooldown",
        "max_retry_after",
    )

    def __init__(
        self,
        model: str,
        keys: Sequence[str],
        *,
        key_cooldown: float = 60.0,
        max_retry_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        **options: Any,
    ) -> None:
        """Create the pool; the class docstring describes the arguments."""
        from llm_worker.providers import from_string

        _check_keys(keys)
        for name, value in (("key_cooldown", key_cooldown), ("max_retry_after", max_retry_after)):
            if not 0 <= value < float("inf"):  # also refuses NaN
                raise ConfigurationError(f"KeyPool({name}={value!r}): seconds, 0 or more")
        retry: RetryPolicy = options.pop("retry", None) or RetryPolicy()
        options["retry"] = dataclasses.replace(retry, max_retry_after=0.0)
        self._clients: tuple[HttpClient, ...] = tuple(
            from_string(model, api_key=key, **options) for key in keys
        )
        self.key_cooldown = key_cooldown
        self.max_retry_after = max_retry_after
        self._clock = clock
        self._current = 0
        self._until = [0.0] * len(keys)
        self._dropped: set[int] = set()
        self._lock = threading.Lock()

    @property
    def provider(self) -> str:
        """The wire protocol's name."""
        return self._clients[0].provider

    @property
    def model(self) -> str:
        """The model name sent in requests."""
        return self._clients[0].model

    @property
    def transport(self) -> Transport:
        """The first key's transport (its base URL names the pool's server)."""
        return self._clients[0].transport

    @property
    def pool_identity(self) -> str:
        """What tells this pool's cooldown apart from a single key's client of the same model."""
        return f"of {len(self._clients)} keys"

    @property
    def usable(self) -> list[int]:
        """The indexes of the keys not dropped (cooling down or not)."""
        return [i for i in range(len(self._clients)) if i not in self._dropped]

    def __repr__(self) -> str:
        alive = len(self._clients) - len(self._dropped)
        return f"KeyPool({self.provider}:{self.model}, keys={len(self._clients)}, usable={alive})"

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Stream the request with the first key that is neither cooling down nor dropped.

        Raises:
            RateLimitError: Every key usable is cooling down.
            AuthenticationError: Every key was refused (401); the keys named by index.
            ProviderError: Any other failure of the key's client, as it is.
        """
        return self._stream(request)

    async def _stream(self, request: Request) -> AsyncIterator[Event]:
        tried: set[int] = set()
        last: ProviderError | None = None
        while (index := self._pick(tried)) is not None:
            tried.add(index)
            began = False
            held: list[Event] = []  # the key's failure, unless another key answers
            try:
                async for event in self._clients[index].stream(request):
                    if not began and _before_answer(event):
                        held.append(event)
                        continue
                    began = began or type(event) is StatusEvent
                    yield event
                return
            except ProviderError as exc:
                if began or not isinstance(exc, RateLimitError | AuthenticationError):
                    for event in held:
                        yield event
                    raise
                self._set_aside(index, exc)
                last = exc
        error = self._exhausted(last)
        yield ErrorEvent(error.error_type, error.message)
        yield StatusEvent(ResponseStatus.FAILED)
        raise error

    def _pick(self, tried: set[int]) -> int | None:
        """The next key to try: the current one, else the next usable, not cooling down."""
        now = self._clock()
        count = len(self._clients)
        with self._lock:
            for step in range(count):
                index = (self._current + step) % count
                if index in tried or index in self._dropped or self._until[index] > now:
                    continue
                self._current = index
                return index
        return None

    def _set_aside(self, index: int, exc: ProviderError) -> None:
        with self._lock:
            if isinstance(exc, AuthenticationError):
                self._dropped.add(index)
                what = "was refused (HTTP 401) and is dropped from the pool"
            else:
                asked = exc.retry_after
                # A Retry-After of a year (or inf, or an HTTP date far ahead) is cut: the
                # key would never come back.
                wait = self.key_cooldown if asked is None or not asked >= 0 else asked
                wait = min(wait, self.max_retry_after)
                self._until[index] = self._clock() + wait
                what = f"is rate-limited: it sits out {wait:.0f} s"
            self._current = (index + 1) % len(self._clients)
        _log.warning(
            "%s key #%d of %d %s",
            self.provider,
            index,
            len(self._clients),
            what,
            extra={"provider": self.provider, "key_index": index},
        )

    def _exhausted(self, last: ProviderError | None) -> ProviderError:
        usable = self.usable
        if not usable:
            dropped = ", ".join(f"#{i}" for i in sorted(self._dropped))
            return AuthenticationError(
                f"every key of the pool was refused (HTTP 401): keys {dropped} of "
                f"{len(self._clients)}",
                provider=self.provider,
                status_code=401,
            )
        now = self._clock()
        wait = min(max(0.0, self._until[i] - now) for i in usable)
        status = last.status_code if last is not None else 429
        return RateLimitError(
            f"every usable key of the pool is rate-limited ({len(usable)} of "
            f"{len(self._clients)} keys usable; the first is back in {wait:.0f} s)",
            provider=self.provider,
            status_code=status,
            error_type="rate_limit_error",
            retry_after=wait,
        )

    async def aclose(self) -> None:
        """Close every key's connection pool."""
        for client in self._clients:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _check_keys(keys: Sequence[str]) -> None:
    if isinstance(keys, str) or not keys:
        raise ConfigurationError("KeyPool needs a list of one or more API keys")
    if not all(isinstance(cast("object", k), str) and k for k in keys):  # untyped callers
        raise ConfigurationError("KeyPool: every key must be a non-empty string")
    if len(set(keys)) != len(keys):
        raise ConfigurationError("KeyPool: a key is given twice (keys are named by index)")


def _before_answer(event: Event) -> bool:
    """The error and FAILED status of a failure before the answer began."""
    if type(event) is ErrorEvent:
        return True
    return type(event) is StatusEvent and event.status is ResponseStatus.FAILED
