"""Which HTTP library a Transport sends through: chosen at construction, resolved per loop.

`transport=` names a library (`"httpx"`, `"aiohttp"`) or leaves the choice to the event loop
(`"auto"`, the default): aiohttp under asyncio, httpx under trio (aiohttp runs on asyncio
only). The loop is known only at a request, since a client may be built outside any loop and
used under asyncio in one `run` and under trio in the next, so `"auto"` is resolved there, at
the cost of one `sniffio` look-up per request. Measured (docs/benchmarks.md, "Transports and
the peer comparison"): over aiohttp a client spends about half the CPU per event of httpx when
events arrive one per network read, and 25-30 % less in bulk; hence aiohttp where it runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Final, Literal, get_args

import sniffio

from llm_worker.errors import ConfigurationError
from llm_worker.providers._http_backend import TRANSPORT_ENV, Backend, TransportName
from llm_worker.providers._secrets import install_log_filter

__all__ = (
    "TransportChoice",
    "check_either",
    "chosen",
    "library_of",
    "loop_library",
    "make_backend",
    "resolved",
    "seconds_only",
)

TransportChoice = Literal["auto", "httpx", "aiohttp"]
"""What `transport=` accepts: a library, or `"auto"` (per event loop: aiohttp on asyncio)."""

_AUTO: Final = "auto"


def chosen(transport: str | None, http_client: object, timeout: object) -> TransportChoice:
    """The transport named by `transport`, else by `http_client` or `timeout`, else the environment.

    A lent client decides by its library, and so does an `aiohttp.ClientTimeout` (only aiohttp
    takes one); seconds and an `httpx.Timeout` suit both libraries and leave `"auto"`.

    Raises:
        ConfigurationError: An unknown transport name, or an `http_client` of the other library.
    """
    lent = library_of(http_client)
    if transport is None:
        transport = lent or os.environ.get(TRANSPORT_ENV, "").strip() or _AUTO
        source = f"{TRANSPORT_ENV}={transport!r}" if lent is None else "http_client"
    else:
        source = "transport"
    if transport == _AUTO:
        return lent or _timeout_library(timeout) or _AUTO
    if transport in get_args(TransportName):
        if lent is not None and lent != transport:
            raise ConfigurationError(
                f"{source} names the {transport} transport, but http_client is {lent}'s "
                f"{type(http_client).__name__}: pass transport={lent!r}, or a client of {transport}"
            )
        return "httpx" if transport == "httpx" else "aiohttp"
    names = " or ".join(repr(n) for n in get_args(TransportChoice))
    raise ConfigurationError(f"unknown transport {transport!r} (from {source}): use {names}")


def library_of(http_client: object) -> TransportName | None:
    """The library of a lent client, without importing either library."""
    if http_client is None:
        return None
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(http_client, httpx.AsyncClient):
        return "httpx"
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None and isinstance(http_client, aiohttp.ClientSession):
        return "aiohttp"
    raise ConfigurationError(
        f"http_client must be an httpx.AsyncClient or an aiohttp.ClientSession, not "
        f"{type(http_client).__name__}"
    )


def _timeout_library(timeout: object) -> TransportName | None:
    aiohttp = sys.modules.get("aiohttp")  # a ClientTimeout means aiohttp is imported already
    if aiohttp is not None and isinstance(timeout, aiohttp.ClientTimeout):
        return "aiohttp"
    return None


def loop_library(library: str | None = None) -> TransportName:
    """The library `"auto"` sends through under the running event loop.

    `library`: the running async library's name, when the caller looked it up already.

    Raises:
        sniffio.AsyncLibraryNotFoundError: No event loop is running.
    """
    if library is None:
        library = sniffio.current_async_library()
    if library == "trio" or not _aiohttp_installed():
        return "httpx"
    return "aiohttp"


def resolved(
    choice: TransportChoice, last: TransportName | None, library: str | None = None
) -> TransportName:
    """The library a request sends through now: `choice`'s, or the running loop's for `"auto"`.

    `library`: the running async library's name, when the caller looked it up already (a
    request does, once for its admission and its pool). Outside any event loop (a setting
    read before the first request), `"auto"` is the library of the last request, else the
    one asyncio would get.

    Raises:
        ConfigurationError: aiohttp under trio (it runs on asyncio only).
    """
    if choice == _AUTO:
        try:
            return loop_library(library)
        except sniffio.AsyncLibraryNotFoundError:
            return last or ("aiohttp" if _aiohttp_installed() else "httpx")
    if choice == "aiohttp" and (_under_trio() if library is None else library == "trio"):
        # Named by the environment, "leave transport out" alone would not cure it.
        named = os.environ.get(TRANSPORT_ENV, "").strip() == "aiohttp"
        raise ConfigurationError(
            "the aiohttp transport runs on asyncio only, and this request runs under trio: "
            + (f"unset {TRANSPORT_ENV}=aiohttp and " if named else "")
            + "leave transport out (the default sends through httpx under trio), or pass "
            "transport='httpx' and an httpx.AsyncClient as http_client if you lend one"
        )
    return choice


def _under_trio() -> bool:
    try:
        return sniffio.current_async_library() == "trio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


_installed: list[bool] = []  # whether aiohttp can be imported, once looked up


def _aiohttp_installed() -> bool:
    # A core dependency, but an install may have left it out (`--no-deps`): "auto" then
    # falls back to httpx instead of failing every request.
    if not _installed:
        try:
            found = importlib.util.find_spec("aiohttp") is not None
        except (ImportError, ValueError):  # ValueError: sys.modules["aiohttp"] is None
            found = False
        _installed.append(found)
    return _installed[0]


def make_backend(
    name: TransportName, http_client: object, timeout: object, pool_size: int | None
) -> Backend:
    """The backend of the library `name` (imported here); `pool_size` `None`: no bound.

    Raises:
        ConfigurationError: An `http_client` or `timeout` of the other library.
        MissingExtraError: `"aiohttp"` without aiohttp installed.
    """
    # Before the library (and logging with it) is imported: its records of a request quote
    # the URL, so the scrubbing filter is on its loggers first (a client's build installs it
    # only where logging was loaded already).
    install_log_filter()
    if name == "aiohttp":
        from llm_worker.providers._http_aiohttp import AiohttpBackend

        return AiohttpBackend(http_client, timeout, pool_size)
    from llm_worker.providers._http_httpx import HttpxBackend

    return HttpxBackend(http_client, timeout, pool_size)


def seconds_only(timeout: object) -> bool:
    """Whether `timeout` is the default or a number of seconds: no library type to check."""
    if timeout is None:
        return True
    return isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0


def check_either(timeout: object) -> None:
    """Under `"auto"`: a timeout either library takes (seconds or an `httpx.Timeout`).

    Raises:
        ConfigurationError: Any other timeout (an `aiohttp.ClientTimeout` chose aiohttp).
    """
    if seconds_only(timeout) or type(timeout).__module__.startswith("httpx"):
        return
    raise ConfigurationError(
        f"timeout must be a positive number of seconds, an httpx.Timeout or an "
        f"aiohttp.ClientTimeout, not {type(timeout).__name__}"
    )
