"""MCP servers for the tests: third-party ones (mcp-server-time from PyPI, installed by the dev
group; @modelcontextprotocol/server-everything from npm, installed once into .cache/npm) and
our own scripts in servers/."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.mcp_servers import (
    EVERYTHING,
    EVERYTHING_JS,
    EVERYTHING_VERSION,
    NPM_PREFIX,
    free_port,
)
from support.once import installing


@pytest.fixture(scope="session")
def everything_js() -> Path:
    """server-everything's entry point, installed from npm once (cached in .cache/npm)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("npm and node are needed for @modelcontextprotocol/server-everything")
    with installing(NPM_PREFIX):
        if not EVERYTHING_JS.exists():
            spec = f"{EVERYTHING}@{EVERYTHING_VERSION}"
            cmd = [npm, "install", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund", spec]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
            if done.returncode != 0:
                pytest.skip(f"npm could not install {spec}: {done.stderr[-500:]}")
    return EVERYTHING_JS


@pytest.fixture(scope="session")
def everything_http(everything_js: Path) -> Iterator[str]:
    """server-everything over streamable HTTP on 127.0.0.1, started once: its URL."""
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    process = subprocess.Popen(
        ["node", str(everything_js), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    drain: threading.Thread | None = None
    try:
        assert process.stderr is not None
        for line in process.stderr:  # bounded: the process prints this line or exits
            if "listening on port" in line:
                break
        else:
            pytest.fail(f"server-everything did not start (exit {process.wait(5)})")
        # Keep reading its stderr, so the server never blocks on a full pipe.
        drain = threading.Thread(target=process.stderr.read, daemon=True)
        drain.start()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        if drain is not None:
            drain.join(10)
        if process.stderr is not None:
            process.stderr.close()
