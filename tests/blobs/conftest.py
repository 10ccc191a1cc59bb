"""The blob stores every protocol test runs against, and the S3 server they need."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_worker import BlobStore, FsBlobStore, MemoryBlobStore
from support.object_store import MotoServer, s3_options

BUCKET = "llm-worker-blobs"
STORE_KINDS = ["memory", "fs", "object-local", "object-s3"]


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the dev group installs it: uv sync)")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """moto's S3 server on 127.0.0.1, once per session, with the tests' bucket."""
    _need("moto")
    server = MotoServer()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop()


_counter = iter(range(1 << 30))


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> BlobStore:
    """A fresh store of `kind`; the object stores index every 7 lines or entries."""
    if kind == "memory":
        return MemoryBlobStore()
    if kind == "fs":
        return FsBlobStore(tmp_path / "blobs")
    _need("obstore")
    from llm_worker.blobs import ObjectBlobStore

    if kind == "object-local":
        folder = tmp_path / "objects"
        folder.mkdir()
        return ObjectBlobStore.from_url(folder.as_uri(), index_every=7)
    server: MotoServer = request.getfixturevalue("moto_server")
    prefix = f"s3://{BUCKET}/t{next(_counter)}"
    return ObjectBlobStore.from_url(prefix, index_every=7, **s3_options(server.endpoint))


@pytest.fixture(params=STORE_KINDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """Each blob store in turn: memory, folder, obstore's local files, S3 (moto)."""
    return make_store(request.param, tmp_path, request)
