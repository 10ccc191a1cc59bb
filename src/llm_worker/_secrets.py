"""Keeping credentials out of every message, `repr` and log line this library writes.

Shared by the provider clients (their API key, `base_url` and headers) and MCP (a token on a
server's command line or in its URL).

A [`Scrubber`][] knows a client's secrets: its API key, a password or credential-named query
parameter in its `base_url` (Gemini's `?key=`), and the values of credential headers passed
through `headers` (`api-key`, `Authorization: Bearer …`). It replaces, case-insensitively, the
whole secret and any run of 12 or more of its consecutive characters (an error body that echoes
a long prefix of the key, or the key upper-cased) with `***`.

Scrubbing is for error paths, reprs and log lines only: it costs a pass over the text per
distinct run length, never anything on the stream's hot path.

httpx logs every request line (method and full URL) at INFO on the `httpx` logger, and
httpcore the response headers at DEBUG. A filter installed on their loggers on first use
scrubs those records with the secrets of every live client, so a key in `base_url` (or echoed
in a header) never reaches a log handler.
"""

from __future__ import annotations

import base64
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

from llm_worker.errors import ProviderError

if TYPE_CHECKING:
    import logging

__all__ = (
    "Scrubber",
    "chain_leaks",
    "header_secrets",
    "install_log_filter",
    "is_credential",
    "scrub_error",
    "url_secrets",
)

_MIN_SECRET: Final = 8
"""A shorter "key" (Ollama's `ollama`) is no secret: cutting it out would maim messages."""

_MIN_RUN: Final = 12
_MIN_WORD: Final = 4  # a known secret shorter than this is masked nowhere but where it was given
_MASK: Final = "***"
# ASCII-only lowering keeps every index of the text valid (str.lower() may change lengths).
_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CREDENTIAL_WORDS: Final = ("key", "token", "secret", "password", "auth", "sig", "credential")


class Scrubber:
    """Replaces a set of secrets, and long runs of their characters, with `***`."""

    __slots__ = ("__weakref__", "_grams", "_words")

    def __init__(self, secrets: Iterable[str | None], *, words: Iterable[str] = ()) -> None:
        """Know `secrets` (8 characters or more: shorter ones are ignored) and `words`.

        `words`: short values known to be secrets (`--token abc123`), masked only where they
        stand as a whole word, so they do not maim the text around them (4 characters or more).
        """
        short = sorted({w for w in words if _MIN_WORD <= len(w) < _MIN_SECRET}, key=len)
        alternatives = "|".join(re.escape(w) for w in reversed(short))
        self._words = (
            re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])") if short else None
        )
        # Runs of each length, lowered: a key of 8 to 11 characters is matched whole.
        grams: dict[int, set[str]] = {}
        for secret in _encodings(s for s in secrets if s is not None and len(s) >= _MIN_SECRET):
            if len(secret) < _MIN_SECRET:
                continue
            size = min(_MIN_RUN, len(secret))
            lowered = secret.translate(_LOWER)
            runs = grams.setdefault(size, set())
            runs.update(lowered[i : i + size] for i in range(len(secret) - size + 1))
        self._grams = tuple((size, frozenset(runs)) for size, runs in sorted(grams.items()))
        if self:
            _LIVE.add(self)

    def __bool__(self) -> bool:
        return bool(self._grams) or self._words is not None

    def scrub(self, text: str) -> str:
        """`text` with every secret and every long run of a secret's characters masked."""
        if self._words is not None and text:
            text = self._words.sub(_MASK, text)
        if not self._grams or not text:
            return text
        lowered = text.translate(_LOWER)
        covered = bytearray(len(text) + 1)
        found = False
        for size, runs in self._grams:
            for start in range(len(text) - size + 1):
                if lowered[start : start + size] in runs:
                    covered[start : start + size] = b"\x01" * size
                    found = True
        return _masked(text, covered) if found else text


def _encodings(secrets: Iterable[str]) -> Iterator[str]:
    """Each secret as it may be echoed: itself, URL-encoded, JSON-escaped, and in base64.

    An error body or a log line may quote the request URL (the key percent-encoded), a JSON
    text (`/` escaped by a backslash) or a Basic `Authorization` header (base64 of
    `user:key`, where the key may start at any of the three byte offsets of a base64 group).
    """
    for secret in secrets:
        yield secret
        yield quote(secret, safe="")
        yield quote(secret)  # `/` kept, as in a URL path
        yield quote_plus(secret)
        yield secret.replace("/", "\\/")
        raw = secret.encode()
        for skip in range(3):
            # The whole base64 groups of the secret's bytes, whatever precedes it: its bytes
            # from the first, second or third on fill groups of their own.
            tail = raw[skip:]
            whole = tail[: len(tail) - len(tail) % 3]
            encoded = base64.b64encode(whole).decode("ascii")
            yield encoded
            yield encoded.replace("+", "-").replace("/", "_")


