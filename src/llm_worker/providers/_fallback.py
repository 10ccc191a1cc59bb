"""FallbackClient: one request, several clients in order, even when a stream breaks mid-way.

What is retried and fallen over where (`docs/fallback.md` has the worst-case counts):

1. each client first retries by its own `RetryPolicy`, before the answer's first byte;
2. a failure of a class in `fallback_on` — before the answer or in the middle of it — sends
   the same request to the next client whose cooldown lets it be tried;
3. the Worker's `StreamRetry` sees only the last client's failure (the fallback client
   raises it after every client was tried).

Mid-stream, the failed answer is rolled back as a stream retry rolls it back: the failed
client's own events end it (the open block's `BlockAbort`, an `ErrorEvent`, a FAILED
`StatusEvent`), and the next client's answer follows from its `StatusEvent(STARTED)`, block
indexes from 0. Every status event carries `source`, the client that streams the answer, so
a consumer that sees a second STARTED knows to start over (the Worker's assembler does: its
history never holds half an answer). A failure before the answer began is not shown at all
when the next client answers: its error and FAILED status are held back, and given only
when the failure is raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Self, cast

from llm_worker._log import logger
from llm_worker._retries import retrying
from llm_worker._tokens import TokenCount, TokenEstimator
from llm_worker.errors import ConfigurationError, OverloadedError, ProviderError
from llm_worker.events import ErrorEvent, Event, ResponseStatus, StatusEvent
from llm_worker.messages import Origin, Request
from llm_worker.providers._base import LLMClient
from llm_worker.providers._cooldown import Breaker, Cooldown, breaker_for, client_identity
from llm_worker.providers._fallback_policy import (
    DEFAULT_FALLBACK_ON,
    FallbackOn,
    classify,
    fallback_test,
)
from llm_worker.providers._http import RetryPolicy

__all__ = ("FallbackClient",)

_log = logger("llm_worker.fallback")


class FallbackClient:
    """An `LLMClient` that sends each request to the first of its clients that answers.

    A Worker, a durable run and the web adapters take it as they take any client. Its
    `provider` and `model` are the first client's; the client that actually answered is
    `StatusEvent.source` on every status event of the answer (the Worker records it on
    `RunResult.request_usage`, prices the answer by it, and marks the opaque data of the
    answer — signatures, item ids — with it, so that data never goes to another provider).

    Args:
        clients: The clients, in order of preference (two or more make sense; one works).
        fallback_on: The failure classes that fall over (`FailureClass`; by default
            overloaded, rate limit, server error, timeout, connection, interrupted stream),
            or a function of the `ProviderError` that says whether to.
        cooldown: The circuit breaker of each client (`Cooldown()`: three failures in a
            minute skip a client for 30 s; a `Retry-After` is honoured); breakers are
            shared by every client of the process with the same provider, base URL and
            model. `Cooldown.disabled()` tries every client every time.

    Raises:
        ConfigurationError: No client, or an unknown failure class.
    """

    __slots__ = ("_breakers", "_falls_over", "_origins", "_owned", "clients", "cooldown")

    def __init__(
        self,
        clients: Sequence[LLMClient],
        *,
        fallback_on: FallbackOn = DEFAULT_FALLBACK_ON,
        cooldown: Cooldown | None = None,
    ) -> None:
        """Create the client; the class docstring describes the arguments."""
        if not clients:
            raise ConfigurationError("FallbackClient needs at least one client")
        self.clients: tuple[LLMClient, ...] = tuple(clients)
        self.cooldown = cooldown or Cooldown()
        self._falls_over = fallback_test(fallback_on)
        self._origins = tuple(Origin(c.provider, c.model) for c in self.clients)
        self._breakers: tuple[Breaker, ...] = tuple(
            breaker_for(client_identity(c, c.provider, c.model)) for c in self.clients
        )
        self._owned: tuple[Any, ...] = ()

    @classmethod
    def from_models(
        cls,
        models: Sequence[str],
        *,
        fallback_on: FallbackOn = DEFAULT_FALLBACK_ON,
        cooldown: Cooldown | None = None,
        **options: Any,
    ) -> Self:
        """A fallback client over model strings (`"anthropic:claude-sonnet-4-5"`, …).

        `options` go to every client's constructor (`timeout`, `retry`, …; keys come from
        each provider's environment variable). Without `retry`, every client but the last
        gets the default `RetryPolicy` except that it does not wait out a `Retry-After`: the
        next client answers at once, and the cooldown keeps the limited one out that long.
        `aclose()` closes the clients made here.

        Raises:
            ConfigurationError: No model, or a model string without a known provider.
        """
        from llm_worker.providers import from_string

        if not models or isinstance(models, str):
            raise ConfigurationError("FallbackClient.from_models needs a list of model strings")
        for model in cast("Sequence[object]", models):  # untyped callers: Worker([client, …])
            if not isinstance(model, str):
                raise ConfigurationError(
                    f"a list of model strings is expected, not {type(model).__name__}: for "
                    "clients, pass FallbackClient([client, ...]) itself"
                )
        made = [
            from_string(model, **_options_for(options, last=n == len(models) - 1))
            for n, model in enumerate(models)
        ]
        client = cls(made, fallback_on=fallback_on, cooldown=cooldown)
        client._owned = tuple(made)
        return client

    @property
    def provider(self) -> str:
        """The first client's wire protocol (the one preferred)."""
        return self.clients[0].provider

    @property
    def model(self) -> str:
        """The first client's model (the one preferred)."""
        return self.clients[0].model

    def __repr__(self) -> str:
        names = ", ".join(f"{o.provider}:{o.model}" for o in self._origins)
        return f"FallbackClient([{names}])"

    async def count_tokens(self, request: Request) -> TokenCount:
        """The input tokens of `request` by the first client that counts it.

        The preferred client's count first (its model's tokenizer is the one that matters
        most); a client without `count_tokens`, or whose count fails, passes to the next.
        When none counts: 4 characters a token (`TokenCount.source == "estimate"`).
        """
        for client in self.clients:
            count = getattr(client, "count_tokens", None)
            if count is None:
                continue
            try:
                counted: TokenCount = await count(request)
            except ProviderError as exc:
                _log.info("count_tokens of %r failed (%s)", client, type(exc).__name__)
                continue
            return counted
        return TokenEstimator().estimate(request)

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Stream the request from the first client that answers (see the module docstring).

        Raises:
            ProviderError: The last client's failure (the earlier ones as notes), a failure
                that does not fall over, or `OverloadedError` when every client is cooling
                down (its `retry_after` says when the first comes back).
        """
        return self._stream(request)

    async def _stream(self, request: Request) -> AsyncIterator[Event]:
        failures: list[ProviderError] = []
        ending: list[Event] = []  # the last failure's error and FAILED status, held back
        for index, client in enumerate(self.clients):
            breaker = self._breakers[index]
            if not breaker.acquire(self.cooldown.clock()):
                continue
            gate = _Gate(self._origins[index])
            verdict = False
            try:
                async for event in client.stream(request):
                    # The hot path: a delta passes two type checks and nothing more.
                    if (type(event) is StatusEvent or type(event) is ErrorEvent) and gate.holds(
                        event
                    ):
                        continue
                    yield event
                breaker.succeeded()
                verdict = True
                return
            except ProviderError as exc:
                verdict = self._failed(breaker, exc)
                failures.append(exc)
                if not self._falls_over(exc):
                    for event in gate.held:
                        yield event
                    raise
                self._told(index, exc)
                ending = gate.held
            finally:
                if not verdict:
                    breaker.released()
        error = self._exhausted(failures)
        if not failures:
            ending = [ErrorEvent(error.error_type, error.message)]
            ending.append(StatusEvent(ResponseStatus.FAILED))
        for event in ending:
            yield event
        raise error

    def _failed(self, breaker: Breaker, exc: ProviderError) -> bool:
        """Count a failure against the client's breaker; whether that was a verdict."""
        kind = classify(exc)
        if kind is None or kind == "context_length":
            return False  # the request's fault, not the client's
        breaker.failed(self.cooldown.clock(), exc, self.cooldown)
        return True

    def _told(self, index: int, exc: ProviderError) -> None:
        retrying("fallback", exc, index + 1, 0.0)  # an event on the request's span
        after = "mid-stream" if exc.streamed else "before the answer"
        following = self._origins[index + 1] if index + 1 < len(self._origins) else None
        _log.warning(
            "%s:%s failed %s (%s%s); falling over to %s",
            self._origins[index].provider,
            self._origins[index].model,
            after,
            exc.error_type or type(exc).__name__,
            f", HTTP {exc.status_code}" if exc.status_code is not None else "",
            f"{following.provider}:{following.model}" if following else "the next client",
            extra={"provider": exc.provider, "status": exc.status_code, "client_index": index},
        )

    def _exhausted(self, failures: list[ProviderError]) -> ProviderError:
        if failures:
            last = failures[-1]
            for earlier in failures[:-1]:
                last.add_note(f"fallback: an earlier client failed too: {earlier!r}")
            return last
        now = self.cooldown.clock()
        waits = [b.remaining(now) for b in self._breakers]
        names = ", ".join(
            f"{o.provider}:{o.model} ({w:.0f} s)" for o, w in zip(self._origins, waits, strict=True)
        )
        return OverloadedError(
            f"every client is cooling down after failures: {names}",
            provider="fallback",
            error_type="cooling_down",
            retry_after=min(waits),
        )

    async def aclose(self) -> None:
        """Close the clients `from_models` made (clients passed in are yours to close)."""
        for client in self._owned:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Gate:
    """One client's status and error events: stamped with the client, or held back.

    A failure before the answer began is the client's business alone while another client
    may still answer: its error and FAILED status wait in `held`.
    """

    __slots__ = ("began", "held", "origin")

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.began = False
        self.held: list[Event] = []

    def holds(self, event: StatusEvent | ErrorEvent) -> bool:
        """Stamp a status with the client (unless it names one); whether it is held back."""
        if type(event) is StatusEvent:
            if event.source is None:  # a nested FallbackClient named its own answering client
                event.source = self.origin
            if event.status is ResponseStatus.STARTED:
                self.began = True
                return False
            if event.status is not ResponseStatus.FAILED:
                return False
        if self.began:
            return False
        self.held.append(event)
        return True


def _options_for(options: dict[str, Any], *, last: bool) -> dict[str, Any]:
    if "retry" in options or last:
        return options
    return {**options, "retry": RetryPolicy(max_retry_after=0.0)}
