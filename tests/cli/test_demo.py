"""`llm-worker demo`: offline, over each wire format, in-process, as a child and on a pty."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_worker.cli import main

PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
README = "# Sample project\n\nA folder the demo looks at.\n"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_env: Any) -> Path:
    """A folder with a README and enough files for a listing that is stored as a blob."""
    (tmp_path / "README.md").write_text(README)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        (src / f"module_{i:02}.py").write_text("x = 1\n" * i)
    (tmp_path / ".git").mkdir()  # skipped by the listing
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_in_order(text: str, *pieces: str) -> None:
    at = 0
    for piece in pieces:
        found = text.find(piece, at)
        assert found >= 0, f"{piece!r} missing after position {at} in:\n{text}"
        at = found + len(piece)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_demo_shows_every_step(
    provider: str, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--yes", "--offline", "--provider", provider]) == 0
    out = capsys.readouterr().out
    assert_in_order(
        out,
        f"offline: a scripted model behind a real {provider} wire format",
        "user: Give me an overview of the current folder",
        "thinking: The user wants an overview.",
        "Let me look around this folder.",
        # the two calls of one answer, arguments as streamed
        '→ list_files {"path":"."}',
        '→ read_file {"path":"README.md","max_bytes":600}',
        # the approval hook, once per call
        "✓ list_files(path='.') allowed (--yes)",
        "✓ read_file(path='README.md', max_bytes=600) allowed (--yes)",
        # the large listing: stored, the model sees the summary
        "← list_files (large: stored as a blob; the model sees this summary)",
        "[blob:",
        "] text | 42 lines",
        "── head ──",
        "README.md",
        "── tail ──",
        "src/module_39.py",
        # the small README: inline
        "← read_file",
        "# Sample project",
        "The listing was large, so it was stored; let me inspect its first lines.",
        '→ inspect {"blob_id":"',
        "allowed: built-in and read-only",
        "← inspect",
        "── lines 1-10 ──",
        "Here is the overview. I listed the folder and read its README in parallel. "
        "The listing had 42 entries",
        "usage: 3 requests · input 3546 tokens (2528 cached) · output 201 tokens",
        f"3 HTTP requests reached the embedded {provider} server",
    )
    assert ".git" not in out
    assert "error" not in out


def test_demo_without_a_terminal_allows_with_a_note(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    assert main(["demo", "--offline", "--provider", "openai_chat"]) == 0
    out = capsys.readouterr().out
    assert_in_order(
        out,
        "no terminal to ask: tool calls are allowed automatically",
        "✓ list_files(path='.') allowed",
        "✓ read_file(path='README.md', max_bytes=600) allowed",
        "Here is the overview.",
    )
    assert out.count("no terminal to ask") == 1


def test_demo_as_a_child_process_without_stdin(folder: Path, offline_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "llm_worker.cli", "demo", "--yes"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=offline_env,
        timeout=60,
        check=False,
    )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "offline: a scripted model behind a real anthropic wire format" in out
    assert "Here is the overview." in out
    assert "usage: 3 requests" in out
    assert done.stderr == b""


def test_demo_on_a_terminal_asks_before_each_call(
    folder: Path, pty_child: Any, offline_env: dict[str, str]
) -> None:
    child = pty_child(
        ["-m", "llm_worker.cli", "demo", "--offline", "--provider", "gemini"],
        offline_env,
        str(folder),
    )
    child.expect("allow list_files(path='.')? [Y/n]")
    child.send("\r")  # the default is yes
    child.expect("allow read_file(path='README.md', max_bytes=600)? [Y/n]")
    child.send("n\r")
    child.expect("✗ denied")
    child.expect("← list_files (large: stored as a blob")
    child.expect("← read_file failed")
    child.expect("the user denied this call")
    child.expect("Here is the overview.")
    assert child.wait() == 0
    # Thinking is dimmed (SGR 2) and italic (3); the answer text is not.
    assert b"\x1b[2;3mThe user" in child.raw
    assert b"\x1b[2;3mLet me" not in child.raw