def _masked(text: str, covered: bytearray) -> str:
    out: list[str] = []
    start = 0
    while start < len(text):
        end = covered.find(b"\x01", start)
        if end < 0:
            out.append(text[start:])
            break
        out.append(text[start:end])
        out.append(_MASK)
        start = covered.find(b"\x00", end)
    return "".join(out)


def scrub_error(error: ProviderError, scrub: Callable[[str], str]) -> None:
    """Mask credentials in every text attribute of `error` that a provider may have echoed."""
    message = scrub(error.message)
    if message != error.message:
        error.message = message
        error.args = (message,)
    if error.error_type is not None:
        error.error_type = scrub(error.error_type)
    if error.request_id is not None:
        error.request_id = scrub(error.request_id)


def chain_leaks(exc: BaseException | None, scrub: Callable[[str], str]) -> bool:
    """Whether the text or repr of `exc`, or of an exception it was chained from, holds a secret.

    Such an exception must not be chained (`raise … from`) to an error this library raises:
    a traceback prints the text of every exception of the chain.
    """
    for _ in range(16):  # a chain is short; a cycle must not loop forever
        if exc is None:
            return False
        # The repr too: aiohttp's errors keep the request's headers (the key) in it.
        for text in (str(exc), repr(exc)):
            if scrub(text) != text:
                return True
        exc = exc.__cause__ or exc.__context__
    return False


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its user info, credential-named query (or fragment) values."""
    try:
        parts = urlsplit(url)
        # A token alone in the user info (`https://TOKEN@host`) is a credential too.
        found = [v for raw in (parts.username, parts.password) if raw for v in (raw, unquote(raw))]
    except ValueError:
        return []
    # The fragment too: an OAuth implicit grant's `#access_token=…` travels there.
    for pair in [*parts.query.split("&"), *parts.fragment.split("&")]:
        name, _, value = pair.partition("=")
        if is_credential(unquote_plus(name)):
            # As written (the text a log line shows) and decoded (the value sent).
            found.extend((value, unquote_plus(value)))
    return list(dict.fromkeys(found))


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The values of credential headers (`x-api-key`, `Authorization: Bearer …`)."""
    found: list[str] = []
    for name, value in headers.items():
        if is_credential(name):
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.isalpha():
                found.append(token.strip())
    return found


def is_credential(name: str) -> bool:
    """Whether a name (a query parameter, a header, a flag, a variable) says it holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in _CREDENTIAL_WORDS)


_LIVE: weakref.WeakSet[Scrubber] = weakref.WeakSet()


class _LogScrubber:
    """Scrubs the records of the HTTP libraries' loggers (httpx's INFO line: the URL).

    A filter is any object with a `filter(record)` method (`logging.Filterer`): not a
    `logging.Filter`, so that importing this module (at a client's build) does not import
    logging; `install_log_filter` does, when it installs one.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        scrubbers = list(_LIVE)
        if not scrubbers:
            return True
        message = record.getMessage()
        clean = _scrubbed(message, scrubbers)
        if clean != message:
            record.msg = clean
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # A logged exception's traceback (the SDK's `logger.exception`) may quote a URL:
            # formatted here, once, and scrubbed; handlers print `exc_text` as it is.
            import traceback  # loaded by logging already: no cost here

            text = "".join(traceback.format_exception(record.exc_info[1])).rstrip("\n")
            clean = _scrubbed(text, scrubbers)
            if clean != text:
                record.exc_text, record.exc_info = clean, None
        return True


def _scrubbed(text: str, scrubbers: list[Scrubber]) -> str:
    for scrubber in scrubbers:
        text = scrubber.scrub(text)
    return text


_FILTER: Final = _LogScrubber()


# Filters of a logger see only the records logged on it, not its children's: each logger of
# httpx and httpcore gets one (httpcore's DEBUG lines repeat the response headers).
_HTTP_LOGGERS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "aiohttp.client",
    "aiohttp.internal",
)


def install_log_filter(more: tuple[str, ...] = (), *, loaded_only: bool = False) -> None:
    """Put the scrubbing filter on the httpx and httpcore loggers, and `more` (idempotent).

    `more`: other loggers whose records may quote a secret (the MCP SDK's; `""` is the
    root logger, which the SDK's session logs to directly). `loaded_only`: only if logging is
    imported already (a client's build: until it is, no record can be written, and a
    transport's first request installs the filter before it imports its HTTP library).
    """
    if loaded_only and "logging" not in sys.modules:
        return
    import logging  # here: building a client need not load it

    for name in (*_HTTP_LOGGERS, *more):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
