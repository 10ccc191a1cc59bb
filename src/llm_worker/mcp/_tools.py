"""`MCPTool`: one tool of an MCP server, as a llm-worker tool."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from llm_worker._json import as_dict
from llm_worker._log import logger
from llm_worker._strict import drop_optional_nulls, strict_schema
from llm_worker.errors import ConfigurationError, ToolError
from llm_worker.tools import Effect, ToolMeta
from llm_worker.tools._tool import MetaTool
from llm_worker.tools._toolset import current_progress

if TYPE_CHECKING:
    from collections.abc import Callable

    from llm_worker.messages import MediaPart
    from mcp import types

__all__ = ("Caller", "MCPTool", "effect_of", "make_tool", "tool_name")

_BAD = re.compile(r"[^A-Za-z0-9_-]")
_log = logger("llm_worker.mcp")


class Caller(Protocol):
    """Runs a tool on its server: what an `MCPTool` calls (its `MCPServer`)."""

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: Callable[[float, float | None, str | None], None] | None,
    ) -> str | list[str | MediaPart]:
        """Call tool `name` and return what the model reads."""
        ...


class MCPTool(MetaTool):
    """A tool of an MCP server: its schema passed through, its calls sent to the server.

    Attributes:
        meta: Name (with the server's prefix), description, input schema and effect (from the
            tool's annotations, see `effect_of`); the server's call timeout.
        remote_name: The tool's name on the server.
    """

    __slots__ = ("_schema", "_server", "meta", "remote_name")

    def __init__(
        self, server: Caller, remote_name: str, meta: ToolMeta, schema: dict[str, Any]
    ) -> None:
        self._server = server
        self.remote_name = remote_name
        self.meta = meta
        self._schema = schema  # the server's own, when meta has the strict form

    async def execute(self, input_json: str) -> str | list[str | MediaPart]:
        """Send the call to the server; what it returns is the result's text.

        Raises:
            ToolError: The arguments are not a JSON object, the server reported an error, it
                could not be reached or it dropped the connection during the call.
        """
        try:
            arguments = as_dict(orjson.loads(input_json or "{}"))
        except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
            raise ToolError(f"the arguments must be a JSON object: {exc}") from exc
        if self.meta.strict:  # strict mode's null means "left out": the server wants it so
            drop_optional_nulls(arguments, self._schema)
        return await self._server.call(self.remote_name, arguments, current_progress())

    def __repr__(self) -> str:
        return f"<MCPTool {self.name!r}>"


def effect_of(annotations: types.ToolAnnotations | None) -> Effect:
    """The effect a tool's annotations declare.

    `readOnlyHint` → read-only; else `idempotentHint` → idempotent; anything else (a
    `destructiveHint`, or no hints: the spec's defaults) → side-effecting.
    """
    if annotations is None:
        return "side_effect"
    if annotations.readOnlyHint:
        return "read_only"
    if annotations.idempotentHint:
        return "idempotent"
    return "side_effect"


def tool_name(prefix: str, name: str) -> str:
    """The name a server's tool is offered as: `prefix` + `name`, made one providers accept.

    Characters providers refuse become `_`; a name too long keeps its first 64 characters.
    """
    fixed = _BAD.sub("_", prefix + name)
    if not fixed[:1].isalpha() and fixed[:1] != "_":
        fixed = "_" + fixed
    return fixed[:64]


def make_tool(
    server: Caller,
    tool: types.Tool,
    prefix: str,
    timeout: float | None,
    strict: bool,
    *,
    taken: set[str] | None = None,
) -> MCPTool:
    """The llm-worker tool for one tool a server listed.

    With `strict`, the schema takes OpenAI's strict form where it can (see `ToolMeta.strict`);
    a schema strict mode cannot express (free-form objects) stays as it is, not strict.
    A name already in `taken` (`a.b` and `a_b` both become `a_b`) gets a `_2`, `_3`, …
    suffix; the name chosen is added to `taken`.
    """
    name = base = tool_name(prefix, tool.name)
    taken = set() if taken is None else taken
    count = 1
    while name in taken:
        count += 1
        name = f"{base[: 63 - len(str(count))]}_{count}"
    taken.add(name)
    schema = dict(tool.inputSchema)
    offered, is_strict = schema, False
    if strict:
        try:
            offered, is_strict = strict_schema(schema, name), True
        except ConfigurationError as exc:
            _log.info("MCP tool %s stays non-strict: %s", name, exc)
    meta = ToolMeta(
        name,
        tool.description or (tool.annotations.title if tool.annotations else None) or tool.name,
        offered,
        effect=effect_of(tool.annotations),
        timeout=timeout,
        strict=is_strict,
    )
    return MCPTool(server, tool.name, meta, schema)
