"""How `ObjectBlobStore` reports the store's failures: typed `BlobError`s, never the store's text.

An S3 error body can echo the access key id, a URL a SAS token or a signature: what is kept of a
store's error is its kind, its HTTP status and its error code.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from llm_worker._extras import require_extra
from llm_worker.errors import (
    BlobAccessDeniedError,
    BlobContainerNotFoundError,
    BlobError,
    BlobNotFoundError,
    BlobStoreUnavailableError,
)

__all__ = (
    "first_line",
    "public_url",
    "raise_if_no_container",
    "redact",
    "translate",
    "url_secrets",
    "withhold",
)


def _obstore() -> Any:
    return require_extra("obstore", "obstore", feature="ObjectBlobStore")


_CODE = re.compile(r"<Code>([A-Za-z]{1,64})</Code>")
_STATUS = re.compile(r"status(?: code)?:? (\d{3})")
_DENIED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken")


def _facts(exc: BaseException) -> tuple[str | None, str | None]:
    text = str(exc)
    code, status = _CODE.search(text), _STATUS.search(text)
    return (code.group(1) if code else None), (status.group(1) if status else None)


def withhold(exc: BaseException) -> None:
    # The store's text can echo an access key id or a signed URL, and an error raised while
    # handling it keeps it as `__context__`: what is kept of it says nothing.
    with contextlib.suppress(Exception):
        exc.args = (f"{type(exc).__name__}: the store's message is withheld",)


def raise_if_no_container(exc: BaseException, where: str) -> None:
    code, _ = _facts(exc)
    withhold(exc)
    if code in ("NoSuchBucket", "ContainerNotFound"):
        raise BlobContainerNotFoundError(f"the bucket of {where} does not exist ({code})")


def translate(exc: BaseException, doing: str) -> BlobError:
    """A typed `BlobError` for a store failure: its kind, status and code, never its text."""
    code, status = _facts(exc)
    withhold(exc)
    said = ", ".join(part for part in (status and f"HTTP {status}", code) if part)
    said = f" ({said})" if said else ""
    errors: Any = _obstore().exceptions
    if code in ("NoSuchBucket", "ContainerNotFound"):
        return BlobContainerNotFoundError(f"{doing}: the bucket does not exist{said}")
    denied = isinstance(exc, errors.PermissionDeniedError | errors.UnauthenticatedError)
    if denied or code in _DENIED or status in ("401", "403"):
        return BlobAccessDeniedError(f"{doing}: the store refused the credentials{said}")
    if isinstance(exc, FileNotFoundError):
        return BlobNotFoundError(f"{doing}: not found{said}")
    kind = "throttled" if code == "SlowDown" or status in ("429", "503") else "failed"
    return BlobStoreUnavailableError(
        f"{doing}: the store {kind} after its client's retries{said}: {type(exc).__name__}"
    )


def first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "invalid configuration"


def redact(text: str, options: dict[str, Any]) -> str:
    for value in _values(options):
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _values(options: Any) -> list[str]:
    if isinstance(options, str):
        return [options]
    if isinstance(options, dict):
        return [v for item in options.values() for v in _values(item)]  # pyright: ignore[reportUnknownVariableType]
    return []


def url_secrets(url: str) -> dict[str, str]:
    # User info and query values: an account key, a SAS token, a presigned signature.
    try:
        parts = urlsplit(url)
        found = [parts.username, parts.password, parts.query, parts.netloc.rpartition("@")[0]]
    except ValueError:
        return {}
    found += [value for _, value in parse_qsl(parts.query)]
    return {str(i): value for i, value in enumerate(found) if value}


def public_url(url: str) -> str:
    # Neither user info nor a query (a SAS token, a signature) goes into a repr.
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else url.split("?", maxsplit=1)[0]
