"""MCP: tools from any MCP server, and llm-worker tools served over MCP.

Owns `MCPServer` (`_client`: the connection's lifecycle, reconnects, tool listing and calls),
one live connection (`_connection`), the transports (`_transports`), the secrets a
command line or URL carries (`_secrets`), a server's tool as a
llm-worker tool (`_tools`), a call's result as text (`_results`) and `serve` (`_server`).
Needs the `mcp` extra (`pip install 'llm-worker[mcp]'`), imported through
`llm_worker._extras.require_extra`; `import llm_worker` never imports this package.

May import: the model layer, the blob layer and the tool layer (a `Toolset` the Worker asks
before each request, progress reports of a call). Never the Worker, providers or the CLI.
"""

from llm_worker.mcp._client import MCPServer
from llm_worker.mcp._results import image_text
from llm_worker.mcp._server import build_server, serve
from llm_worker.mcp._tools import MCPTool
from llm_worker.mcp._transports import PASSED_ENV, PASSED_ENV_PREFIXES

__all__ = (
    "PASSED_ENV",
    "PASSED_ENV_PREFIXES",
    "MCPServer",
    "MCPTool",
    "build_server",
    "image_text",
    "serve",
)
