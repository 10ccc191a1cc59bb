"""Signed opaque data: what the server sends the browser to carry back, and proves it made.

The browser's history is input its user controls. Opaque provider data (thinking signatures,
encrypted reasoning, item ids, provider blocks) and the results of the server's tools travel
to the browser and come back with the next request; a forged one would reach the provider as
the model's own (a block stamped with the server's model) or the model as a tool's real
output. So the server signs each with an HMAC under its key, and drops (or refuses) what
comes back unsigned or altered.

The key is the process's own random key unless one is configured (`signing_key` of an
adapter, the `LLM_WORKER_SIGNING_KEY` environment variable, or `signing_key()` around your
own use of the converters): servers behind one load balancer must share one key, and a key
that changes (a restart without a configured one) turns the opaque data of earlier
conversations into unsigned data, dropped, as from any other source.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

import orjson

__all__ = ("ENV", "MAC", "Signer", "current", "signing_key")

ENV = "LLM_WORKER_SIGNING_KEY"
"""The environment variable a server's signing key is read from (when no key is given)."""

MAC = "mac"
"""The field of opaque data that holds its signature."""

_MIN_KEY = 16


class Signer:
    """Signs and checks opaque data with HMAC-SHA256 under one key.

    Args:
        key: At least 16 bytes (a `str` is taken as UTF-8); keep it secret, share it across
            the servers of one fleet.

    Raises:
        ValueError: The key is shorter than 16 bytes.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes | str) -> None:
        raw = key.encode() if isinstance(key, str) else bytes(key)
        if len(raw) < _MIN_KEY:
            raise ValueError(f"a signing key needs at least {_MIN_KEY} bytes")
        # HMAC-SHA256 (RFC 2104) from its two keyed hash states, made once: a signature
        # copies them (four C calls), where `hmac.HMAC.copy` and its `update` and `hexdigest`
        # go through Python methods (about twice the cost; `hmac.digest` keys anew, more).
        if len(raw) > _BLOCK:
            raw = hashlib.sha256(raw).digest()
        raw = raw.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(raw.translate(_IPAD))
        self._outer = hashlib.sha256(raw.translate(_OPAD))

    def __repr__(self) -> str:
        return "Signer(key=<hidden>)"

    def mac(self, kind: str, bound: object, hidden: dict[str, Any]) -> str:
        """The signature of a part of type `kind`: its opaque fields and the visible `bound`."""
        fields = {k: v for k, v in hidden.items() if k != MAC}
        return self.signed([kind, _canonical(bound), _canonical(fields)])

    def signed(self, value: list[Any]) -> str:
        """The signature of `value` as it stands (`mac` makes it canonical first)."""
        inner = self._inner.copy()
        inner.update(orjson.dumps(value, option=_SORTED))
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()[:32]  # 128 bits: past any forging by guess

    def verify(self, kind: str, bound: object, hidden: dict[str, Any]) -> bool:
        """Whether `hidden[MAC]` is the signature of the rest of `hidden` and `bound`."""
        given = hidden.get(MAC)
        if not isinstance(given, str):
            return False
        try:
            expected = self.mac(kind, bound, hidden)
        except (TypeError, RecursionError, orjson.JSONEncodeError):
            return False  # data no signer could have made (or nested past any call's depth)
        return hmac.compare_digest(given.encode(), expected.encode())


_SORTED = orjson.OPT_SORT_KEYS
_BLOCK = 64  # SHA-256's block size: HMAC pads (or first hashes) the key to it
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))
_EXACT = 2**53  # a JavaScript number holds every integer below it exactly, not every one past


def _canonical(value: object) -> object:
    """`value` as the browser gives it back, through JavaScript's numbers.

    JavaScript writes 1.0 (and -0.0) as 1 (0), and reads an integer past 2**53 as the
    nearest double (a Python int past it comes back rounded, 1e21 as a float): every
    integer below 2**53 is an int here, every number past it the double a browser holds
    (one past the doubles, Infinity, it writes as null). Keys are sorted where it is
    dumped, so their order (JavaScript puts integer-like keys first) does not count.
    """
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        items = cast("dict[str, object]", value).items()
        return {k: _canonical(v) for k, v in items}
    if kind is list or kind is tuple:
        return [_canonical(v) for v in cast("list[object]", value)]
    if kind is float or kind is int:
        return _number(cast(float, value))
    return value


def _number(value: float) -> object:
    if type(value) is float:
        return int(value) if value.is_integer() and abs(value) < _EXACT else value
    if -_EXACT < value < _EXACT:
        return value
    try:
        return float(value)
    except OverflowError:
        return None


_process: list[Signer] = []  # the process's signer, made on first use
_current: ContextVar[Signer | None] = ContextVar("llm_worker_ui_signer", default=None)


def process_signer() -> Signer:
    """The process's signer: `LLM_WORKER_SIGNING_KEY` if set, else a random key."""
    if not _process:
        configured = os.environ.get(ENV)
        _process.append(Signer(configured or secrets.token_bytes(32)))
    return _process[0]


def current() -> Signer:
    """The signer in use: the one `signing_key()` (or an adapter) set, else the process's."""
    return _current.get() or process_signer()


def use(signer: Signer | None) -> Any:
    """Make `signer` current in this context (`None`: the process's); a token to `reset`."""
    return _current.set(signer)


def reset(token: Any) -> None:
    """Undo a `use`."""
    _current.reset(token)


@contextmanager
def signing_key(key: bytes | str) -> Generator[None]:
    """Sign and check opaque data with `key` inside the block (the converters and encoders).

    Use it around `to_vercel_stream`, `messages_from_ui`, `messages_to_ui` (and the AG-UI
    ones) in your own server when its processes must share a key; the adapters take a
    `signing_key` argument instead.

    Raises:
        ValueError: The key is shorter than 16 bytes.
    """
    token = _current.set(Signer(key))
    try:
        yield
    finally:
        _current.reset(token)
