r"""A cassette's file: its exchanges as JSON lines a reviewer can read in a pull request.

One record per line; an exchange is a `request` line, a `response` line and one line per
chunk of the body, exactly as the body arrived (the chunk boundaries are kept, so a replay
splits the body where the provider did):

```
{"cassette": 1}
{"request": {"provider": "anthropic", "model": "…", "path": "/v1/messages", "body": {…}}}
{"response": {"status": 200, "headers": {"content-type": "text/event-stream"}}}
{"chunk": "event: message_start\ndata: {…}\n\n", "at": 0.412}
{"chunk_b64": "…"}
```

`body` is the request as the provider-neutral `Request` (see `_cassette_match`). A chunk is
text when it is whole UTF-8 on its own, else base64 (`chunk_b64`: a boundary inside a
character). `at` (seconds since the request was sent) is written only with `timing=True`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from llm_worker._json import as_dict, as_list
from llm_worker.errors import LLMWorkerError

__all__ = (
    "CassetteError",
    "CassetteFileError",
    "Exchange",
    "containers",
    "dumps",
    "file_name",
    "loads",
    "write",
)

_VERSION: Final = 1
_NO_RESPONSE: Final = 0
_MAX_NAME: Final = 200  # bytes of a file name before `.jsonl` (file systems allow 255)
_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")  # an HTTP token (RFC 9110)
_BREAK: Final = re.compile(r"[\r\n\0]")


class CassetteError(LLMWorkerError, AssertionError):
    """A cassette could not replay a test's requests: the base of the cassette errors.

    An `AssertionError` too, so pytest reports it as a failed test rather than an error.
    """


class CassetteFileError(CassetteError):
    """A cassette file is missing (replay needs one) or is not a cassette."""


@dataclass(slots=True)
class Exchange:
    """One request and the answer it got, as a cassette keeps them.

    Attributes:
        provider: The wire format (`"anthropic"`, `"openai_chat"`, …).
        model: The model the request named.
        path: The path the client posted to (below the host).
        query: The query parameters (credentials masked).
        request: The request as the provider-neutral `Request`, in JSON (what matching
            compares).
        status: The HTTP status of the answer.
        headers: The answer's headers a replay sends again (content type, request id,
            rate-limit and retry headers).
        chunks: The answer's body, in the pieces it arrived in.
        times: Seconds from the request to each chunk (recorded with `timing=True`).
    """

    provider: str
    model: str
    path: str
    query: dict[str, str]
    request: dict[str, Any]
    status: int
    headers: dict[str, str]
    chunks: list[bytes]
    times: list[float] | None = field(default=None)

    @property
    def body(self) -> bytes:
        """The answer's body, whole."""
        return b"".join(self.chunks)


def containers(value: object) -> tuple[dict[str, Any] | None, list[Any] | None]:
    """`(value, None)` for a JSON object, `(None, value)` for an array, else `(None, None)`.

    Typed without `isinstance` narrowing, which would leave the items' types unknown.
    """
    mapping, items = as_dict(value), as_list(value)
    return (mapping if mapping is value else None), (items if items is value else None)


def file_name(name: str, *, empty: str = "cassette") -> str:
    """`name` (a test's id, a case's name) made a file name, without its `.jsonl`.

    Anything but letters, digits, `.`, `_` and `-` becomes `-`; a name too long for a file
    system is cut and ends with a hash of the whole, so two long names stay apart.
    """
    safe = re.sub(r"[^\w.-]+", "-", name).strip("-") or empty
    if len(safe.encode()) <= _MAX_NAME:
        return safe
    digest = hashlib.sha256(safe.encode()).hexdigest()[:12]
    return safe.encode()[: _MAX_NAME - 13].decode(errors="ignore") + "-" + digest


def dumps(exchanges: list[Exchange]) -> str:
    """The exchanges as the cassette file's text."""
    lines = [_line({"cassette": _VERSION})]
    for exchange in exchanges:
        lines.extend(_exchange_lines(exchange))
    return "\n".join(lines) + "\n"


