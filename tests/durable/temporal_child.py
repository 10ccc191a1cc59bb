"""A process serving runs on Temporal, for the crash and fleet tests (not a test itself).

Usage: `python temporal_child.py '<json>'` with `target` and `namespace` (the dev server),
`model_url` (the scripted model server), `name`, `log` (the file the side-effecting tool
appends to), `executor` (a label this process prints), `effect` and `hang` (as child.py's),
`runs` (ids to start and wait for; each run's input is its id), `wait` (ids to wait for
without starting them), `paused` (run id: print once it is paused). It serves until killed
and prints one JSON line per event: `{"ready": true}`, `{"tool": ...}` when the tool wrote,
`{"paused": id}`, `{"run": id, "result": ...}` per finished run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from child import say, tools
from temporalio.client import Client

from llm_worker import Worker
from llm_worker.durable._records import run_record
from llm_worker.durable.temporal import TemporalWorker
from llm_worker.providers import AnthropicClient


async def serve(config: dict[str, Any]) -> None:
    temporal = await Client.connect(config["target"], namespace=config["namespace"])
    client = AnthropicClient(model="scripted-model", base_url=config["model_url"], api_key="k")
    async with client:
        worker = Worker(client, tools=tools(config))
        durable = TemporalWorker(
            worker, name=config["name"], client=temporal, heartbeat=2.0, poll_interval=0.05
        )
        async with durable, anyio.create_task_group() as tg:
            say({"ready": True, "executor": config.get("executor")})
            if "paused" in config:
                await durable.start(config["paused"], run_id=config["paused"])
                assert await durable.paused(config["paused"]) is not None
                say({"paused": config["paused"]})
            for run_id in config.get("runs", []):
                tg.start_soon(_run, durable, run_id, True)
            for run_id in config.get("wait", []):
                tg.start_soon(_run, durable, run_id, False)
            await anyio.sleep_forever()


async def _run(durable: TemporalWorker[Any], run_id: str, start: bool) -> None:
    if start:
        await durable.start(run_id, run_id=run_id)
    result = await durable.result(run_id)
    say({"run": run_id, "result": run_record(result)})


if __name__ == "__main__":
    anyio.run(serve, json.loads(sys.argv[1]))
