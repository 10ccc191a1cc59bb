"""Access to the recorded provider streams in ../shared/fixtures/recorded (read in place).

The folder can be moved with the LLM_WORKER_FIXTURES environment variable. Where it is absent,
tests that need it skip with a reason that says so; CI always has it.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

_DEFAULT = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "recorded"


def fixtures_dir() -> Path:
    """The folder of recorded streams."""
    return Path(os.environ.get("LLM_WORKER_FIXTURES", _DEFAULT))


def have_fixtures() -> bool:
    """Whether the recorded streams are present."""
    return fixtures_dir().is_dir()


requires_fixtures = pytest.mark.skipif(
    not have_fixtures(),
    reason=f"recorded fixtures not found at {fixtures_dir()} (set LLM_WORKER_FIXTURES)",
)


def fixture_names(api: str) -> list[str]:
    """Names (without .json) of the recordings of one API, sorted; empty when absent."""
    folder = fixtures_dir() / api
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json"))


@cache
def load(api: str, name: str) -> dict[str, Any]:
    """One recording, parsed."""
    return orjson.loads((fixtures_dir() / api / f"{name}.json").read_bytes())


def params(api: str) -> list[Any]:
    """pytest parameters for every recording of an API (one skipped param when absent)."""
    names = fixture_names(api)
    if not names:
        return [pytest.param(None, marks=requires_fixtures, id="no-fixtures")]
    return [pytest.param(n, id=n) for n in names]
