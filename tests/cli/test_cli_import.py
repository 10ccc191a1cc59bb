"""`import llm_worker` stays free of the CLI's libraries (rich, argparse)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import llm_worker
from llm_worker import Worker, Timeline, tool, FsBlobStore, Message
from llm_worker.testing import ScriptedModelServer
from llm_worker.providers import AnthropicClient, OpenAIChatClient
print(sorted(m for m in ("rich", "argparse", "llm_worker.cli") if m in sys.modules))
"""


def test_import_llm_worker_does_not_load_the_cli_libraries() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_cli_is_a_runnable_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "llm_worker.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "usage: llm-worker" in done.stdout
    for command in ("demo", "chat", "run"):
        assert command in done.stdout
