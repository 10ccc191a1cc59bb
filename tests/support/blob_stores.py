"""Every blob store the protocol tests run against, made fresh for each test."""

from __future__ import annotations

import importlib.util
import tracemalloc
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from llm_worker import BlobStore, FsBlobStore, MemoryBlobStore
from support.object_store import MotoServer, s3_options

BUCKET = "llm-worker-blobs"
STORE_KINDS = ["memory", "fs", "object-local", "object-s3"]


def need(module: str) -> None:
    """Skip, naming `module`, when it is not installed."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the dev group installs it: uv sync)")


_counter = iter(range(1 << 30))
_T = TypeVar("_T")


async def traced_peak(action: Awaitable[_T]) -> tuple[_T, int]:
    """What `action` returns, and the most Python memory it held at once (bytes)."""
    tracemalloc.start()
    try:
        out = await action
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> BlobStore:
    """A fresh store of `kind`; the object stores index every 7 lines or entries."""
    if kind == "memory":
        return MemoryBlobStore()
    if kind == "fs":
        return FsBlobStore(tmp_path / "blobs")
    need("obstore")
    from llm_worker.blobs import ObjectBlobStore

    if kind == "object-local":
        folder = tmp_path / "objects"
        folder.mkdir()
        return ObjectBlobStore.from_url(folder.as_uri(), index_every=7)
    server: MotoServer = request.getfixturevalue("moto_server")
    prefix = f"s3://{BUCKET}/t{next(_counter)}"
    return ObjectBlobStore.from_url(prefix, index_every=7, **s3_options(server.endpoint))
