"""`llm-worker serve`: an adapter (and optionally a static page) behind uvicorn."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import AsyncGenerator, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from llm_worker._extras import require_extra
from llm_worker.errors import ConfigurationError
from llm_worker.ui._asgi import Receive, Scope, Send

__all__ = (
    "API_PATH",
    "GRACEFUL_SHUTDOWN",
    "KEEP_ALIVE",
    "LIMIT_CONCURRENCY",
    "build_app",
    "chat_routes",
    "check_exposure",
    "load_factory",
    "make_adapter",
    "run_server",
    "web_app",
)

API_PATH = "/api/chat"
"""Where `web_app` routes the adapter (the path `useChat` posts to by default)."""

LIMIT_CONCURRENCY = 1_000
"""`llm-worker serve`'s default `--limit-concurrency`: past it, uvicorn answers 503."""
KEEP_ALIVE = 5
"""`llm-worker serve`'s default `--timeout-keep-alive`, in seconds (uvicorn's own)."""
GRACEFUL_SHUTDOWN = 10
"""`llm-worker serve`'s default `--timeout-graceful-shutdown`, in seconds: then the runs
still going are cancelled (uvicorn's own default waits for them for ever: a resumable run
whose tool takes an hour kept a stopped server up for that hour)."""

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
    factory: Any,
    protocol: Protocol,
    *,
    resumable: bool = False,
    authorize: Any = None,
    **limits: Any,
) -> Any:
    """The adapter of `protocol` (`"vercel"` or `"ag-ui"`) around `factory`.

    With `resumable`, its runs outlive their connection (see `ResumableStreams`); with
    `authorize`, every request is asked its owner (see `Authorize`); `limits` are the
    adapter's request bounds (`body_timeout`, `max_parts`, …).
    """
    if protocol == "vercel":
        from llm_worker.ui._vercel_app import VercelAIAdapter

        return VercelAIAdapter(factory, resumable=resumable, authorize=authorize, **limits)
    if protocol == "ag-ui":
        from llm_worker.ui._agui_app import AGUIAdapter

        return AGUIAdapter(factory, resumable=resumable, authorize=authorize, **limits)
    raise ConfigurationError(f"unknown protocol {protocol!r} (vercel or ag-ui)")


def chat_routes(adapter: Any, path: str = API_PATH) -> list[Any]:
    """The two Starlette routes of `adapter`, to add to an app of your own (or FastAPI's).

    `path` takes the chat POST; `{path}/{chat_id}/stream` the reconnect (GET) and the stop
    (DELETE) of a resumable run. Routes, not a `Mount`: a `Mount("/api/chat", ...)` matches
    only paths under `/api/chat/`, so the POST to `/api/chat` itself is redirected (307) or,
    beside a `Mount("/")` of static files, answered 405 by them.

    Raises:
        MissingExtraError: `llm-worker[web]` is not installed.
    """
    routing = require_extra("starlette.routing", "web", feature="llm_worker.ui")
    # An ASGI app as endpoint: every method reaches it.
    return [
        routing.Route(path, endpoint=adapter),
        routing.Route(path.rstrip("/") + "/{chat_id}/stream", endpoint=adapter),
    ]


def web_app(
    adapter: Any,
    *,
    static: Path | str | None = None,
    path: str = API_PATH,
    lifespan: Callable[[Any], AbstractAsyncContextManager[Any]] | None = None,
) -> Any:
    """A Starlette app: `adapter` at `path` (see `chat_routes`), the files of `static` at `/`.

    What `llm-worker serve` runs. Mount it whole in another app (`Mount("/", web_app(...))`,
    `app.mount("/", ...)` in FastAPI, after your own routes) or use `chat_routes` for the
    adapter alone.

    Args:
        adapter: A `VercelAIAdapter` or `AGUIAdapter` (any ASGI app).
        static: A folder of files served at `/` (`index.html` for a folder), if given.
        path: Where the adapter answers (`/api/chat`, where `useChat` posts by default).
        lifespan: Starlette's lifespan: an async context manager function given the app,
            entered at startup and left at shutdown (shared clients, pools, an MCP server).

    Raises:
        MissingExtraError: `llm-worker[web]` is not installed.
    """
    applications = require_extra("starlette.applications", "web", feature="llm_worker.ui")
    routes = chat_routes(adapter, path)
    if static is not None:
        routing = require_extra("starlette.routing", "web", feature="llm_worker.ui")
        files = require_extra("starlette.staticfiles", "web", feature="llm_worker.ui")
        routes.append(routing.Mount("/", app=files.StaticFiles(directory=static, html=True)))
    return _CloseUnread(applications.Starlette(routes=routes, lifespan=lifespan))


