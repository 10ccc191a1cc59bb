"""MCP servers the tests run: third-party ones (mcp-server-time from PyPI, installed by the dev
group; @modelcontextprotocol/server-everything from npm, installed into .cache/npm) and our
own scripts in tests/mcp/servers/."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "mcp" / "servers"
NPM_PREFIX = ROOT / ".cache" / "npm"
EVERYTHING = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_JS = NPM_PREFIX / "node_modules" / EVERYTHING / "dist" / "index.js"

TIME_SERVER = (sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"])


def scripted(mode: str, log: Path | None = None) -> tuple[str, list[str]]:
    """The command line of servers/scripted_server.py in `mode`."""
    args = [str(SERVERS / "scripted_server.py"), mode]
    return sys.executable, [*args, str(log)] if log is not None else args


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
