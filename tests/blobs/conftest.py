"""The blob stores every protocol test runs against (the S3 server: tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_worker import BlobStore
from support.blob_stores import STORE_KINDS, make_store


@pytest.fixture(params=STORE_KINDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """Each blob store in turn: memory, folder, obstore's local files, S3 (moto)."""
    return make_store(request.param, tmp_path, request)
