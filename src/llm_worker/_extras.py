"""Optional extras: import a module that an extra installs, or say which extra to install.

Each integration (`llm-worker[mcp]`, `[otel]`, `[dbos]`, `[obstore]`, `[aiohttp]`, `[web]`, …)
imports its third-party package through `require_extra`, never at `import llm_worker`, so the
library stays light and a missing extra is one clear error instead of a bare ImportError.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from llm_worker.errors import MissingExtraError

__all__ = ("require_extra",)


def require_extra(module: str, extra: str, *, feature: str) -> ModuleType:
    """Import `module`, which the `llm-worker[extra]` extra installs.

    Args:
        module: The module to import, e.g. `"mcp"` or `"opentelemetry.trace"`.
        extra: The extra that installs it, e.g. `"mcp"`.
        feature: What needs it, for the message, e.g. `"MCPServer"`.

    Raises:
        MissingExtraError: The module cannot be imported; the message names the extra.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(extra, feature, str(exc)) from exc
