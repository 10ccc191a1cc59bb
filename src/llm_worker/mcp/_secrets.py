"""The secrets an MCP server's command line, environment or URL carries.

A stdio server is often given its token on the command line (`--token ghp_…`,
`--api-key=…`, `API_KEY=…`, a URL with `?key=`), and its name in messages was the whole
command line: each such value is found here, so the server's `Scrubber` keeps it out of its
name, `repr`, errors, the fault texts the model reads, and log lines. An HTTP server's URL
(its user info and credential-named query values) and credential headers are found the way
the provider clients find theirs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from llm_worker._secrets import header_secrets, is_credential, url_secrets

__all__ = ("command_label", "command_secrets", "http_secrets")

# A token on its own: long, of the characters tokens are made of, letters and digits both
# (a package name, `mcp-server-time`, has no digit; a path has a `/`).
_NAME: Final = re.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_.-]*")  # `--api-key`, `API_KEY`
_TOKEN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-+.~]{18,}=*")
# `Authorization: Bearer X`, `X-Api-Key:X` — a header given to a proxy such as mcp-remote
# (`--header "Authorization: Bearer ${TOKEN}"`), or split over several arguments.
_HEADER: Final = re.compile(r"([A-Za-z0-9_-]+)[ \t]*:[ \t]*(.*)", re.DOTALL)
_SCHEMES: Final = frozenset({"bearer", "basic", "token", "digest", "apikey"})


def command_secrets(
    command: str, args: Sequence[str], env: Mapping[str, str] | None, passed: Mapping[str, str]
) -> list[str]:
    """The secrets in a stdio server's arguments, its `env`, and the variables passed on.

    An argument is one when it follows a credential-named flag (`--token X`), is the value of
    one (`--api-key=X`, `API_KEY=X`), is a URL's credential, or looks like a token alone.
    A variable is one when its name says so (`GITHUB_TOKEN`), or it is a URL's credential.
    """
    found = [secret for _, each in _secrets_by_word([command, *args]) for secret in each]
    for name, value in [*(env or {}).items(), *passed.items()]:
        found.extend(_value_secrets(name, value))
    return list(dict.fromkeys(found))


def http_secrets(url: str, headers: Mapping[str, str] | None) -> list[str]:
    """The secrets in an HTTP server's URL and headers."""
    return [*url_secrets(url), *header_secrets(headers or {})]


def command_label(words: Sequence[str]) -> str:
    """The command line as a name, each secret found in a word replaced there by `***`.

    Word by word, so a short secret (`--token abc`, shorter than a `Scrubber` masks in free
    text) is masked too, without maiming other words that happen to contain it.
    """
    return " ".join(_masked_word(word, found) for word, found in _secrets_by_word(words))


def _secrets_by_word(words: Sequence[str]) -> Iterable[tuple[str, list[str]]]:
    for index, word in enumerate(words):
        found = list(_word_secrets(word))
        if index and _announces(words[index - 1]) and word.lower() not in _SCHEMES:
            found.append(word)
        yield word, found


def _masked_word(word: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            word = word.replace(secret, "***")
    return word


def _announces(word: str) -> bool:
    """Whether the next argument is a secret: after `--token`, `Authorization:`, `Bearer`."""
    if word.startswith("-") and "=" not in word and is_credential(word):
        return True
    if word.lower() in _SCHEMES:
        return True
    header = _HEADER.fullmatch(word)
    return header is not None and not header.group(2).strip() and is_credential(header.group(1))


def _word_secrets(word: str) -> Iterable[str]:
    name, equals, value = word.partition("=")
    if equals and value and _NAME.fullmatch(name) and is_credential(name):
        yield value
    header = _HEADER.fullmatch(word)
    if header is not None and "://" not in word and is_credential(header.group(1)):
        value = header.group(2).strip()
        scheme, _, token = value.partition(" ")
        yield token.strip() if token.strip() and scheme.lower() in _SCHEMES else value
    if "://" in word:
        yield from url_secrets(_url_in(word))
    if _TOKEN.fullmatch(word) and _letters_and_digits(word):
        yield word


def _value_secrets(name: str, value: str) -> Iterable[str]:
    if is_credential(name):
        yield value
    if "://" in value:
        yield from url_secrets(_url_in(value))


def _url_in(text: str) -> str:
    """The URL in `--index=https://…` or `https://…`: from its scheme on."""
    start = text.index("://")
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
        start -= 1
    return text[start:]


def _letters_and_digits(word: str) -> bool:
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
