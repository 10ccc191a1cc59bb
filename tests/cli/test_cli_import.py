"""`import llm_worker` stays free of the CLI's libraries (rich, argparse)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# httpx imports its own command line (which loads rich) when click, rich and pygments are all
# installed — they are in the dev environment, click coming with uvicorn (the `web` extra). What
# httpx loads by itself is measured first and left out: the test is about llm-worker's imports.
PROBE = """
import sys
import httpx
by_httpx = set(sys.modules)
import llm_worker
from llm_worker import Worker, Timeline, tool, FsBlobStore, Message
from llm_worker.testing import ScriptedModelServer
from llm_worker.providers import AnthropicClient, OpenAIChatClient
names = ("rich", "argparse", "llm_worker.cli")
print(sorted(m for m in names if m in sys.modules and m not in by_httpx))
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


WITHOUT_RICH = """
import sys
sys.modules["rich"] = None  # as after `pip install llm-worker`, without the cli extra
import llm_worker, llm_worker.testing
from llm_worker.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("args", [["demo"], ["--help"], ["run", "hi", "--model", "openai:m"]])
def test_without_rich_the_command_names_the_extra_to_install(args: list[str]) -> None:
    command = [sys.executable, "-c", WITHOUT_RICH, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "pip install 'llm-worker[cli]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_rich_is_the_cli_extra_not_a_dependency_of_the_library() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith(("rich", "pygments"))]
    assert [d for d in project["optional-dependencies"]["cli"] if d.startswith("rich")]
