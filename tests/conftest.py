import gc
import logging
import sys
from collections.abc import Iterator

import pytest

from llm_worker.providers._http_backend import TRANSPORT_ENV
from support.blob_stores import BUCKET, need
from support.object_store import MotoServer
from support.postgres import postgres_server  # noqa: F401  (one PostgreSQL a session, shared)


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


@pytest.fixture(autouse=True, scope="module")
def _leaks_reported_in_their_module() -> Iterator[None]:
    """Collect garbage as each module ends, so a leak fails the module that made it.

    A socket or transport a test leaves open is found only when the garbage collector frees
    it; pytest then reports it (an error, by `filterwarnings`) in whichever test is running.
    Collecting here blames this module's last test, the message naming the object
    (`PYTHONTRACEMALLOC=20` adds where it was made) instead of a test modules later.
    """
    yield
    # pytest keeps the last failure (an xfail too) in sys.last_value until the next test
    # runs: its frames would keep what the failing test left open out of this collection.
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        sys.__dict__.pop(name, None)
    gc.collect()
    # What outlives a module lives on (imports, caches, session fixtures): frozen, later
    # collections skip it (tests/tools, timeline and worker: 2.7 s CPU collecting, 0.12 s).
    gc.freeze()


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
