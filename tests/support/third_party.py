"""Streams of third-party servers (Ollama, Mistral, proxies, …) in tests/fixtures/third_party.

Unlike tests/fixtures/recorded, these were not recorded: each is written to the shape its
server's own SDK types and documentation give (the file's `source` names them; the folder's
README lists them). They hold the shapes the official recordings lack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_worker.testing import Chunking, WireResponse
from support.recorded import load_in, names_in

__all__ = ("fixture_names", "fixtures_dir", "load", "response")

_FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "third_party"


def fixtures_dir() -> Path:
    """The folder of third-party streams."""
    return _FOLDER


def fixture_names(api: str) -> list[str]:
    """Names (without .json) of one API's third-party streams, sorted."""
    return names_in(_FOLDER, api)


def load(api: str, name: str) -> dict[str, Any]:
    """One stream file, parsed."""
    return load_in(_FOLDER, api, name)


def response(api: str, name: str, chunking: Chunking | None = None) -> WireResponse:
    """The stream as a server sends it."""
    answer = load(api, name)["response"]
    return WireResponse(
        answer["body"],
        status=answer["status"],
        content_type=answer["content_type"],
        chunking=chunking or Chunking.whole(),
    )
