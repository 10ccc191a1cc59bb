"""Fixtures of the web adapter tests: the official npm consumers, and a real HTTP server."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".cache" / "node"
SCRIPTS = Path(__file__).parent / "node"
# The consumers the tests run against, pinned: `ai` 6.x (protocol v1; 7.x needs node >= 22).
PACKAGES = {"ai": "6.0.326", "@ag-ui/core": "1.0.0", "@ag-ui/client": "1.0.0"}


def _installed() -> bool:
    for name, version in PACKAGES.items():
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The npm consumers, installed once into .cache/node (skips where npm is absent)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the consumer tests (not on PATH)")
    if not _installed():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        (NODE_DIR / "package.json").write_text('{"name": "llm-worker-consumers", "private": true}')
        specs = [f"{n}@{v}" for n, v in PACKAGES.items()]
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", *specs],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"npm install of {specs} failed: {done.stderr[-500:]}")
    return NODE_DIR / "node_modules"


async def run_node(node_modules: Path, script: str, *args: str) -> Any:
    """Run a consumer script (with the cached packages) and return the JSON it prints."""
    env = {"NODE_PATH": str(node_modules), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    # An .mjs resolves packages from its own folder up: run a copy inside the cache.
    target = node_modules.parent / script
    target.write_text((SCRIPTS / script).read_text())
    with anyio.fail_after(60):
        done = await anyio.run_process(["node", str(target), *args], env=env, check=False)
    if done.returncode != 0:
        raise AssertionError(f"node {script} failed: {done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout)


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 (a free port); yields its base URL."""
    import uvicorn

    # The socket listens before uvicorn serves: a client connecting early waits in the backlog.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
