"""`llm-worker serve` (its bounds, a factory with a lifespan) and the app builders mounted in
Starlette and FastAPI as docs/web.md shows them."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from llm_worker.testing import ScriptedResponse
from llm_worker.ui import VercelAIAdapter, chat_routes, web_app

from .conftest import ROOT, scripted, serve
from .serving import free_port, llm_worker_serve
from .test_bounds import slow_client

pytestmark = pytest.mark.anyio

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hello"}]}
CHAT = {"id": "c1", "messages": [USER], "trigger": "submit-message"}

SHARED_APP = """
from contextlib import asynccontextmanager
from pathlib import Path

from llm_worker import Worker
from llm_worker.testing import ScriptedModelServer, ScriptedResponse


@asynccontextmanager
async def make_worker():
    Path("events.txt").write_text("started\\n")
    answers = [ScriptedResponse.text("Hello from the shared model.")] * 5
    async with ScriptedModelServer("anthropic", answers) as server, server.client() as client:
        yield lambda: Worker(client)  # one client for every request's Worker
    with Path("events.txt").open("a") as events:
        events.write("stopped\\n")
"""


async def request(port: int, path: str) -> tuple[anyio.abc.SocketStream, bytes]:
    """A GET on a new connection, kept open; the connection and the response's head."""
    stream = await anyio.connect_tcp("127.0.0.1", port)
    await stream.send(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += await stream.receive()
    return stream, head


async def closed(stream: anyio.abc.SocketStream) -> None:
    """Wait until the server closes `stream`."""
    try:
        while await stream.receive():
            pass
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        pass


async def test_serve_enters_a_factory_lifespan_and_keeps_its_bounds(tmp_path: Path) -> None:
    (tmp_path / "shared_app.py").write_text(SHARED_APP)
    flags = ["--body-timeout", "1", "--limit-concurrency", "2", "--timeout-keep-alive", "2"]
    with llm_worker_serve(tmp_path, "shared_app:make_worker", *flags) as (url, _):
        assert (tmp_path / "events.txt").read_text() == "started\n"
        port = int(url.rpartition(":")[2])
        async with httpx.AsyncClient(timeout=20) as http:
            with anyio.fail_after(20):
                answer = await http.post(url + "/api/chat", json=CHAT)
        assert answer.status_code == 200
        deltas = re.findall(r'"delta":"([^"]*)"', answer.text)
        assert "Hello from the shared model." in "".join(deltas)
        with anyio.fail_after(20):
            # --body-timeout: a body that does not arrive is refused and its connection closed.
            assert (await slow_client(port, True, "/api/chat")).startswith(b"HTTP/1.1 408 ")
            # A path that answers without reading the body closes the connection too.
            assert (await slow_client(port, True, "/elsewhere")).startswith(b"HTTP/1.1 404 ")
            # --limit-concurrency 2: two connections kept alive, the third's request gets 503.
            kept, head = await request(port, "/api/chat/c1/stream")
            answered = time.monotonic()
            assert head.startswith(b"HTTP/1.1 204 ")
            second, head = await request(port, "/api/chat/c1/stream")
            assert head.startswith(b"HTTP/1.1 204 ")
            over, refused = await request(port, "/api/chat/c1/stream")
            assert refused.startswith(b"HTTP/1.1 503 ")
            await over.aclose()
            await second.aclose()
            # --timeout-keep-alive 2: the idle connection is closed (uvicorn's default is 5 s).
            await closed(kept)
            assert time.monotonic() - answered < 4.5
            await kept.aclose()
            third, head = await request(port, "/api/chat/c1/stream")
            await third.aclose()
        assert head.startswith(b"HTTP/1.1 204 ")
    assert (tmp_path / "events.txt").read_text() == "started\nstopped\n"


def test_serve_stops_when_the_factory_lifespan_fails(tmp_path: Path) -> None:
    (tmp_path / "failing_app.py").write_text(
        "from contextlib import asynccontextmanager\n\n"
        "@asynccontextmanager\n"
        "async def make_worker():\n"
        "    raise RuntimeError('the database is down')\n"
        "    yield\n"
    )
    command = [sys.executable, "-m", "llm_worker.cli", "serve", "failing_app:make_worker"]
    done = subprocess.run(
        [*command, "--port", str(free_port())],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "the database is down" in done.stderr
    assert "Uvicorn running on" not in done.stderr


def test_the_serve_command_documents_its_bounds() -> None:
    from llm_worker.cli import _parser  # pyright: ignore[reportPrivateUsage]

    args = _parser().parse_args(["serve", "app:make_worker"])
    assert (args.body_timeout, args.limit_concurrency, args.timeout_keep_alive) == (30.0, 1000, 5)
    docs = (ROOT / "docs" / "web.md").read_text()
    for flag in ("--body-timeout", "--limit-concurrency", "--timeout-keep-alive"):
        assert flag in docs
    assert "llm-worker[cli,web]" in docs


def doc_snippets() -> dict[str, str]:
    """docs/web.md's Python blocks that build an app with `chat_routes`, by framework."""
    text = (ROOT / "docs" / "web.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    found = {"fastapi" if "FastAPI" in b else "starlette": b for b in blocks if "chat_routes(" in b}
    assert set(found) == {"starlette", "fastapi"}
    return found


@pytest.mark.parametrize("framework", ["starlette", "fastapi"])
async def test_the_docs_mount_the_adapter_in_starlette_and_fastapi(framework: str) -> None:
    source = doc_snippets()[framework]
    assert len(source.strip().splitlines()) <= 6  # five lines and a blank one
    async with scripted("anthropic", [ScriptedResponse.text("Mounted.")]) as (_, factory):
        namespace: dict[str, Any] = {"make_worker": factory}
        exec(compile(source, f"docs/web.md ({framework})", "exec"), namespace)
        async with serve(namespace["app"]) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                answer = await http.post(url + "/api/chat", json=CHAT)
                nothing = await http.get(url + "/api/chat/c1/stream")
    assert answer.status_code == 200
    assert '"type":"finish"' in answer.text
    assert nothing.status_code == 204  # the reconnect route reaches the adapter too


async def test_chat_routes_beside_static_files_take_the_post(tmp_path: Path) -> None:
    # A Mount("/api/chat") misses the POST to /api/chat itself: beside a Mount("/") of static
    # files, they answer it 405. The routes, and web_app, take it.
    (tmp_path / "index.html").write_text("<p>page</p>")
    async with scripted("anthropic", [ScriptedResponse.text("Routed.")] * 2) as (_, factory):
        adapter = VercelAIAdapter(factory)
        app = web_app(adapter, static=tmp_path)
        async with serve(app) as url, httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                answer = await http.post(url + "/api/chat", json=CHAT)
                page = await http.get(url + "/")
    assert answer.status_code == 200
    assert page.text == "<p>page</p>"
    assert [r.path for r in chat_routes(adapter, "/chat/")] == ["/chat/", "/chat/{chat_id}/stream"]


async def test_web_app_runs_its_lifespan() -> None:
    from contextlib import asynccontextmanager

    from starlette.testclient import TestClient

    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncGenerator[None]:
        events.append("started")
        yield
        events.append("stopped")

    app = web_app(VercelAIAdapter(lambda: None), lifespan=lifespan)  # type: ignore[arg-type, return-value]
    with TestClient(app) as client:
        assert client.get("/api/chat/c1/stream").status_code == 204
        assert events == ["started"]
    assert events == ["started", "stopped"]
