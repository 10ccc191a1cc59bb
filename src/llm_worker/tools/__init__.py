"""The tool layer: what a model may call, and how one call becomes one result.

Owns the `Tool` protocol, `@tool` / `FunctionTool` and `ToolMeta` (`_tool`), the function's
schema and argument validator (`_schema`), OpenAI strict-mode schemas (`llm_worker._strict`),
`ToolRegistry` (`_registry`), a call's `ToolContext` (`_context`), what `enabled=` decides
from (`_enabled`), toolsets and progress reports (`_toolset`), `execute_call` (`_execute`),
`check_arguments` (`_validate`: do arguments fit a tool, before it runs), a tool's return
value as text (`_text`), and every text a model reads about a failed call (`_messages`).

May import: the model layer, the timeline layer (`llm_worker.collectors`: a call as received)
and the blob layer (`ToolOutput`). Never the Worker, providers or the CLI. Modules inside
import each other directly, never through this package.
"""

from llm_worker.tools._context import ToolContext, current_tool_context
from llm_worker.tools._enabled import EnabledCheck, EnabledContext
from llm_worker.tools._execute import ErrorFormatter, execute_call
from llm_worker.tools._registry import ToolRegistry
from llm_worker.tools._result import ToolResult
from llm_worker.tools._tool import (
    Effect,
    FunctionTool,
    Tool,
    ToolMeta,
    tool,
    tool_meta,
)
from llm_worker.tools._toolset import Toolset, report_progress
from llm_worker.tools._validate import check_arguments

__all__ = (
    "Effect",
    "EnabledCheck",
    "EnabledContext",
    "ErrorFormatter",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolMeta",
    "ToolRegistry",
    "ToolResult",
    "Toolset",
    "check_arguments",
    "current_tool_context",
    "execute_call",
    "report_progress",
    "tool",
    "tool_meta",
)
