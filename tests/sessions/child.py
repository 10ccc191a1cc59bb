"""A process running one Worker run on a session, for the two-process tests (not a test).

Usage: `python child.py '<json>'` with `store` (`sqlite` or `postgres`), `where` (the file or
the DSN), `session`, `mode`:

- `hold`: run a tool that prints `{"holding": true}` and blocks until the process is killed
  (between the session's load and its append);
- `once`: run once (a tool call, then an answer) and print `{"status": ...}`, or
  `{"error": "SessionBusyError"}` when another run holds the session;
- `pause`: run into an approval pause, print `{"status": "paused"}` and exit.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import anyio

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.errors import SessionBusyError
from llm_worker.sessions import PostgresSession, SqliteSession
from llm_worker.sessions._sql import SqlSession
from llm_worker.testing import ScriptedClient, ScriptedResponse


def say(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


@tool
def hold() -> str:
    """Block until killed."""
    say({"holding": True})
    threading.Event().wait()
    return "never"


@tool
def note(text: str) -> str:
    """Note it."""
    return f"noted {text}"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay."""
    return f"paid {amount}"


def session_of(config: dict[str, Any]) -> SqlSession:
    if config["store"] == "sqlite":
        return SqliteSession(config["session"], config["where"])
    return PostgresSession(config["session"], config["where"])


async def main(config: dict[str, Any]) -> None:
    mode = config["mode"]
    name = {"hold": "hold", "once": "note", "pause": "pay"}[mode]
    arguments = {"hold": {}, "once": {"text": "child"}, "pause": {"amount": 5}}[mode]
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("", name, arguments)]), ScriptedResponse.text("done")]
    )
    session = session_of(config)
    try:
        worker = Worker(client, tools=[hold, note, pay])
        try:
            result = await worker.run(f"from the child ({mode})", session=session)
        except SessionBusyError:
            say({"error": "SessionBusyError"})
            return
        say({"status": result.status.value})
    finally:
        await session.aclose()


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
