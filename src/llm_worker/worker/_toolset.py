"""The Worker's tools: the application's, and the built-in inspect tool of a blob store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeIs

from llm_worker.errors import ConfigurationError, PauseStateError
from llm_worker.state import ToolProgress
from llm_worker.tools import Tool, ToolRegistry, Toolset, tool_meta
from llm_worker.tools._toolset import ProgressSink, reporting_progress

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore, OutputPolicy
    from llm_worker.state import PendingCall
    from llm_worker.worker._output import OutputPlan

__all__ = ("add_tool", "build_registry", "check_resumable", "progress_sink", "reporting_progress")


def progress_sink(sinks: list[Callable[[Any], None]]) -> ProgressSink:
    """Progress reports of tool calls as `ToolProgress` events to the run's sinks."""

    def send(call_id: str, name: str, done: float, total: float | None, text: str | None) -> None:
        if sinks:
            event = ToolProgress(call_id, name, done, total, text)
            for sink in sinks:
                sink(event)

    return send


def build_registry(
    tools: Iterable[Tool | Toolset],
    store: BlobStore | None,
    policy: OutputPolicy | None,
    inspect_name: str,
    output: OutputPlan | None = None,
) -> tuple[ToolRegistry, OutputPolicy | None]:
    """The Worker's tools, the output tool of a tool-mode plan, and the inspect tool last.

    The built-in inspect tool is added when there is a blob store.
    """
    registry = ToolRegistry()
    if output is not None and output.tool is not None:
        tools = [*tools, output.tool]
    if store is not None:
        from llm_worker.blobs import InspectTool, OutputPolicy

        policy = policy or OutputPolicy()
        builtin = InspectTool(store, policy, name=inspect_name)
        for t in tools:
            add_tool(registry, t, builtin)
        registry.add(builtin)
        return registry, policy
    for t in tools:
        add_tool(registry, t)
    return registry, policy


def add_tool(registry: ToolRegistry, tool: Tool | Toolset, builtin: Tool | None = None) -> None:
    """Register `tool` (or a toolset); a clash with the built-in inspect tool is named as such."""
    if _is_toolset(tool):
        registry.add_toolset(tool)
        return
    name = tool_meta(tool).name
    clash = builtin if builtin is not None and builtin.name == name else registry.get(name)
    if clash is not None and _is_inspect(clash):
        raise ConfigurationError(
            f"your tool {name!r} has the name of the built-in tool that reads stored outputs "
            "back, which comes with blob_store: rename your tool, or the built-in one with "
            f"Worker(inspect_tool_name=...), e.g. inspect_tool_name='read_blob'"
        )
    registry.add(tool)


def _is_toolset(tool: object) -> TypeIs[Toolset]:
    return isinstance(tool, Toolset) and not callable(getattr(tool, "execute", None))


def _is_inspect(tool: Tool) -> bool:
    from llm_worker.blobs import InspectTool

    return isinstance(tool, InspectTool)


def check_resumable(
    registry: ToolRegistry, pending: Iterable[PendingCall], known: Sequence[str] | None
) -> None:
    """Refuse to resume calls of tools the resuming Worker lacks but the pausing one had.

    Raises:
        PauseStateError: Names the missing tools.
    """
    missing = {p.call.name for p in pending if p.status in ("pending", "allowed")}
    missing -= set(registry.names)
    if known is not None:
        # A name the pausing Worker did not have either is the model's call of an unknown
        # tool: it gets an error result, as it would have without the pause.
        missing &= set(known)
    if missing:
        raise PauseStateError(
            f"cannot resume: this Worker has no tool named {', '.join(sorted(missing))}; "
            "register the same tools as the Worker that paused"
        )
