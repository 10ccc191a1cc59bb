"""What a cassette masks before it writes a file: keys, credential headers, configured secrets.

Known secrets are masked as the library's own `Scrubber` masks them in errors (the whole
value, any run of 12 of its characters, case ignored, and its URL-, JSON- and base64-encoded
forms): the values of the request's credential headers (`Authorization`, `x-api-key`,
`x-goog-api-key`, …), of credential-named parameters of the URL (Gemini's `?key=`, a base
URL's `?api_key=`), of the provider key variables (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
`GEMINI_API_KEY`, `GOOGLE_API_KEY`) and the cassette's `secrets`. Text matching one of its
`secret_patterns` is masked too. Request headers are never written.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final
from urllib.parse import unquote_plus

from llm_worker._json import as_dict
from llm_worker._secrets import Scrubber, header_secrets, is_credential, url_secrets
from llm_worker.testing._cassette_file import Exchange, containers

__all__ = ("Secrets",)

_MASK: Final = "***"
_KEY_VARIABLES: Final = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


class Secrets:
    """The secrets one cassette masks; learns each recorded request's credentials."""

    __slots__ = ("_patterns", "_values")

    def __init__(self, values: Iterable[str], patterns: Iterable[str | re.Pattern[str]]) -> None:
        """Know `values` and the provider key variables' values; mask `patterns`' matches."""
        self._values = {v for v in values if v}
        self._values.update(v for name in _KEY_VARIABLES if (v := os.environ.get(name)))
        self._patterns = tuple(re.compile(p) if isinstance(p, str) else p for p in patterns)

    def learn(self, headers: Mapping[str, str], url: str) -> None:
        """Know the credentials a request carried in its headers and URL."""
        self._values.update(header_secrets(headers))
        self._values.update(url_secrets(url))

    def text(self, text: str) -> str:
        """`text` with every known secret masked (a message that may quote a URL)."""
        return self._text(text, Scrubber(self._values))

    def _text(self, text: str, scrubber: Scrubber) -> str:
        text = scrubber.scrub(text)
        for pattern in self._patterns:
            text = pattern.sub(_MASK, text)
        return text

    def scrubbed(self, exchanges: list[Exchange]) -> list[Exchange]:
        """Copies of the exchanges with every known secret masked."""
        scrubber = Scrubber(self._values)
        return [self._one(exchange, scrubber) for exchange in exchanges]

    def _one(self, exchange: Exchange, scrubber: Scrubber) -> Exchange:
        def text(value: str) -> str:
            return self._text(value, scrubber)

        return dataclasses.replace(
            exchange,
            model=text(exchange.model),
            path=text(exchange.path),
            query={k: _MASK if _credential(k) else text(v) for k, v in exchange.query.items()},
            request=as_dict(_walk(exchange.request, text)),
            headers={k: text(v) for k, v in exchange.headers.items()},
            chunks=_body(exchange.chunks, text),
        )


def _credential(name: str) -> bool:
    return is_credential(unquote_plus(name))


def _walk(value: object, scrub: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return scrub(value)
    mapping, items = containers(value)
    if mapping is not None:
        return {scrub(k): _walk(v, scrub) for k, v in mapping.items()}
    if items is not None:
        return [_walk(v, scrub) for v in items]
    return value


def _body(chunks: list[bytes], scrub: Callable[[str], str]) -> list[bytes]:
    """The body's chunks masked as one text, so a secret split by a boundary is found too.

    A body that changed is split again at the old boundaries (the last piece takes what a
    mask added or removed). Bytes that are not UTF-8 are kept as they are around the text
    masked between them (an error page in another encoding may still echo a key).
    """
    whole = b"".join(chunks)
    decoded = whole.decode("utf-8", "surrogateescape")
    masked = scrub(decoded).encode("utf-8", "surrogateescape")
    if masked == whole:
        return chunks
    pieces: list[bytes] = []
    start = 0
    for chunk in chunks[:-1]:
        end = min(start + len(chunk), len(masked))
        pieces.append(masked[start:end])
        start = end
    pieces.append(masked[start:])
    return [p for p in pieces if p]
