"""Plumbing shared by the examples: which model they talk to.

Without an API key each example runs **offline**: a `ScriptedModelServer` (from
`llm_worker.testing`) on 127.0.0.1 speaks a real provider wire format and plays the answers the
example scripts, and the Worker reaches it through the real provider client — so everything but
the model is the real code path. With an API key in the environment (`ANTHROPIC_API_KEY`,
`OPENAI_API_KEY`, `GEMINI_API_KEY`) or `LLM_WORKER_MODEL=provider:model`, the example talks to
the real model instead, and the script is ignored. `--offline` forces the scripted model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from llm_worker.providers import LLMClient, from_string, model_from_env
from llm_worker.testing import ScriptedModelServer, ScriptStep

OFFLINE = "--offline" in sys.argv


@asynccontextmanager
async def model(
    script: Sequence[ScriptStep], *, provider: str = "anthropic", name: str = "scripted-model"
) -> AsyncIterator[tuple[LLMClient, ScriptedModelServer | None]]:
    """A client of the real model (key set), else of a scripted one on 127.0.0.1.

    Yields the client and, offline, the server (its `requests` show what the model was sent).
    Offline, the scripted model answers as `name`.
    """
    target = None if OFFLINE else model_from_env(os.environ.get("LLM_WORKER_MODEL"))
    if target is not None:
        print(f"(live: {target})")
        async with from_string(target) as client:
            yield client, None
        return
    async with (
        ScriptedModelServer(provider, script, model=name) as server,
        server.client() as client,
    ):
        print(f"(offline: a scripted model behind the {provider} wire format on 127.0.0.1)")
        yield client, server
