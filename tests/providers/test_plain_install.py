"""A plain install (no extras, no dev tools) sends through aiohttp on asyncio, httpx on trio.

The rest of the suite runs in the project's environment, where every extra and the dev group
are installed: a default that worked only because of them (aiohttp moved back to an extra, a
dev-only module imported by the providers) would pass there. Here the project is built as a
wheel and installed with its locked core dependencies only into a fresh virtual environment
(`uv sync --no-dev --no-editable`, offline, from uv's cache, as `uv run pytest` left it), plus
trio, which a trio program brings itself; one script then runs in that environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.markers import Marker

from llm_worker.providers._http_backend import TRANSPORT_ENV

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, importlib.metadata, json, sys, threading, warnings
warnings.simplefilter("error")
import llm_worker
light = [m for m in ("httpx", "aiohttp", "pydantic") if m in sys.modules]
import trio
from llm_worker import Message, Request
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

ready, box = threading.Event(), []

async def serve():
    script = [ScriptedResponse.text(f"answer {n}") for n in range(3)]
    async with ScriptedModelServer("openai_chat", script) as server:
        box.append(server)
        ready.set()
        await asyncio.Event().wait()

threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
assert ready.wait(30)
server = box[0]
client = server.client()  # outside any event loop, no transport= and no lent client
built = [m for m in ("httpx", "aiohttp") if m in sys.modules]

async def one():
    text = ""
    async for event in client.stream(Request([Message.user("hi")])):
        text += getattr(getattr(event, "delta", None), "text", "")
    imported = [m for m in ("httpx", "aiohttp") if m in sys.modules]
    return {"inside": client.transport.transport, "imported": imported, "text": text}

async def close():
    await client.aclose()

runs = [asyncio.run(one()), trio.run(one), asyncio.run(one())]
asyncio.run(close())
print(json.dumps({
    "file": llm_worker.__file__,
    "installed": sorted(d.metadata["Name"] for d in importlib.metadata.distributions()),
    "light": light,
    "built": built,
    "runs": runs,
    "agents": [request.headers["user-agent"] for request in server.requests],
}))
"""


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _locked(roots: Iterable[str]) -> list[str]:
    """`name==version` for `roots` and everything they depend on, as uv.lock pins them."""
    packages = {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    pins: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in pins:
            pins[name] = packages[name]["version"]
            todo.extend(
                d["name"]
                for d in packages[name].get("dependencies", [])
                if Marker(d.get("marker", "python_version >= '3'")).evaluate()
            )
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=150, check=False, env=env, cwd=ROOT
    )
    assert done.returncode == 0, f"{command[:3]} failed:\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def plain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a fresh environment holding the wheel and its core dependencies."""
    uv = shutil.which("uv")
    assert uv is not None, "uv runs the suite (uv run pytest) and builds the plain install"
    venv = tmp_path_factory.mktemp("plain") / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", TRANSPORT_ENV)}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    sync = [uv, "sync", "--frozen", "--offline", "--no-dev", "--no-editable", "--quiet"]
    sync += ["--reinstall-package", "llm-worker"]  # rebuilt from the checkout, not uv's cache
    _run(sync, env)
    python = venv / "bin" / "python"
    trio = _locked(["trio"])  # with its dependencies, as uv.lock pins them
    _run([uv, "pip", "install", "--offline", "--quiet", "--python", str(python), *trio], env)
    return python


@pytest.mark.timeout(300)
def test_a_plain_install_sends_through_aiohttp_on_asyncio_and_httpx_on_trio(
    plain_python: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", TRANSPORT_ENV)}
    env.pop("PYTHONPATH", None)  # the checkout's src and tests stay out of the plain install
    done = subprocess.run(
        [str(plain_python), "-X", "dev", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=tmp_path,  # not the checkout: `import llm_worker` finds the installed wheel
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "nclosed" not in done.stderr, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    # The installed wheel, with the core dependencies only: no extra's package is there.
    assert Path(seen["file"]).is_relative_to(plain_python.parent.parent)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for group in project["optional-dependencies"].values() for r in group}
    installed = {_name(name) for name in seen["installed"]}
    assert extras - core, "the extras name packages beyond the core"
    assert not (extras - core) & installed
    assert core <= installed

    assert seen["light"] == []  # `import llm_worker` loads neither HTTP library nor pydantic
    assert seen["built"] == []  # nor does building a client
    # The library that sent each request, by its own User-Agent.
    libraries = [re.sub(r"^python-(httpx)/.*|^.*(aiohttp)/.*", r"\1\2", a) for a in seen["agents"]]
    assert libraries == ["aiohttp", "httpx", "aiohttp"]
    assert [run["inside"] for run in seen["runs"]] == ["aiohttp", "httpx", "aiohttp"]
    assert [run["text"] for run in seen["runs"]] == ["answer 0", "answer 1", "answer 2"]
    assert seen["runs"][0]["imported"] == ["aiohttp"]  # asyncio's request never loads httpx
