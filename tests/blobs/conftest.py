"""The blob stores every protocol test runs against, and the S3 server they need."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_worker import BlobStore
from support.blob_stores import BUCKET, STORE_KINDS, make_store, need
from support.object_store import MotoServer


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """moto's S3 server on 127.0.0.1, once per session, with the tests' bucket."""
    need("moto")
    server = MotoServer()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture(params=STORE_KINDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """Each blob store in turn: memory, folder, obstore's local files, S3 (moto)."""
    return make_store(request.param, tmp_path, request)
