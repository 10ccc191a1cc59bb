"""A process serving durable runs, for the crash, fleet and approval tests (not a test itself).

Usage: `python child.py '<json>'` with `url` (the system database), `model_url` (the
scripted model server), `name`, `log` (the file the side-effecting tool appends to),
`executor` (this process's executor id), `effect` (the appending tool's effect), `hang` (the
appending tool blocks after writing, until the process is killed; `"first"`: only
when the log was empty), `runs` (ids to start and
wait for; each run's input is its id), `wait` (ids to wait for without starting them),
`decide` (run id: wait for its pause and approve every pending call), `cancel` (run id: wait
for its pause and cancel the run), `serve` (serve runs until killed), `client` (act on runs
without serving: `DurableWorker(serve=False)`), `lease` (the lease's seconds, default 1),
`race` (run ids: for each id read from stdin, wait a seeded random delay, then decide
`allow` on its `pay` call; prints `{"raced": id, "won": bool}`), `seed`, `allow`,
`leave_after` (run ids: wait until each is paused, then leave the DurableWorker and exit),
`fallback_url` (a Gemini scripted server: the client is then a `FallbackClient` that tries
`model_url` first, without retries, and falls over to it), `nested` (the root's one tool is
a sub-agent with the tools above: `delegate`), `report_pause` (run id: print
`{"paused": id}` once its pause is recorded), `session` (`{"store": "sqlite" | "postgres",
"where": file or DSN, "id": ...}`: the Worker keeps its conversation there), `stop_after`
(`"append"`: once the session's append is written, print `{"stopped": "append"}` and block
until the process is killed), `after_stop` (run ids to start once an append has stopped).
It prints one JSON line per event: `{"tool": ...}` when the tool wrote, `{"run": id, "result": ...}`
per finished run (`{"run": id, "error": name}` per failed one).
"""

from __future__ import annotations

import json
import random
import sys
import threading
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskGroup

from llm_worker import Decision, PauseState, Worker, tool
from llm_worker.durable import DecisionConflictError, DurableWorker
from llm_worker.durable._records import run_record
from llm_worker.errors import LLMWorkerError
from llm_worker.providers import (
    AnthropicClient,
    FallbackClient,
    GeminiClient,
    HttpClient,
    LLMClient,
    RetryPolicy,
)
from llm_worker.sessions import PostgresSession, Session, SqliteSession
from llm_worker.tools import Tool

_SAYING = threading.Lock()  # tools print from worker threads: one whole line at a time


def say(data: dict[str, Any]) -> None:
    with _SAYING:
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()


def tools(config: dict[str, Any]) -> list[Tool]:
    log: str = config["log"]

    @tool(effect=config.get("effect", "side_effect"))
    def append_line(text: str) -> str:
        """Append a line to the log file."""
        with open(log, "a+") as f:
            f.seek(0)
            first = not f.read()
            f.write(text + "\n")
        say({"tool": "append_line", "text": text, "executor": config.get("executor")})
        if config.get("hang") is True or (config.get("hang") == "first" and first):
            threading.Event().wait()  # until the process is killed
        return f"appended {text}"

    @tool(effect="read_only")
    def read_log() -> str:
        """Read the log file."""
        with open(log) as f:
            return f.read()

    @tool(requires_approval=True)
    def pay(amount: int, to: str = "") -> str:
        """Pay an amount."""
        with open(log, "a") as f:
            f.write(f"pay {amount} {to}".rstrip() + "\n")
        return f"paid {amount}"

    return [append_line, read_log, pay]


def model_clients(config: dict[str, Any]) -> list[HttpClient]:
    retry = RetryPolicy.disabled() if "fallback_url" in config else None
    client = AnthropicClient(
        model="scripted-model", base_url=config["model_url"], api_key="k", retry=retry
    )
    if "fallback_url" not in config:
        return [client]
    spare = GeminiClient(model="scripted-model", base_url=config["fallback_url"], api_key="k")
    return [client, spare]


_STOPPED: list[anyio.Event] = []  # set once an append stopped: `after_stop`'s runs start


class _Stopping:
    """Blocks (until the process is killed) right after the session's append is written."""

    async def append(self, *args: Any, **options: Any) -> None:
        await super().append(*args, **options)  # pyright: ignore[reportAttributeAccessIssue]
        say({"stopped": "append"})
        _STOPPED[0].set()
        await anyio.sleep_forever()


class _StoppingSqlite(_Stopping, SqliteSession):
    pass


class _StoppingPostgres(_Stopping, PostgresSession):
    pass


