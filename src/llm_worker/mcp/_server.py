"""`serve`: llm-worker tools as an MCP server, over stdio or streamable HTTP (the SDK's server)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import orjson

from llm_worker._extras import require_extra
from llm_worker.collectors import ToolCall
from llm_worker.errors import ConfigurationError
from llm_worker.tools import Tool, ToolMeta, ToolRegistry, execute_call, tool_meta

__all__ = ("build_server", "serve")

_ids = itertools.count(1)


def build_server(tools: Iterable[Tool], *, name: str = "llm-worker") -> Any:
    """An MCP server (the SDK's low-level `Server`) offering `tools`.

    Each tool is listed with the name, description and JSON Schema a model would be given, and
    annotations from its effect (`read_only` → `readOnlyHint`, `idempotent` →
    `idempotentHint`, `side_effect` → `destructiveHint`). A call runs as a Worker runs one
    (`execute_call`): invalid arguments, a `ToolError`, any exception, a timeout become an
    error result (`isError`) whose text says what went wrong. A result that is a JSON object
    is also sent as `structuredContent`.

    Raises:
        ConfigurationError: Two tools share a name, or an object is not a tool.
        MissingExtraError: The `mcp` extra is not installed.
    """
    lowlevel = require_extra("mcp.server.lowlevel", "mcp", feature="llm_worker.mcp.serve")
    types = require_extra("mcp.types", "mcp", feature="llm_worker.mcp.serve")
    registry = ToolRegistry(tools)
    server = lowlevel.Server(name)
    listed = [_listing(types, tool_meta(t)) for t in registry]

    async def list_tools() -> list[Any]:
        return listed

    async def call_tool(tool_name: str, arguments: dict[str, Any] | None) -> Any:
        call = ToolCall(f"mcp-{next(_ids)}", tool_name, dict(arguments or {}))
        result = await execute_call(registry.get(tool_name), call, available=registry.names)
        structured = _json_object(result.content) if not result.is_error else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.content)],
            structuredContent=structured,
            isError=result.is_error,
        )

    server.list_tools()(list_tools)
    server.call_tool(validate_input=False)(call_tool)  # the tools validate, with clear texts
    return server


def _listing(types: Any, meta: ToolMeta) -> Any:
    annotations = types.ToolAnnotations(
        readOnlyHint=meta.effect == "read_only",
        idempotentHint=meta.effect != "side_effect",
        destructiveHint=meta.effect == "side_effect",
    )
    return types.Tool(
        name=meta.name,
        description=meta.description,
        inputSchema=meta.input_schema,
        annotations=annotations,
    )


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None  # pyright: ignore[reportUnknownVariableType]


async def serve(
    tools: Sequence[Tool],
    *,
    name: str = "llm-worker",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
) -> None:
    """Serve `tools` as an MCP server until cancelled (or, on stdio, until stdin closes).

    Args:
        tools: `@tool` functions or `Tool` objects.
        name: The server's name, told to clients at `initialize`.
        transport: `"stdio"` (the process's stdin and stdout) or `"http"` (streamable HTTP).
        host: HTTP only: the address to listen on.
        port: HTTP only: the port.
        path: HTTP only: the endpoint's path.

    Raises:
        ConfigurationError: An unknown transport; as `build_server`.
    """
    server = build_server(tools, name=name)
    if transport == "stdio":
        stdio = require_extra("mcp.server.stdio", "mcp", feature="llm_worker.mcp.serve")
        async with stdio.stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    if transport != "http":
        raise ConfigurationError(f"transport {transport!r} is not 'stdio' or 'http'")
    await _serve_http(server, host, port, path)


async def _serve_http(server: Any, host: str, port: int, path: str) -> None:
    manager_mod = require_extra("mcp.server.streamable_http_manager", "mcp", feature="serve")
    starlette = require_extra("starlette.applications", "mcp", feature="serve")
    routing = require_extra("starlette.routing", "mcp", feature="serve")
    uvicorn = require_extra("uvicorn", "mcp", feature="serve")
    manager = manager_mod.StreamableHTTPSessionManager(app=server)

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        await manager.handle_request(scope, receive, send)

    def lifespan(_app: object) -> Any:
        return manager.run()

    app = starlette.Starlette(routes=[routing.Mount(path, app=endpoint)], lifespan=lifespan)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
