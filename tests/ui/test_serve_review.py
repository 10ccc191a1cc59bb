"""Review probes of `llm-worker serve`: a stop (SIGTERM) while a resumable run's tool is
still going ends the server within its graceful-shutdown bound, the factory's lifespan
last."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import anyio
import httpx
import pytest

from .conftest import ROOT
from .serving import API_KEYS, free_port
from .test_bounds import until

pytestmark = pytest.mark.anyio

LONG_TOOL_APP = '''
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

NOTES = Path("notes.txt")


def note(text):
    with NOTES.open("a") as f:
        f.write(text + "\\n")


@tool
async def export() -> str:
    """A long export."""
    note("tool started")
    try:
        await anyio.sleep(3600)
    except BaseException:
        note("tool cancelled")
        raise
    return "exported"


@asynccontextmanager
async def make_worker():
    first = ScriptedResponse([TextPart("Exporting."), ToolUsePart("", "export", {})])
    script = [first] + [ScriptedResponse.text("Done.")] * 3
    async with ScriptedModelServer("anthropic", script) as server, server.client() as client:
        yield lambda: Worker(client, tools=[export])
    note("lifespan ended")
'''

BODY = {
    "id": "c1",
    "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Export"}]}],
    "trigger": "submit-message",
}


def started(process: subprocess.Popen[str]) -> None:
    assert process.stderr is not None
    for line in process.stderr:  # bounded by the test's timeout
        if "Uvicorn running on" in line:
            return
    raise AssertionError("llm-worker serve exited before it listened")


async def test_a_stopped_server_cancels_a_long_run_after_its_graceful_bound(
    tmp_path: Path,
) -> None:
    # uvicorn's own default waits for ever: the server outlived its SIGTERM for as long as
    # the tool ran (an hour here).
    (tmp_path / "long_app.py").write_text(LONG_TOOL_APP)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS}
    command = [sys.executable, "-m", "llm_worker.cli", "serve", "long_app:make_worker"]
    flags = ["--resumable", "--timeout-graceful-shutdown", "1", "--port", str(port)]
    spawn = partial(
        subprocess.Popen,
        [*command, *flags],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    process: subprocess.Popen[str] = await anyio.to_thread.run_sync(spawn)
    try:
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(started, process)
            async with httpx.AsyncClient(timeout=20) as http:
                url = f"http://127.0.0.1:{port}/api/chat"
                async with http.stream("POST", url, json=BODY) as response:
                    await until(response.aiter_lines(), "tool-input-available")
            # The browser has gone; the resumable run's tool goes on.
            process.terminate()
            stopping = time.monotonic()
            _, rest = await anyio.to_thread.run_sync(process.communicate, None, 20)
        took = time.monotonic() - stopping
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    notes = (tmp_path / "notes.txt").read_text().splitlines()
    assert notes == ["tool started", "tool cancelled", "lifespan ended"]
    assert took < 15  # the bound (1 s) and the shutdown, not the tool's hour
    assert "Application shutdown failed" not in rest


def test_the_graceful_shutdown_bound_is_a_documented_flag() -> None:
    from llm_worker.cli import _parser  # pyright: ignore[reportPrivateUsage]

    assert _parser().parse_args(["serve", "app:make_worker"]).timeout_graceful_shutdown == 10
    assert "serve --timeout-graceful-shutdown" in (ROOT / "docs" / "web.md").read_text()