def _exchange_lines(exchange: Exchange) -> Iterator[str]:
    yield _line(
        {
            "request": {
                "provider": exchange.provider,
                "model": exchange.model,
                "path": exchange.path,
                "query": exchange.query,
                "body": exchange.request,
            }
        }
    )
    yield _line({"response": {"status": exchange.status, "headers": exchange.headers}})
    for n, chunk in enumerate(exchange.chunks):
        record: dict[str, Any]
        try:
            record = {"chunk": chunk.decode("utf-8")}
        except UnicodeDecodeError:
            record = {"chunk_b64": base64.b64encode(chunk).decode("ascii")}
        if exchange.times is not None and n < len(exchange.times):
            record["at"] = exchange.times[n]
        yield _line(record)


def _line(record: dict[str, Any]) -> str:
    return orjson.dumps(record).decode()


def write(path: Path, exchanges: list[Exchange]) -> None:
    """Write the cassette file at once (a new file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(dumps(exchanges))
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def loads(text: str, *, name: str = "the cassette") -> list[Exchange]:
    """Read a cassette file's text back into its exchanges.

    Raises:
        CassetteFileError: A line that is not JSON, or not the record expected there.
    """
    exchanges: list[Exchange] = []
    # Lines end at "\n" only: str.splitlines() would also cut at U+2028 and other separators,
    # which JSON strings hold unescaped. A "\r" before it (a CRLF checkout) is JSON whitespace.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            _read(orjson.loads(line), exchanges)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            message = f"{name}, line {number}: not a cassette record ({exc})"
            raise CassetteFileError(message) from exc
    if exchanges and exchanges[-1].status == _NO_RESPONSE:
        raise CassetteFileError(f"{name} ends in a request without its response (cut short?)")
    return exchanges


def _read(record: object, exchanges: list[Exchange]) -> None:
    data = as_dict(record)
    if data is not record or len(data) == 0:
        raise ValueError("a JSON object was expected")
    if "cassette" in data:
        if data["cassette"] != _VERSION:
            raise ValueError(f"cassette version {data['cassette']!r}; this library reads 1")
    elif "request" in data:
        if exchanges and exchanges[-1].status == _NO_RESPONSE:
            raise ValueError("the request before has no response line")
        exchanges.append(_request(as_dict(data["request"])))
    elif "response" in data:
        _last(exchanges).status, _last(exchanges).headers = _response(as_dict(data["response"]))
    elif "chunk" in data or "chunk_b64" in data:
        if _last(exchanges).status == _NO_RESPONSE:
            raise ValueError("a chunk before its response line")
        _chunk(data, _last(exchanges))
    else:
        raise ValueError(f"unknown record {sorted(data)}")


def _request(data: dict[str, Any]) -> Exchange:
    query = as_dict(data.get("query"))
    return Exchange(
        provider=_str(data["provider"]),
        model=_str(data["model"]),
        path=_str(data.get("path", "")),
        query={str(k): _str(v) for k, v in query.items()},
        request=as_dict(data["body"]),
        status=_NO_RESPONSE,  # until its response line is read
        headers={},
        chunks=[],
    )


def _response(data: dict[str, Any]) -> tuple[int, dict[str, str]]:
    status = data["status"]
    if status.__class__ is not int or not 200 <= status <= 599:
        raise ValueError(f"status {status!r} is not an HTTP status from 200 to 599")
    headers = {str(k).lower(): _str(v) for k, v in as_dict(data.get("headers")).items()}
    for name, value in headers.items():
        # A line break would end the header in the replayed answer and forge the next one.
        if not _NAME.fullmatch(name) or _BREAK.search(value) or not _latin1(value):
            raise ValueError(f"header {name!r}: a header name and a value on one line expected")
    return status, headers


def _latin1(value: str) -> bool:
    """Whether a header value can be sent as it is (HTTP/1.1 headers are bytes, ISO-8859-1)."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _chunk(data: dict[str, Any], exchange: Exchange) -> None:
    if "chunk" in data:
        exchange.chunks.append(_str(data["chunk"]).encode("utf-8"))
    else:
        exchange.chunks.append(base64.b64decode(_str(data["chunk_b64"]), validate=True))
    at = data.get("at")
    if at is not None:
        if not isinstance(at, int | float):
            raise ValueError(f"`at` {at!r} is not a number")
        exchange.times = [*(exchange.times or []), float(at)]


def _last(exchanges: list[Exchange]) -> Exchange:
    if not exchanges:
        raise ValueError("a response or chunk before any request")
    return exchanges[-1]


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value
