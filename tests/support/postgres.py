"""One throwaway PostgreSQL server per test session (`postgres_server`), and fresh databases.

The server is Debian's `postgresql` package (`.ci/run` installs it when missing): `initdb` in
a temporary folder (as the `postgres` user when the tests run as root, since the server
refuses root), listening on 127.0.0.1 on a free port, stopped when the session ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_MISSING = "PostgreSQL is not installed (Debian package `postgresql`: apt-get install postgresql)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    if shutil.which("runuser") is None:
        pytest.skip("running as root without `runuser`: PostgreSQL refuses to run as root")
    return ["runuser", "-u", "postgres", "--", *command]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The base URL (no database) of a PostgreSQL server running for this session."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.skip(PG_MISSING)
    bin_dir = Path(found[-1]).parent
    # Not under pytest's temporary root: as root that is private to root, and the server
    # runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="llm-worker-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, user="postgres")
    port = _free_port()
    subprocess.run(
        _as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=300"
    ctl = str(bin_dir / "pg_ctl")
    subprocess.run(
        _as_postgres(
            [
                ctl,
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(root / "log"),
                "-w",
                "-t",
                "60",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=90,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_postgres([ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop"]),
            capture_output=True,
            timeout=90,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(base: str) -> str:
    """A new, empty database on the server at `base`; its URL."""
    import psycopg
    from psycopg import sql

    name = f"llmw_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{base}/{name}"