def session_of(config: dict[str, Any]) -> Session | None:
    """The session of `config["session"]`, stopping where `stop_after` says."""
    spec = config.get("session")
    if spec is None:
        return None
    stop = config.get("stop_after") == "append"
    if spec["store"] == "sqlite":
        return (_StoppingSqlite if stop else SqliteSession)(spec["id"], spec["where"])
    return (_StoppingPostgres if stop else PostgresSession)(spec["id"], spec["where"])


def root_worker(client: LLMClient, config: dict[str, Any]) -> Worker:
    """The Worker the runs run on; with `nested`, its one tool is a sub-agent with the tools."""
    if not config.get("nested"):
        return Worker(client, tools=tools(config), session=session_of(config))
    desk = Worker(client, tools=tools(config), name="desk")
    about = "Hands the task to the desk."
    return Worker(client, tools=[desk.as_tool(name="delegate", description=about)])


async def serve(config: dict[str, Any]) -> None:
    _STOPPED.append(anyio.Event())
    clients = model_clients(config)
    client: LLMClient = clients[0] if len(clients) == 1 else FallbackClient(clients)
    async with AsyncExitStack() as stack:
        for closing in clients:
            await stack.enter_async_context(closing)
        worker = root_worker(client, config)
        durable = DurableWorker(
            worker,
            name=config["name"],
            database_url=config["url"],
            executor_id=config.get("executor", "local"),
            app_version="test",
            worker_concurrency=config.get("worker_concurrency"),
            poll_interval=0.05,
            serve=not config.get("client"),
            lease=config.get("lease", 1.0),
        )
        async with durable, anyio.create_task_group() as tg:
            say({"ready": True})
            if "race" in config:
                await race(durable, config)
            if "leave_after" in config:
                for run_id in config["leave_after"]:
                    assert await durable.paused(run_id) is not None
                say({"leaving": True})
                return
            if "statuses" in config:  # each run's status, after a bounded look at the first
                await durable.paused(config["statuses"][0], wait=1.0)
                say({"statuses": [await durable.status(r) for r in config["statuses"]]})
            if "decide" in config:
                state = await durable.paused(config["decide"])
                assert state is not None
                decisions = {i: Decision.approve() for i in tree_calls(state)}
                await durable.decide(config["decide"], decisions)
                say({"decided": config["decide"]})
            if "cancel" in config:
                assert await durable.paused(config["cancel"]) is not None
                await durable.cancel(config["cancel"], "cancelled from another process")
                say({"cancelled": config["cancel"]})
            await _start(durable, config, tg)
            if "report_pause" in config:  # once the pause is recorded (then the test kills)
                assert await durable.paused(config["report_pause"]) is not None
                say({"paused": config["report_pause"]})
            for run_id in config.get("wait", []):
                tg.start_soon(_run, durable, run_id, False)
            if config.get("serve"):
                await anyio.sleep_forever()


async def _start(durable: DurableWorker, config: dict[str, Any], tg: TaskGroup) -> None:
    """Start `runs`, then (once an append stopped: the session is free again) `after_stop`."""
    for run_id in config.get("runs", []):
        tg.start_soon(_run, durable, run_id, True)
    if "after_stop" in config:
        await _STOPPED[0].wait()
        for run_id in config["after_stop"]:
            tg.start_soon(_run, durable, run_id, True)


def tree_calls(state: PauseState) -> list[str]:
    """Every pending call of a paused run tree (its sub-agents' included)."""
    ids = [p.call.id for p in state.pending]
    for below in state.children.values():
        ids.extend(tree_calls(below))
    return ids


async def race(durable: DurableWorker, config: dict[str, Any]) -> None:
    """Decide each run whose id arrives on stdin, after a seeded random delay, all at once."""
    rng = random.Random(config["seed"])
    decision = Decision(config["allow"], reason=config["executor"])
    stdin = anyio.wrap_file(sys.stdin)

    async def decide(run_id: str, delay: float) -> None:
        await anyio.sleep(delay)  # the seeded timing of this decision
        try:
            await durable.decide(run_id, {f"{run_id}-p": decision})
        except DecisionConflictError:
            say({"raced": run_id, "won": False})
        else:
            say({"raced": run_id, "won": True})

    async with anyio.create_task_group() as tg:
        for _ in config["race"]:
            run_id = (await stdin.readline()).strip()
            tg.start_soon(decide, run_id, rng.random() * 0.25)


async def _run(durable: DurableWorker, run_id: str, start: bool) -> None:
    if start:
        await durable.start(run_id, run_id=run_id)
    try:
        result = await durable.result(run_id)
    except LLMWorkerError as exc:  # the run failed: the test says whether it should have
        say({"run": run_id, "error": type(exc).__name__})
        return
    say({"run": run_id, "result": run_record(result)})


if __name__ == "__main__":
    anyio.run(serve, json.loads(sys.argv[1]))
