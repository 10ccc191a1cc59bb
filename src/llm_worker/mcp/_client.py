"""`MCPServer`: an MCP server's tools as llm-worker tools, over stdio or HTTP."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio

from llm_worker._extras import require_extra
from llm_worker._log import logger
from llm_worker._secrets import Scrubber, chain_leaks, install_log_filter
from llm_worker.errors import ConfigurationError, MCPConnectionError, ToolError
from llm_worker.mcp._connection import ConnectionLost, Live, guarded, open_connection
from llm_worker.mcp._results import DEFAULT_MAX_IMAGE_BYTES, result_output
from llm_worker.mcp._secrets import command_label, command_secrets, http_secrets
from llm_worker.mcp._tools import MCPTool, make_tool
from llm_worker.mcp._transports import StdioTransport, Transport, http_transport, passed_env

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from llm_worker.messages import MediaPart

__all__ = ("MCPServer",)

_log = logger("llm_worker.mcp")
Progress = Callable[[float, float | None, str | None], None]

# Loggers that may quote a server's URL or a message with its token: the MCP SDK's (its
# session logs on the root logger itself), httpx's (added by install_log_filter) and ours.
_LOGGERS = (
    "llm_worker.mcp",
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.websocket",
    "mcp.client.auth.oauth2",
    "mcp.client.auth.utils",
    "mcp.shared.tool_name_validation",
    "mcp.os.posix.utilities",
    "client",
    "",
)


class MCPServer:
    """An MCP server whose tools a Worker may call: `Worker(tools=[..., server])`.

    Made with `MCPServer.stdio(...)` or `MCPServer.http(...)` and used as an async context
    manager, which connects and initializes (and at the end closes, stopping a stdio
    server's process):

    ```python
    async with MCPServer.stdio("uvx", ["mcp-server-time"]) as server:
        worker = Worker("anthropic:claude-sonnet-4-5", tools=[server])
        await worker.run("What time is it in Tokyo?")
    ```

    The Worker asks for the tools before each request: after the server's
    `notifications/tools/list_changed` it gets the new list. A tool's annotations set its
    effect (`readOnlyHint` → read-only, `idempotentHint` → idempotent, else side-effecting),
    so early start, parallel runs and retries treat it as a local tool of that effect; hooks
    and approvals apply unchanged.

    Faults become error results the model reads, never a hung run: a call past `timeout`
    (the server is told with `notifications/cancelled`, as on a cancelled run); a server that
    exits, drops the connection or sends something that is not JSON-RPC fails the calls in
    flight, and the next call reconnects (a stdio server is started again), at most
    `max_reconnects` times in a row without a successful call between.

    Args:
        name: The server's name in messages and logs.
        transport: Opens one connection (see `stdio` and `http`).
        prefix: Put before each tool's name (`"time_"`), so two servers' tools never clash.
        include: Only these tools (their names on the server).
        exclude: Not these tools (their names on the server).
        timeout: Seconds a call may take; `None` for no bound.
        init_timeout: Seconds the server has to answer `initialize`.
        max_reconnects: Reconnections in a row before calls fail without trying.
        strict: Offer the tools in OpenAI's strict mode where their schemas allow it (the
            provider then holds the model to the schema); a `null` the model sends for an
            optional argument is left out before the call reaches the server.
        max_image_bytes: The largest image (its base64 size, as the server sends it) a result
            may carry; a result with a larger one becomes an error result naming this limit,
            which the model reads. Default 5 MB: the smallest per-image limit of the
            providers (Anthropic's), so an image let through is one every provider takes.
        secrets: Values never shown in the name, `repr`, an error, a fault text the model
            reads or a log line (replaced by `***`, as are runs of 12 or more of their
            characters; one of 4 to 7 characters where it stands as a word of its own).
            `stdio` and `http` add the tokens they find on the command line, in
            credential-named variables, in the URL and in credential headers.
    """

    def __init__(
        self,
        name: str,
        transport: Transport,
        *,
        prefix: str = "",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        timeout: float | None = 60.0,
        init_timeout: float = 30.0,
        max_reconnects: int = 3,
        strict: bool = False,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
        secrets: Sequence[str] = (),
    ) -> None:
        # A short secret (`--token ab12cd`) is masked where it stands as a word of its own.
        self._scrubber = Scrubber(secrets, words=secrets)
        if self._scrubber:
            install_log_filter(_LOGGERS)
        name = self._scrubber.scrub(name)
        if init_timeout <= 0 or max_reconnects < 0 or (timeout is not None and timeout <= 0):
            raise ConfigurationError(
                f"MCP server {name}: timeout and init_timeout must be positive seconds and "
                "max_reconnects >= 0"
            )
        if max_image_bytes <= 0:
            raise ConfigurationError(
                f"MCP server {name}: max_image_bytes must be a positive number of bytes, "
                f"not {max_image_bytes!r}"
            )
        self.name = name
        self._transport = transport
        self.prefix, self.include, self.exclude = prefix, include, tuple(exclude)
        self.timeout, self.init_timeout, self.max_reconnects = timeout, init_timeout, max_reconnects
        self.strict, self.max_image_bytes = strict, max_image_bytes
        self._group: TaskGroup | None = None
        self._live: Live | None = None
        self._lock = anyio.Lock()
        self._tools: tuple[MCPTool, ...] | None = None
        self._stale = True
        self._failures = 0

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        pass_env: bool = True,
        **options: Any,
    ) -> Self:
        """A server started as a process, spoken to over its stdin and stdout.

        Its stderr goes to the `llm_worker.mcp` logger (level INFO), never to the terminal;
        when it fails to start, the `MCPConnectionError` quotes its last lines.

        A token on the command line (`--token X`, `--api-key=X`, `KEY=X`, a URL's `?key=`, a
        token-like argument) or in a credential-named variable of `env` is never shown: the
        name, `repr`, errors, fault texts and log lines show `***` instead.

        Args:
            command: The program, e.g. `"uvx"` or `"npx"`.
            args: Its arguments, e.g. `["mcp-server-time"]`.
            env: Environment variables, added to a safe default set (`PATH`, `HOME`, …)
                and to the proxy, certificate and package-index variables of this process
                (`llm_worker.mcp.PASSED_ENV`, and every `UV_*`); the rest of this process's
                environment is not passed on.
            cwd: The working directory.
            name: The name in messages; default: the command line (its secrets masked).
            pass_env: Pass on the proxy, certificate and package-index variables (`False`:
                only the safe default set and `env`).
            **options: `prefix`, `include`, `exclude`, `timeout`, `init_timeout`,
                `max_reconnects`, `strict`, `max_image_bytes`, `secrets` (see the class).
        """
        passed = passed_env(os.environ) if pass_env else {}
        found = command_secrets(command, args, env, passed)
        secrets = [*found, *options.pop("secrets", ())]
        scrub = Scrubber(secrets, words=secrets).scrub
        label = scrub(name or command_label([command, *args]))
        server_env = {**passed, **env} if env is not None else (passed or None)
        transport = StdioTransport(command, args, server_env, cwd, name=label, scrub=scrub)
        return cls(label, transport, secrets=secrets, **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        transport: Literal["streamable", "sse"] = "streamable",
        name: str | None = None,
        **options: Any,
    ) -> Self:
        """A server reached over streamable HTTP (or the legacy SSE transport).

        Args:
            url: The endpoint, e.g. `"http://127.0.0.1:8000/mcp"`.
            headers: Sent with each HTTP request (an `Authorization` header, say); never
                logged or put in a message.
            transport: `"streamable"` (the current transport) or `"sse"` (the legacy one).
            name: The name in messages; default: the URL without its user, password and
                query (where keys often travel).
            **options: As `stdio`.

        A key in the URL (its user info, a credential-named query value) or a credential
        header is never shown: not in an error or its chained causes, nor in the MCP SDK's
        or httpx's log lines.
        """
        init = float(options.get("init_timeout", 30.0))
        label = name or _without_secrets(url)
        secrets = [*http_secrets(url, headers), *options.pop("secrets", ())]
        connect = http_transport(url, headers, transport, init)
        return cls(label, connect, secrets=secrets, **options)

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r})"

    async def __aenter__(self) -> Self:
        """Connect and initialize; list the tools.

        Raises:
            MCPConnectionError: The server could not be started or reached, or did not
                answer `initialize` within `init_timeout`; the message names it.
            MissingExtraError: The `mcp` extra is not installed.
        """
        require_extra("mcp", "mcp", feature="MCPServer")
        if self._group is not None:
            raise ConfigurationError(f"MCP server {self.name} is already connected")
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        try:
            await self._connect()
            await self.list_tools()
        except BaseException as exc:
            await self._close(exc)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection (a stdio server's process is stopped)."""
        await self._close(exc)

    async def _close(self, exc: BaseException | None) -> None:
        group, self._group = self._group, None
        if self._live is not None:
            self._live.end("the client closed the connection")
        if group is not None:
            # The connection task ends by itself now (a stdio server gets a bounded time to
            # exit, then is terminated): wait for it, whatever ended the block.
            await group.__aexit__(None, None, None)

    async def _connect(self) -> Live:
        if self._group is None:
            raise ToolError(f"MCP server {self.name} is not connected: use it inside `async with`")
        live = Live()
        self._group.start_soon(
            open_connection, live, self._transport, self.init_timeout, self._on_message, _on_log
        )
        await live.ready.wait()  # bounded: open_connection gives up after init_timeout
        if live.session is None:
            error = _connection_error(self.name, live, self.init_timeout, self._scrub)
            tail = getattr(self._transport, "stderr_tail", None)
            lines: list[str] = await tail() if tail is not None else []
            if lines:
                quoted = "\n  ".join(lines)
                error.args = (f"{error}; the server's stderr ended with:\n  {quoted}",)
            raise error
        self._live, self._stale = live, True
        return live

    def _scrub(self, text: str) -> str:
        return self._scrubber.scrub(text)

    def _chained(self, error: BaseException, cause: BaseException) -> BaseException:
        """`error` with `cause` chained, unless a text of the chain holds a secret."""
        error.__cause__ = None if chain_leaks(cause, self._scrub) else cause
        error.__suppress_context__ = True
        return error

    async def _alive(self) -> Live:
        """The connection, reconnecting (once, bounded) when it ended."""
        live = self._live
        if live is not None and not live.closed.is_set():
            return live
        async with self._lock:
            live = self._live
            if live is not None and not live.closed.is_set():
                return live
            fault = live.fault if live is not None else "not connected"
            if self._failures >= self.max_reconnects:
                raise ToolError(
                    self._scrub(
                        f"MCP server {self.name} is unavailable ({fault}); it was restarted "
                        f"{self._failures} times without a successful call, so no more tries"
                    )
                )
            self._failures += 1
            _log.warning("MCP server %s: reconnecting (%s)", self.name, self._scrub(fault))
            try:
                return await self._connect()
            except MCPConnectionError as exc:
                raise self._chained(ToolError(str(exc)), exc) from None

    async def list_tools(self) -> Sequence[MCPTool]:
        """The server's tools (filtered and prefixed) as llm-worker tools.

        Listed again only after the server said the list changed (or a reconnect); otherwise
        the same list is returned. When the server cannot be reached the last list stays.

        Raises:
            MCPConnectionError: The first listing failed.
        """
        if self._tools is not None and not self._stale:
            return self._tools
        try:
            listed = await self._list()
        except (ToolError, ConnectionLost, Exception) as exc:
            if self._tools is None:
                error = MCPConnectionError(
                    self._scrub(f"MCP server {self.name} did not list its tools: {exc}"),
                    server=self.name,
                )
                raise self._chained(error, exc) from None
            why = self._scrub(str(exc))
            _log.warning("MCP server %s: keeping its last tool list (%s)", self.name, why)
            return self._tools
        self._tools = tuple(listed)
        return self._tools

    async def _list(self) -> list[MCPTool]:
        live = await self._alive()
        self._stale = False  # a change announced from now on lists again
        tools: list[MCPTool] = []
        taken: set[str] = set()  # names made valid may clash: `a.b` and `a_b`
        cursor: str | None = None
        while True:
            page = await guarded(live, functools.partial(live.session.list_tools, cursor))
            for each in page.tools:
                if self._wanted(each.name):
                    tools.append(
                        make_tool(self, each, self.prefix, self.timeout, self.strict, taken=taken)
                    )
            cursor = page.nextCursor
            if not cursor:
                return tools

    def _wanted(self, name: str) -> bool:
        return name not in self.exclude and (self.include is None or name in self.include)

    async def call(
        self, name: str, arguments: dict[str, Any], progress: Progress | None
    ) -> str | list[str | MediaPart]:
        """Call tool `name` (its name on the server); what the model reads (text and images).

        Raises:
            ToolError: The server reported an error, could not be reached, or the connection
                ended during the call.
        """
        live = await self._alive()
        session = live.session
        request_id: int = session._request_id  # the id call_tool is about to use (no await before)
        try:
            result = await guarded(
                live, lambda: session.call_tool(name, arguments, progress_callback=_relay(progress))
            )
        except ConnectionLost as exc:
            text = f"MCP server {self.name}: {exc} during the call; it reconnects on the next call"
            raise self._chained(ToolError(self._scrub(text)), exc) from None
        except anyio.get_cancelled_exc_class():
            await _cancel(live, request_id)
            raise
        except Exception as exc:
            text = f"MCP server {self.name}: {_error_text(exc)}"
            raise self._chained(ToolError(self._scrub(text)), exc) from None
        self._failures = 0
        try:
            return result_output(result, self.name, self.max_image_bytes)
        except ToolError as exc:  # the server's own error text may echo its token
            raise ToolError(self._scrub(str(exc))) from None

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", None)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self._stale = True


async def _cancel(live: Live, request_id: int) -> None:
    """Tell the server a call was given up (`notifications/cancelled`), bounded."""
    if live.closed.is_set():
        return
    types = require_extra("mcp.types", "mcp", feature="MCPServer")
    note = types.ClientNotification(
        types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=request_id, reason="cancelled")
        )
    )
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await live.session.send_notification(note)
        except Exception as exc:  # the connection went: nothing to tell
            _log.debug("could not send notifications/cancelled: %r", exc)


