from collections.abc import Iterator

import pytest

from llm_worker.providers._http_backend import TRANSPORT_ENV
from support.blob_stores import BUCKET, need
from support.object_store import MotoServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.fixture(params=["httpx", "aiohttp"])
def http_transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test using it runs once per transport: the clients it builds default to it."""
    name: str = request.param
    monkeypatch.setenv(TRANSPORT_ENV, name)
    return name
