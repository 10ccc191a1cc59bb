"""`llm-worker serve` in a child process, on a free port of 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

API_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


def free_port() -> int:
    """A port of 127.0.0.1 free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def llm_worker_serve(cwd: Path, *args: str) -> Iterator[tuple[str, list[str]]]:
    """`llm-worker serve ARGS` in `cwd` (offline: no API key or model in its environment).

    Yields its base URL and the lines of its stderr read so far; on leaving, it is stopped
    with SIGTERM (uvicorn's graceful shutdown) and the rest of its stderr is read.
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS and k != "LLM_WORKER_MODEL"}
    command = [sys.executable, "-m", "llm_worker.cli", "serve", *args, "--port", str(port)]
    process = subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:  # uvicorn says when it listens; bounded by the timeout
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            raise AssertionError("llm-worker serve exited: " + "".join(seen))
        yield f"http://127.0.0.1:{port}", seen
    finally:
        process.terminate()
        try:
            _, rest = process.communicate(timeout=15)
            seen.extend(rest.splitlines(keepends=True))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate(timeout=10)  # reaps it and closes its stderr pipe
