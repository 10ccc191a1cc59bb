"""`llm-worker serve`: an adapter (and optionally a static page) behind uvicorn."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Literal

from llm_worker._extras import require_extra
from llm_worker.errors import ConfigurationError

__all__ = (
    "API_PATH",
    "check_exposure",
    "load_factory",
    "make_adapter",
    "run_server",
    "web_app",
)

API_PATH = "/api/chat"
"""Where `web_app` mounts the adapter (the path `useChat` posts to by default)."""

Protocol = Literal["vercel", "ag-ui"]


def load_factory(target: str) -> Any:
    """The callable `MODULE:FACTORY` names (the current folder is importable, as for uvicorn).

    Raises:
        ConfigurationError: Not of the form `module:name`, the module does not import, or it
            has no such callable.
    """
    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise ConfigurationError(f"{target!r} is not MODULE:FACTORY (e.g. app:make_worker)")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from exc
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigurationError(f"{module_name!r} has no callable {name!r}")
    return factory


def make_adapter(
    factory: Any, protocol: Protocol, *, resumable: bool = False, authorize: Any = None
) -> Any:
    """The adapter of `protocol` (`"vercel"` or `"ag-ui"`) around `factory`.

    With `resumable`, its runs outlive their connection (see `ResumableStreams`); with
    `authorize`, every request is asked its owner (see `Authorize`).
    """
    if protocol == "vercel":
        from llm_worker.ui._vercel_app import VercelAIAdapter

        return VercelAIAdapter(factory, resumable=resumable, authorize=authorize)
    if protocol == "ag-ui":
        from llm_worker.ui._agui_app import AGUIAdapter

        return AGUIAdapter(factory, resumable=resumable, authorize=authorize)
    raise ConfigurationError(f"unknown protocol {protocol!r} (vercel or ag-ui)")


def web_app(adapter: Any, *, static: Path | None = None, path: str = API_PATH) -> Any:
    """A Starlette app: `adapter` at `path`, and the files of `static` (if given) at `/`.

    `{path}/{chat_id}/stream` reaches the adapter too: a resumable adapter answers there
    the reconnect (GET) and the stop (DELETE) of a chat's run.

    Raises:
        MissingExtraError: `llm-worker[web]` is not installed.
    """
    applications = require_extra("starlette.applications", "web", feature="llm_worker.ui")
    routing = require_extra("starlette.routing", "web", feature="llm_worker.ui")
    # An ASGI app as endpoint: every method reaches it.
    routes: list[Any] = [
        routing.Route(path, endpoint=adapter),
        routing.Route(path.rstrip("/") + "/{chat_id}/stream", endpoint=adapter),
    ]
    if static is not None:
        files = require_extra("starlette.staticfiles", "web", feature="llm_worker.ui")
        routes.append(routing.Mount("/", app=files.StaticFiles(directory=static, html=True)))
    return applications.Starlette(routes=routes)


def run_server(
    target: str,
    protocol: Protocol,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    static: Path | None = None,
    resumable: bool = False,
    authorize: str | None = None,
) -> None:
    """Serve `MODULE:FACTORY` with uvicorn until interrupted (what `llm-worker serve` runs).

    `authorize` names (`MODULE:FUNCTION`) the `Authorize` callable every request goes
    through. Without one every client acts as one user: only a loopback `host` is served.

    Raises:
        ConfigurationError: A host other than a loopback address without `authorize`.
    """
    uvicorn = require_extra("uvicorn", "web", feature="llm-worker serve")
    check_exposure(host, authorize)
    allow = load_factory(authorize) if authorize else None
    adapter = make_adapter(load_factory(target), protocol, resumable=resumable, authorize=allow)
    app = web_app(adapter, static=static)
    uvicorn.run(app, host=host, port=port, log_level="info")


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

UNAUTHORIZED = (
    "llm-worker serve: no --authorize given, so every client acts as one user (anyone "
    "reaching the server could answer another's approvals, read or stop its runs); "
    "serving on this machine only. Pass --authorize MODULE:FUNCTION to serve others."
)


def check_exposure(host: str, authorize: str | None) -> None:
    """Refuse to serve others without `authorize`; warn (on stderr) that it is local-only.

    Raises:
        ConfigurationError: `host` is not a loopback address and no `authorize` is given.
    """
    if authorize:
        return
    if host not in _LOOPBACK:
        raise ConfigurationError(
            f"refusing to serve on {host!r} without --authorize: without it every client "
            "acts as one user (see docs/web.md, Security); use 127.0.0.1 or pass "
            "--authorize MODULE:FUNCTION"
        )
    print(UNAUTHORIZED, file=sys.stderr)
