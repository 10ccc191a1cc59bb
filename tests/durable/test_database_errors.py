"""A database a DurableWorker cannot use is a clear `ConfigurationError`, not a driver error."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from llm_worker import Worker
from llm_worker.durable import DurableWorker
from llm_worker.errors import ConfigurationError
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "url",
    [
        "mysql://root:secret@127.0.0.1/runs",
        "mariadb+pymysql://127.0.0.1/runs",
        "runs.sqlite",
        "sqlite://relative.sqlite",
        "postgresql://",
        "",
    ],
)
def test_a_url_of_another_scheme_is_refused_when_made(url: str) -> None:
    with pytest.raises(ConfigurationError, match="sqlite:///path") as caught:
        DurableWorker(Worker(ScriptedClient([])), name="t", database_url=url)
    assert "secret" not in str(caught.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


def _unusable(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "garbage.sqlite").write_text("not a database\n" * 100)
    return {
        "a folder": f"sqlite:///{tmp_path}",
        "not a database": f"sqlite:///{tmp_path / 'garbage.sqlite'}",
        "a missing folder": f"sqlite:///{tmp_path / 'missing' / 'runs.sqlite'}",
        "nothing listening": f"postgresql://u:secret@127.0.0.1:{_closed_port()}/runs",
    }


@pytest.mark.parametrize("serve", [True, False])
async def test_an_unusable_database_is_a_configuration_error_naming_it(
    tmp_path: Path, serve: bool
) -> None:
    for what, url in _unusable(tmp_path).items():
        durable = DurableWorker(Worker(ScriptedClient([])), name="t", database_url=url, serve=serve)
        with anyio.fail_after(30), pytest.raises(ConfigurationError) as caught:
            async with durable:
                pass
        message = str(caught.value)
        assert "cannot be used" in message, what
        assert "secret" not in message, what
    # The process is left clean: a usable database works after them.
    good = f"sqlite:///{tmp_path / 'good.sqlite'}"
    worker = Worker(ScriptedClient([ScriptedResponse.text("fine")]))
    async with DurableWorker(worker, name="t", database_url=good) as durable:
        with anyio.fail_after(30):
            assert (await durable.run("hi")).text == "fine"


async def test_a_client_needs_a_database_a_serving_process_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'never.sqlite'}"
    durable = DurableWorker(Worker(ScriptedClient([])), name="t", database_url=url, serve=False)
    with anyio.fail_after(30), pytest.raises(ConfigurationError, match="cannot be used"):
        async with durable:
            pass
