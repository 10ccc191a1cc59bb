import logging
import sys
from collections.abc import Iterator

import pytest

from llm_worker.providers._http_backend import TRANSPORT_ENV
from support.blob_stores import BUCKET, need
from support.object_store import MotoServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _dbos_console_on_the_real_stderr() -> Iterator[None]:
    """DBOS's console log handler keeps the stderr it was made with: a test's capture stream.

    Made during a test that captures output (capsys), it would later write to that closed
    stream and fail whichever durable test logs next; point it back at the real stderr.
    """
    yield
    for handler in logging.getLogger("dbos").handlers:
        if (
            isinstance(handler, logging.StreamHandler)
            and handler.name == "__dbos_console_log_handler__"
        ):
            handler.stream = sys.__stderr__  # not setStream: it flushes the closed one


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
