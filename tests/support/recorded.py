"""Access to the recorded provider streams in tests/fixtures/recorded (read in place).

The recordings live in the repository, so a fresh clone runs every test that reads them; their
sources (repository, path, commit, license) are listed in tests/fixtures/recorded/README.md and
named inside each file.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

_FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"


def fixtures_dir() -> Path:
    """The folder of recorded streams."""
    return _FOLDER


def names_in(folder: Path, api: str) -> list[str]:
    """Names (without .json) of one API's files in a fixture folder, sorted."""
    names = sorted(p.stem for p in (folder / api).glob("*.json"))
    if not names:  # a broken checkout, never a reason to pass quietly
        raise FileNotFoundError(f"no files of {api} under {folder}")
    return names


@cache
def load_in(folder: Path, api: str, name: str) -> dict[str, Any]:
    """One file of a fixture folder, parsed."""
    return orjson.loads((folder / api / f"{name}.json").read_bytes())


def fixture_names(api: str) -> list[str]:
    """Names (without .json) of the recordings of one API, sorted."""
    return names_in(_FOLDER, api)


def load(api: str, name: str) -> dict[str, Any]:
    """One recording, parsed."""
    return load_in(_FOLDER, api, name)


def params(api: str) -> list[Any]:
    """pytest parameters for every recording of an API."""
    return [pytest.param(n, id=n) for n in fixture_names(api)]
