"""Streams of third-party servers (Ollama, Mistral, proxies, …) in tests/fixtures/third_party.

Unlike tests/fixtures/recorded, these were not recorded: each is written to the shape its
server's own SDK types and documentation give (the file's `source` names them; the folder's
README lists them). They hold the shapes the official recordings lack.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import orjson

from llm_worker.testing import Chunking, WireResponse

__all__ = ("fixture_names", "fixtures_dir", "load", "response")

_FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "third_party"


def fixtures_dir() -> Path:
    """The folder of third-party streams."""
    return _FOLDER


def fixture_names(api: str) -> list[str]:
    """Names (without .json) of one API's third-party streams, sorted."""
    names = sorted(p.stem for p in (_FOLDER / api).glob("*.json"))
    if not names:  # a broken checkout, never a reason to pass quietly
        raise FileNotFoundError(f"no third-party streams of {api} under {_FOLDER}")
    return names


@cache
def load(api: str, name: str) -> dict[str, Any]:
    """One stream file, parsed."""
    return orjson.loads((_FOLDER / api / f"{name}.json").read_bytes())


def response(api: str, name: str, chunking: Chunking | None = None) -> WireResponse:
    """The stream as a server sends it."""
    answer = load(api, name)["response"]
    return WireResponse(
        answer["body"],
        status=answer["status"],
        content_type=answer["content_type"],
        chunking=chunking or Chunking.whole(),
    )
