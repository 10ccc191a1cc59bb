"""`ToolRegistry`: the tools of a Worker, by name, checked as they are added."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from llm_worker.errors import ConfigurationError
from llm_worker.messages import ToolSpec
from llm_worker.tools._tool import FunctionTool, Tool, ToolMeta, tool_meta
from llm_worker.tools._toolset import Toolset

__all__ = ("ToolRegistry",)


class ToolRegistry:
    """The tools of a Worker, by name.

    Args:
        tools: Tools to add, in order.

    Raises:
        ConfigurationError: As `add`.
    """

    __slots__ = ("_listed", "_metas", "_names", "_sources", "_specs", "_tools")

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._metas: dict[str, ToolMeta] = {}
        self._names: tuple[str, ...] = ()
        self._specs: tuple[ToolSpec, ...] = ()
        # What was added, in order: a tool, or a toolset (kept in a 1-tuple to tell them
        # apart without guessing from attributes), and each toolset's last list by position.
        self._sources: list[Tool | tuple[Toolset]] = []
        self._listed: dict[int, Sequence[Tool]] = {}
        for each in tools:
            self.add(each)

    def add(self, tool: Tool) -> None:
        """Register a tool.

        Raises:
            ConfigurationError: Another tool has its name (the message names it), the object
                is not a tool (a plain function not decorated with `@tool`), or it is a
                method's tool reached through the class instead of an instance.
        """
        if _unbound_method(tool):
            raise ConfigurationError(
                f"tool {tool.name!r} is a method reached through its class: register it "
                "through an instance (app.method), so it runs with that instance"
            )
        if not callable(getattr(tool, "execute", None)):
            raise ConfigurationError(
                f"{tool!r} is not a tool: decorate the function with @tool, or implement "
                "`name`, `description`, `input_schema` and an async `execute`"
            )
        self._add(tool)
        self._sources.append(tool)

    def add_toolset(self, toolset: Toolset) -> None:
        """Register a source of tools (an MCP server); `refresh` asks it for its tools."""
        self._sources.append((toolset,))

    async def refresh(self) -> None:
        """Ask each toolset for its tools, and take in the lists that changed.

        The Worker calls it before each model request. Left as it was on an error.

        Raises:
            ConfigurationError: A toolset's tool has the name of another tool.
        """
        listed = dict(self._listed)
        for index, source in enumerate(self._sources):
            if isinstance(source, tuple):
                listed[index] = await source[0].list_tools()
        if all(listed[i] is self._listed.get(i) for i in listed):
            return
        fresh = ToolRegistry()
        for index, source in enumerate(self._sources):
            for each in listed[index] if isinstance(source, tuple) else (source,):
                fresh._add(each)
        self._tools, self._metas = fresh._tools, fresh._metas
        self._names, self._specs, self._listed = fresh._names, fresh._specs, listed

    def _add(self, tool: Tool) -> None:
        meta = tool_meta(tool)
        if meta.name in self._tools:
            raise ConfigurationError(
                f"two tools are named {meta.name!r}: tool names must be unique "
                "(rename one, e.g. @tool(name=...), or give an MCP server a prefix=)"
            )
        self._tools[meta.name] = tool
        self._metas[meta.name] = meta
        self._names = (*self._names, meta.name)
        self._specs = (*self._specs, meta.spec())

    def get(self, name: str) -> Tool | None:
        """The tool named `name`, or `None`."""
        return self._tools.get(name)

    def meta(self, name: str) -> ToolMeta | None:
        """The metadata of the tool named `name`, or `None`."""
        return self._metas.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """The tools' names, in registration order."""
        return self._names

    @property
    def metas(self) -> Mapping[str, ToolMeta]:
        """Each tool's metadata by name, in registration order (read-only)."""
        return MappingProxyType(self._metas)

    def specs(self) -> list[ToolSpec]:
        """The tools as offered to the model, in registration order."""
        return list(self._specs)

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._names)!r})"


def _unbound_method(tool: object) -> bool:
    return isinstance(tool, FunctionTool) and cast("FunctionTool[..., Any]", tool).needs_instance
