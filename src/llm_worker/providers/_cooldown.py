"""Cooldowns: a circuit breaker per client, shared by every Worker of the process.

A client that keeps failing is skipped for a while rather than tried (and waited on) by
every request: after `Cooldown.failures` failures within `Cooldown.window` seconds its
circuit opens for `Cooldown.duration` seconds; then one request may try it (half-open) —
its success closes the circuit, its failure opens it again. A 429 (or 503) that says
`Retry-After: N` opens the circuit for N seconds at once: the provider said when to come
back.

Breakers are found by the client's identity (provider, base URL, model, and a digest of its
key), not by the client object, so two Workers that each made their own client for the same
model and key share one; a client with another key (another account, with its own rate
limits) has its own.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from llm_worker.errors import ConfigurationError, ProviderError

__all__ = ("Breaker", "Cooldown", "breaker_for", "client_identity", "credential_tag")


@dataclass(slots=True, frozen=True)
class Cooldown:
    """When a failing client is skipped, and for how long.

    Attributes:
        failures: Failures within `window` that open the circuit (1: the first does).
        window: Seconds over which failures are counted.
        duration: Seconds an open circuit skips the client before one request may try it.
        max_retry_after: The longest `Retry-After` honoured, in seconds (a longer one is cut
            to this), so a wrong header cannot shut a client out for a day.
        clock: The monotonic clock (seconds); tests give their own.
    """

    failures: int = 3
    window: float = 60.0
    duration: float = 30.0
    max_retry_after: float = 600.0
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def __post_init__(self) -> None:
        if self.failures < 1:
            raise ConfigurationError(f"Cooldown(failures={self.failures}): at least 1")
        for name in ("window", "duration", "max_retry_after"):
            value: float = getattr(self, name)
            if not value >= 0:  # also refuses NaN
                raise ConfigurationError(f"Cooldown({name}={value!r}): seconds, 0 or more")

    @classmethod
    def disabled(cls) -> Cooldown:
        """Never skip a client (each request tries every client in order)."""
        return cls(failures=1, window=0.0, duration=0.0, max_retry_after=0.0)


class Breaker:
    """The circuit of one client: closed (used), open (skipped) or half-open (one probe).

    Thread-safe: Workers in several threads (each with its own event loop) share it.
    """

    __slots__ = ("_failures", "_lock", "_open_until", "_probing")

    def __init__(self) -> None:
        self._failures: list[float] = []
        self._open_until = 0.0
        self._probing = False
        self._lock = threading.Lock()

    def acquire(self, now: float) -> bool:
        """Whether a request may go to this client now (taking the probe slot if half-open)."""
        with self._lock:
            if self._open_until == 0.0:
                return True
            if now < self._open_until or self._probing:
                return False
            self._probing = True  # half-open: this request alone tries the client
            return True

    def succeeded(self) -> None:
        """The client answered: close the circuit."""
        with self._lock:
            self._failures.clear()
            self._open_until = 0.0
            self._probing = False

    def released(self) -> None:
        """A request ended without a verdict on the client (cancelled, refused as bad)."""
        with self._lock:
            self._probing = False

    def failed(self, now: float, exc: ProviderError, policy: Cooldown) -> None:
        """Count a failure; open the circuit past the bound, or for the `Retry-After` asked."""
        with self._lock:
            probe, self._probing = self._probing, False
            self._failures = [t for t in self._failures if now - t < policy.window]
            self._failures.append(now)
            wait = exc.retry_after
            if wait is not None and wait > 0 and policy.max_retry_after > 0:
                until = now + min(wait, policy.max_retry_after)
                self._open_until = max(self._open_until, until)
            elif (probe or len(self._failures) >= policy.failures) and policy.duration > 0:
                self._open_until = now + policy.duration

    def remaining(self, now: float) -> float:
        """Seconds until the circuit lets a request try the client (0 when it does)."""
        with self._lock:
            return max(0.0, self._open_until - now) if self._open_until else 0.0


_breakers: dict[str, Breaker] = {}
_registry_lock = threading.Lock()


def breaker_for(identity: str | None) -> Breaker:
    """The process-wide breaker of the client with this identity (made at first use).

    A client without an identity gets a new breaker of its own.
    """
    if identity is None:
        return Breaker()
    with _registry_lock:
        breaker = _breakers.get(identity)
        if breaker is None:
            breaker = _breakers[identity] = Breaker()
        return breaker


@functools.cache
def _salt() -> bytes:
    import secrets

    return secrets.token_bytes(16)


def credential_tag(credentials: Iterable[str | None]) -> str | None:
    """A digest of a client's credentials, keyed by a secret of this process (None: none).

    Tells apart two clients of one model with different keys — accounts with their own rate
    limits, so one's 429 must not keep the other out — without holding a key: the digest
    cannot be reversed or compared across processes.
    """
    given = sorted(c for c in credentials if c)
    if not given:
        return None
    import hashlib
    import hmac

    return hmac.new(_salt(), "\0".join(given).encode(), hashlib.sha256).hexdigest()[:16]


def client_identity(client: object, provider: str, model: str) -> str | None:
    """What makes two clients the same for a cooldown: provider, base URL, model and key.

    None for a client without a base URL (a scripted client): it gets a breaker of its own,
    not one in the process-wide registry (which would grow with every such client, and an
    object id may be reused). Never holds a key: the base URL is the transport's scrubbed one.
    """
    transport = getattr(client, "transport", None)
    base = getattr(transport, "base_url", None)
    scrub = getattr(transport, "scrub", None)
    if not isinstance(base, str) or not callable(scrub):
        return None
    pool = getattr(client, "pool_identity", None)  # a key pool: its own keys, not one key
    suffix = f" pool {pool}" if isinstance(pool, str) else ""
    tag = getattr(transport, "credential_tag", None)  # another key: another account's limits
    if isinstance(tag, str):
        suffix += f" key {tag}"
    return f"{provider}:{model}@{scrub(base)}{suffix}"
