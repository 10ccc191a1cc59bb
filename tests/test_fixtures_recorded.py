"""The recorded streams live in the repository, each naming its source, and a fresh clone with
nothing beside it collects the whole suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.recorded import fixture_names, fixtures_dir, load

_ROOT = Path(__file__).resolve().parents[1]
_APIS = ("openai_chat", "openai_responses", "anthropic_messages", "gemini")


@pytest.mark.parametrize("api", _APIS)
def test_every_recording_names_its_source(api: str) -> None:
    assert fixtures_dir().is_relative_to(_ROOT / "tests")
    for name in fixture_names(api):
        source = load(api, name)["source"]
        assert source["repo"].count("/") == 1, name
        assert source["path"] and source["license"] in {"MIT", "Apache-2.0"}, name
        assert len(source["commit"]) == 40, name


@pytest.mark.timeout(240)
def test_a_fresh_clone_collects_every_test(tmp_path: Path) -> None:
    """Collection in a copy of the tracked files, with no ../shared beside it, finds no error."""
    if shutil.which("git") is None or not (_ROOT / ".git").exists():
        pytest.skip("git (or a git checkout) is needed to list the tracked files")
    tracked = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=_ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        )
        .stdout.decode()
        .split("\0")
    )
    clone = tmp_path / "alone" / "clone"
    for rel in filter(None, tracked):
        if (_ROOT / rel).is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(_ROOT / rel, clone / rel)
    assert not (clone.parent / "shared").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(clone / "src")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
        ],
        check=False,
        cwd=clone,
        capture_output=True,
        text=True,
        env=env,
        timeout=200,
    )
    tail = done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " error" not in done.stdout.splitlines()[-1], tail
    assert "skipped" not in done.stdout.splitlines()[-1], tail
