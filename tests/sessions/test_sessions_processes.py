"""Two processes on one session: one holds it (the other fails clearly), SIGKILL leaves no
partial write, and a run paused in one process is resumed in another (this one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Decision, RunStatus, Worker
from llm_worker.testing import ScriptedClient, ScriptedResponse
from sessions.conftest import Store

pytestmark = pytest.mark.anyio

CHILD = str(Path(__file__).with_name("child.py"))


def child(store: Store, mode: str) -> subprocess.Popen[str]:
    config = {"store": store.kind, "where": store.where, "session": "shared", "mode": mode}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    return subprocess.Popen(
        [sys.executable, CHILD, json.dumps(config)], stdout=subprocess.PIPE, text=True, env=env
    )


def line(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    text = process.stdout.readline()  # bounded: the test's fail_after and the child's own end
    return json.loads(text)


def close(process: subprocess.Popen[str]) -> None:
    if process.stdout is not None:
        process.stdout.close()


async def test_two_processes_one_fails_busy_and_a_kill_leaves_no_partial_write(
    store: Store,
) -> None:
    holder = child(store, "hold")
    try:
        with anyio.fail_after(60):
            assert await anyio.to_thread.run_sync(line, holder) == {"holding": True}
            second = child(store, "once")
            assert await anyio.to_thread.run_sync(line, second) == {"error": "SessionBusyError"}
            assert await anyio.to_thread.run_sync(second.wait) == 0
            close(second)
    finally:
        holder.send_signal(signal.SIGKILL)  # between its load and its append
        holder.wait(timeout=30)
        close(holder)
    session = store.session("shared")
    assert await session.messages() == []  # nothing of the killed run, nothing of the refused
    client = ScriptedClient([ScriptedResponse.text("after the crash")])
    with anyio.fail_after(30):
        result = await Worker(client).run("again", session=session)  # the dead claim is over
    assert result.status is RunStatus.FINISHED
    assert [m.text for m in await session.messages()] == ["again", "after the crash"]


async def test_a_run_paused_in_one_process_is_resumed_in_another(store: Store) -> None:
    with anyio.fail_after(60):
        process = child(store, "pause")
        assert await anyio.to_thread.run_sync(line, process) == {"status": "paused"}
        assert await anyio.to_thread.run_sync(process.wait) == 0
        close(process)
        session = store.session("shared")
        state = await session.pause_state()
        assert state is not None
        call = state.pending[0].call.id
        from sessions.child import note, pay

        client = ScriptedClient([ScriptedResponse.text("paid it")])
        worker = Worker(client, tools=[note, pay])
        result = await worker.resume(decisions={call: Decision.approve()}, session=session)
    assert result.status is RunStatus.FINISHED and result.text == "paid it"
    stored = await session.messages()
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2].tool_results[0].content == "paid 5"
    assert await session.pause_state() is None