def _without_secrets(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else url.partition("?")[0]


def _relay(progress: Progress | None) -> Any:
    if progress is None:
        return None

    async def relay(done: float, total: float | None, message: str | None) -> None:
        progress(done, total, message)

    return relay


def _error_text(exc: BaseException) -> str:
    status: object = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):  # httpx's message holds the URL, and keys travel in URLs
        return f"the server answered HTTP {status}"
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None)
    return message if isinstance(message, str) else f"{type(exc).__name__}: {exc}"


def _connection_error(
    name: str, live: Live, init_timeout: float, scrub: Callable[[str], str]
) -> MCPConnectionError:
    error = live.error
    if isinstance(error, TimeoutError):
        why = f"it did not answer `initialize` within init_timeout={init_timeout}s"
    elif isinstance(error, OSError):
        why = f"it could not be started or reached ({type(error).__name__}: {error})"
    else:
        why = live.fault if error is None else f"{live.fault} ({_error_text(error)})"
    result = MCPConnectionError(scrub(f"MCP server {name}: {why}"), server=name)
    # A cause whose text holds a secret (httpx's error quotes the URL) is left out.
    result.__cause__ = None if error is None or chain_leaks(error, scrub) else error
    result.__suppress_context__ = True
    return result


async def _on_log(params: Any) -> None:
    _log.info("%s", getattr(params, "data", params))
