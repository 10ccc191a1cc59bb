"""The web adapter tests' harness: the official npm consumers, a real HTTP server, and a
scripted model behind each wire format with the tools the tests call."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import TextPart, ThinkingPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter, messages_from_agui, messages_from_ui
from support.once import installing

from .agui_events import check_event_fields
from .vercel_chunks import check_chunk_fields

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".cache" / "node"
SCRIPTS = Path(__file__).parent / "node"
# The consumers the tests run against, pinned: `ai` 6.x (protocol v1; 7.x needs node >= 22).
PACKAGES = {"ai": "6.0.326", "@ag-ui/core": "1.0.0", "@ag-ui/client": "1.0.0"}


def _installed() -> bool:
    for name, version in PACKAGES.items():
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        if not manifest.exists() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The npm consumers, installed once into .cache/node (skips where npm is absent)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the consumer tests (not on PATH)")
    with installing(NODE_DIR):
        if not _installed():
            _install()
    return NODE_DIR / "node_modules"


def _install() -> None:
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    (NODE_DIR / "package.json").write_text('{"name": "llm-worker-consumers", "private": true}')
    specs = [f"{n}@{v}" for n, v in PACKAGES.items()]
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", *specs],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"npm install of {specs} failed: {done.stderr[-500:]}")


async def run_node(node_modules: Path, script: str, *args: str) -> Any:
    """Run a consumer script (with the cached packages) and return the JSON it prints."""
    env = {"NODE_PATH": str(node_modules), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    # An .mjs resolves packages from its own folder up: run a copy inside the cache.
    target = node_modules.parent / script
    target.write_text((SCRIPTS / script).read_text())
    with anyio.fail_after(60):
        done = await anyio.run_process(["node", str(target), *args], env=env, check=False)
    if done.returncode != 0:
        raise AssertionError(f"node {script} failed: {done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout)


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 (a free port); yields its base URL."""
    import uvicorn

    # The socket listens before uvicorn serves: a client connecting early waits in the backlog.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


PROVIDERS = ["anthropic", "openai_chat", "openai_responses", "gemini"]
SIGNED = ["anthropic", "openai_responses", "gemini"]  # carry a thinking signature back


@tool(effect="read_only")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip (a person approves each call)."""
    return f"booked {city}"


def thinking_and_tools() -> list[ScriptedResponse]:
    """A signed thought, a text and two parallel weather calls; then the answer."""
    return [
        ScriptedResponse(
            [
                ThinkingPart("I should check both cities.", signature="sig-turn-1"),
                TextPart("Checking the weather."),
                ToolUsePart("", "weather", {"city": "Kyoto"}),
                ToolUsePart("", "weather", {"city": "Oslo"}),
            ]
        ),
        ScriptedResponse.text("Sunny in Kyoto and in Oslo."),
    ]


def booking(answer: str) -> list[ScriptedResponse]:
    """A weather call beside a `book` call that waits for approval; then `answer`."""
    return [
        ScriptedResponse(
            [
                TextPart("Let me check and book."),
                ToolUsePart("", "weather", {"city": "Kyoto"}),
                ToolUsePart("", "book", {"city": "Kyoto"}),
            ]
        ),
        ScriptedResponse.text(answer),
    ]


class Factory:
    """Makes one Worker per request against the scripted server; keeps them to inspect."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.workers: list[Worker] = []

    def __call__(self) -> Worker:
        worker = Worker(self.client, tools=[weather, book])
        self.workers.append(worker)
        return worker


@asynccontextmanager
async def scripted(
    provider: str, script: list[ScriptedResponse]
) -> AsyncIterator[tuple[ScriptedModelServer[Any], Factory]]:
    """A scripted model behind `provider`'s wire format, and a factory of Workers using it."""
    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        yield server, Factory(client)


class Consumer:
    """One protocol's official client, as a node script, and how its output is read."""

    def __init__(self, adapter: Any, script: str, items: str, from_wire: Any, check: Any) -> None:
        self.adapter, self.script, self.items = adapter, script, items
        self.from_wire, self.check = from_wire, check

    async def consume(
        self, node_modules: Path, url: str, plan: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Run the client through `plan`; its output, with no error and every item valid."""
        out: dict[str, Any] = await run_node(node_modules, self.script, url, json.dumps(plan))
        assert out["errors"] == []
        for item in out[self.items]:
            self.check(item)
        return out

    def history(self, out: dict[str, Any]) -> Any:
        """The client's final messages as llm-worker `Message`s."""
        return self.from_wire(out["messages"])


CONSUMERS = {
    "vercel": Consumer(
        VercelAIAdapter, "vercel_consumer.mjs", "chunks", messages_from_ui, check_chunk_fields
    ),
    "ag-ui": Consumer(
        AGUIAdapter, "agui_consumer.mjs", "events", messages_from_agui, check_event_fields
    ),
}
VERCEL, AGUI = CONSUMERS["vercel"], CONSUMERS["ag-ui"]


@asynccontextmanager
async def consumed(
    consumer: Consumer,
    node_modules: Path,
    provider: str,
    script: list[ScriptedResponse],
    plan: list[dict[str, Any]],
    **options: Any,
) -> AsyncIterator[tuple[dict[str, Any], ScriptedModelServer[Any], Factory, Any]]:
    """`consumer` through `plan` against its adapter over a scripted `provider`.

    Yields the client's output, the model server, the Worker factory and the adapter.
    """
    async with scripted(provider, script) as (server, factory):
        adapter = consumer.adapter(factory, **options)
        async with serve(adapter) as url:
            out = await consumer.consume(node_modules, url, plan)
        yield out, server, factory, adapter


async def first_turn(
    consumer: Consumer, node_modules: Path, provider: str
) -> tuple[dict[str, Any], list[Any]]:
    """The client through one turn of thinking and parallel calls.

    Returns its output and the Worker's history, which the client's messages are checked to
    equal.
    """
    plan = [{"send": "Weather in Kyoto and Oslo?"}]
    async with consumed(consumer, node_modules, provider, thinking_and_tools(), plan) as run:
        out, _, factory, _ = run
    history = factory.workers[0].history
    assert consumer.history(out) == history
    return out, history
