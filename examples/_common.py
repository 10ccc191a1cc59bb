"""Plumbing shared by the examples: which model they talk to.

Without an API key each example runs **offline**: a `ScriptedModelServer` (from
`llm_worker.testing`) on 127.0.0.1 speaks a real provider wire format and plays the answers the
example scripts, and the Worker reaches it through the real provider client — so everything but
the model is the real code path. With an API key in the environment (`ANTHROPIC_API_KEY`,
`OPENAI_API_KEY`, `GEMINI_API_KEY`) or `LLM_WORKER_MODEL=provider:model`, the example talks to
the real model instead, and the script is ignored. `--offline` forces the scripted model.

`--cassette PATH` keeps the model's answers in a cassette (`llm_worker.testing.Cassette`):
a run with a key records the real model into PATH (adding what is new); a run without one
replays PATH when it exists — the real model's answers, byte for byte, with no key and no
network — and records the scripted model into it otherwise. An example that talks to the
model more than once uses PATH, then PATH-2, … (`weather.jsonl`, `weather-2.jsonl`).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from llm_worker.providers import LLMClient, from_string, model_from_env
from llm_worker.testing import Cassette, ScriptedModelServer, ScriptStep
from llm_worker.testing._cassette_file import loads

OFFLINE = "--offline" in sys.argv
CASSETTE = sys.argv[sys.argv.index("--cassette") + 1] if "--cassette" in sys.argv else None
# The model-string prefix of each wire format a cassette records.
_PREFIXES = {
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "openai_responses": "openai-responses",
    "gemini": "gemini",
}
_CALLS = itertools.count(1)


@asynccontextmanager
async def model(
    script: Sequence[ScriptStep], *, provider: str = "anthropic", name: str = "scripted-model"
) -> AsyncIterator[tuple[LLMClient, ScriptedModelServer | None]]:
    """A client of the real model (key set), else of a scripted one on 127.0.0.1.

    Yields the client and, offline, the server (its `requests` show what the model was sent).
    Offline, the scripted model answers as `name`.
    """
    target = None if OFFLINE else model_from_env(os.environ.get("LLM_WORKER_MODEL"))
    cassette = _cassette()
    if target is None and cassette is not None and cassette.path.exists():
        async with _replayed(cassette) as client:
            yield client, None
        return
    if target is not None:
        print(f"(live: {target})")
        async with from_string(target) as client, _kept(client, cassette, "auto"):
            yield client, None
        return
    async with (
        ScriptedModelServer(provider, script, model=name) as server,
        server.client() as client,
        _kept(client, cassette, "record"),
    ):
        print(f"(offline: a scripted model behind the {provider} wire format on 127.0.0.1)")
        yield client, server


def _cassette() -> Cassette | None:
    """This call's cassette under `--cassette PATH`: PATH, then PATH-2, PATH-3, …"""
    if CASSETTE is None:
        return None
    call = next(_CALLS)
    path = Path(CASSETTE)
    if call > 1:
        path = path.with_name(f"{path.stem}-{call}{path.suffix}")
    return Cassette(path)


@asynccontextmanager
async def _replayed(cassette: Cassette) -> AsyncIterator[LLMClient]:
    """The recorded model, replayed: its provider and model read from the cassette."""
    first = loads(cassette.path.read_text(encoding="utf-8"), name=str(cassette.path))[0]
    print(f"(replay: {first.provider} {first.model} from {cassette.path})")
    async with cassette.client(f"{_PREFIXES[first.provider]}:{first.model}") as client:
        yield client


@asynccontextmanager
async def _kept(client: LLMClient, cassette: Cassette | None, mode: str) -> AsyncIterator[None]:
    """Record the client's exchanges into the cassette, if there is one."""
    if cassette is None:
        yield
        return
    cassette.mode = "auto" if mode == "auto" else "record"
    async with cassette.wrap(client):
        yield
    print(f"(recorded into {cassette.path})")