class _CloseUnread:
    """Closes the connection of a response sent before its request's body was read.

    uvicorn keeps such a connection alive, and re-arms nothing while bytes arrive: a client
    trickling a body to a path that answers without reading it (a 404, a 405) would hold
    its connection for ever.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)  # the Starlette app's routes, state, …

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        unread = True

        async def receiving() -> MutableMapping[str, Any]:
            nonlocal unread
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                unread = False
            return message

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and unread:
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receiving, sending)


def _has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        key = bytes(name).lower()
        if key == b"transfer-encoding" or (key == b"content-length" and bytes(value) != b"0"):
            return True
    return False


def build_app(
    target: str,
    protocol: Protocol,
    *,
    static: Path | None = None,
    resumable: bool = False,
    **limits: Any,
) -> Any:
    """The app `llm-worker serve` runs for `MODULE:FACTORY`.

    The factory may also be an async context manager function (`@asynccontextmanager`, or
    an async generator function) that yields the factory: it is entered at startup and left
    at shutdown, so the resources its Workers share (a client, a pool, an MCP server) live
    as long as the server.

    Raises:
        ConfigurationError: `target` does not name a callable.
        MissingExtraError: `llm-worker[web]` is not installed.
    """
    found = load_factory(target)
    context = _factory_context(found)
    if context is None:
        adapter = make_adapter(found, protocol, resumable=resumable, **limits)
        return web_app(adapter, static=static)
    adapter = make_adapter(_not_started, protocol, resumable=resumable, **limits)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncGenerator[None]:
        del app
        async with context() as factory:
            if not callable(factory):
                raise ConfigurationError(f"{target} yielded {factory!r}, not a Worker factory")
            adapter.worker_factory = factory
            yield

    return web_app(adapter, static=static, lifespan=lifespan)


def _factory_context(found: Any) -> Callable[[], AbstractAsyncContextManager[Any]] | None:
    """`found` as a context manager function, if it is one (else it is the factory itself)."""
    inner = inspect.unwrap(found)
    if not inspect.isasyncgenfunction(inner):
        return None
    return found if inner is not found else asynccontextmanager(found)


def _not_started() -> Any:
    # The adapter exists before the lifespan yields the factory; no request comes before it.
    raise ConfigurationError("the worker factory's lifespan has not started")


def run_server(
    target: str,
    protocol: Protocol,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    static: Path | None = None,
    resumable: bool = False,
    limit_concurrency: int | None = LIMIT_CONCURRENCY,
    timeout_keep_alive: int = KEEP_ALIVE,
    timeout_graceful_shutdown: int | None = GRACEFUL_SHUTDOWN,
    authorize: str | None = None,
    **limits: Any,
) -> None:
    """Serve `MODULE:FACTORY` with uvicorn until interrupted (what `llm-worker serve` runs).

    Args:
        target: `MODULE:FACTORY` (see `build_app`).
        protocol: `"vercel"` or `"ag-ui"`.
        host: The address to listen on.
        port: The port to listen on.
        static: A folder of files served at `/`.
        resumable: Runs outlive their connection.
        limit_concurrency: Past this many connections and tasks, uvicorn answers 503.
        timeout_keep_alive: Seconds an idle kept-alive connection stays open.
        timeout_graceful_shutdown: Seconds a stopping server waits for the requests and
            runs still going before it cancels them (`None`: for ever).
        authorize: Names (`MODULE:FUNCTION`) the `Authorize` callable every request goes
            through. Without one every client acts as one user: only a loopback `host` is
            served.
        **limits: The adapter's request bounds (`body_timeout`, `max_parts`, …).

    Raises:
        ConfigurationError: A host other than a loopback address without `authorize`.
    """
    uvicorn = require_extra("uvicorn", "web", feature="llm-worker serve")
    check_exposure(host, authorize)
    allow = load_factory(authorize) if authorize else None
    options = {"static": static, "resumable": resumable, "authorize": allow}
    app = build_app(target, protocol, **options, **limits)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        lifespan="on",  # a factory's lifespan that fails stops the server ("auto" goes on)
        # uvicorn counts the connection asking: at N it refuses the Nth. Past N, as documented
        # (the default serves 1,000 runs at once, not 999).
        limit_concurrency=None if limit_concurrency is None else limit_concurrency + 1,
        timeout_keep_alive=timeout_keep_alive,
        timeout_graceful_shutdown=timeout_graceful_shutdown,
    )


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
