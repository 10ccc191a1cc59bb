"""Retention crossed with runs and processes: pause -> JSON -> sweep -> resume, two writers.

A paused run's state names the blobs its history needs (`referenced_blob_ids`); a sweep that
keeps them leaves the resumed run able to inspect its blob, in another Worker and store
object, on a folder and on S3 (moto). Two processes storing the same content at once (and
making the store's id key at once) get the same ids and one whole blob per content.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import (
    BlobStore,
    Decision,
    PauseState,
    PauseStateError,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.blobs import SweepableBlobStore, TextContent, referenced_blob_ids
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.messages import Part
from llm_worker.testing import ScriptedClient, ScriptedResponse
from support.blob_stores import make_store
from support.object_store import MotoServer, s3_options

pytestmark = pytest.mark.anyio

LEDGER = "".join(f"row {i},INV-{i:05},{i * 3.5:.2f}\n" for i in range(1, 3001))
PAID: list[str] = []


@tool(effect="read_only")
def ledger() -> str:
    """The whole ledger."""
    return LEDGER


@tool(requires_approval=True)
def pay(invoice: str) -> str:
    """Pay an invoice."""
    PAID.append(invoice)
    return f"{invoice} paid"


def twin(kind: str, store: BlobStore, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A second store object over the same folder or prefix (as another process opens it)."""
    if kind == "fs":
        return make_store("fs", tmp_path, request)
    from llm_worker.blobs import ObjectBlobStore

    server: MotoServer = request.getfixturevalue("moto_server")
    prefix = repr(store).split("'")[1]
    return ObjectBlobStore.from_url(prefix, index_every=7, **s3_options(server.endpoint))


@pytest.mark.parametrize("kind", ["fs", "object-s3"])
async def test_a_swept_store_keeps_what_a_paused_run_needs_and_the_resumed_run_reads_it(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    PAID.clear()
    store = make_store(kind, tmp_path, request)
    unrelated = await store.store(TextContent("an old output no run needs"))
    first = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "ledger", {})]),
            ScriptedResponse([ToolUsePart("c2", "pay", {"invoice": "INV-00007"})]),
        ]
    )
    with anyio.fail_after(60):
        paused = await Worker(first, tools=[ledger, pay], blob_store=store).run("pay row 7")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    saved = paused.state.to_json()

    state = PauseState.from_json(saved)
    needed = referenced_blob_ids(state)
    assert needed == referenced_blob_ids(saved) and len(needed) == 1
    (blob_id,) = needed
    assert blob_id != unrelated
    sweeper = twin(kind, store, tmp_path, request)
    assert isinstance(sweeper, SweepableBlobStore)
    future = datetime.now(UTC) + timedelta(hours=2)
    with anyio.fail_after(60):
        report = await sweeper.sweep(timedelta(hours=1), keep=needed, now=future)
    assert report.deleted == (unrelated,) and report.kept == (blob_id,)

    args = {"blob_id": blob_id, "selector": "lines:7-8"}
    second = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c3", "inspect", args)]),
            ScriptedResponse.text("Paid INV-00007."),
        ]
    )
    resumer = Worker(second, tools=[ledger, pay], blob_store=twin(kind, store, tmp_path, request))
    with anyio.fail_after(60):
        result = await resumer.resume(state, decisions={"c2": Decision.approve()})
    assert result.status is RunStatus.FINISHED and PAID == ["INV-00007"]
    read = resumer.history[-2].tool_results[0]
    assert not read.is_error and "row 7,INV-00007" in read.content, read.content


_WRITER = """
import json, sys, anyio
from llm_worker.blobs import FsBlobStore, ObjectBlobStore, TextContent

async def main(kind, where, endpoint):
    if kind == "fs":
        store = FsBlobStore(where)
    else:
        from support.object_store import s3_options

        store = ObjectBlobStore.from_url(where, **s3_options(endpoint))
    print("ready", flush=True)
    sys.stdin.readline()
    ids = []
    for i in range(12):
        text = "".join(f"content {i} line {n}\\n" for n in range(i * 4000))
        ids.append(await store.store(TextContent(text)))
    print(json.dumps(ids), flush=True)

anyio.run(main, *sys.argv[1:])
"""


def start_writer(kind: str, where: str, endpoint: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, kind, where, endpoint],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    return proc.communicate(timeout=120)


@pytest.mark.parametrize("kind", ["fs", "object-s3"])
async def test_two_processes_storing_the_same_content_at_once_share_one_blob_each(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    if kind == "fs":
        where, endpoint = str(tmp_path / "blobs"), ""
    else:
        server: MotoServer = request.getfixturevalue("moto_server")
        where, endpoint = repr(store).split("'")[1], server.endpoint
    procs = [start_writer(kind, where, endpoint) for _ in range(2)]
    try:
        for proc in procs:  # both started, neither has made the key: then both go at once
            assert proc.stdout is not None
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
            assert line.strip() == "ready", proc.stderr.read() if proc.stderr else ""
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = [await anyio.to_thread.run_sync(finish, proc) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert results[0] == results[1] and len(set(results[0])) == 12, [e for _, e in outs]
    with anyio.fail_after(60):
        for i, blob_id in enumerate(results[0]):
            loaded = await store.load(blob_id)
            assert isinstance(loaded, TextContent)
            assert loaded.text == "".join(f"content {i} line {n}\n" for n in range(i * 4000))
    if kind == "fs":
        names = sorted(await anyio.to_thread.run_sync(os.listdir, where))
        assert names == sorted([".llm-worker-blob-key", *(f"{i}.txt" for i in results[0])])


@tool(effect="read_only")
async def read_log() -> str:
    """Read the build log."""
    return LEDGER


@tool(effect="side_effect")
async def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def _pause_on_send(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed or ctx.call.name != "send" else Pause("approve?")


def _early(client: ScriptedClient, store: Any) -> Worker:
    made = Worker(client, tools=[read_log, send], blob_store=store, early_tool_start=True)
    made.add_before_tool_call_hook(_pause_on_send)
    return made


@pytest.mark.parametrize("kind", ["fs", "object-s3"])
async def test_a_pending_result_stored_before_the_pause_is_protected_and_resumes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The read ran before its batch paused: the state carries its output as a blob reference,
    # which the resuming Worker reads back. Unprotected, a sweep makes the state unresumable.
    store = make_store(kind, tmp_path, request)
    calls: list[Part] = [
        ToolUsePart("r1", "read_log", {}),
        ToolUsePart("s1", "send", {"to": "ana"}),
    ]
    with anyio.fail_after(60):
        result = await _early(ScriptedClient([ScriptedResponse(calls)]), store).run("go")
    assert result.status is RunStatus.PAUSED and result.state is not None
    saved = result.state.to_json()
    needed = referenced_blob_ids(PauseState.from_json(saved))
    assert len(needed) == 1 and '"blob_id"' in saved
    sweeper = twin(kind, store, tmp_path, request)
    future = datetime.now(UTC) + timedelta(hours=2)

    async def resume() -> RunStatus:
        fresh = _early(
            ScriptedClient([ScriptedResponse.text("sent")]), twin(kind, store, tmp_path, request)
        )
        with anyio.fail_after(60):
            return (await fresh.resume(PauseState.from_json(saved))).status

    with anyio.fail_after(60):
        assert (await sweeper.sweep(timedelta(hours=1), keep=needed, now=future)).deleted == ()
    assert await resume() is RunStatus.FINISHED
    with anyio.fail_after(60):
        assert (await sweeper.sweep(timedelta(hours=1), now=future)).deleted == tuple(needed)
    with pytest.raises(PauseStateError, match="blob"):
        await resume()


async def test_a_blob_swept_under_a_paused_run_is_an_error_result_never_a_crash(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # What docs/blobs.md promises when an application forgets to protect a state's ids.
    PAID.clear()
    store = make_store("fs", tmp_path, request)
    first = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "ledger", {})]),
            ScriptedResponse([ToolUsePart("c2", "pay", {"invoice": "INV-00007"})]),
        ]
    )
    with anyio.fail_after(60):
        paused = await Worker(first, tools=[ledger, pay], blob_store=store).run("pay row 7")
    assert paused.state is not None
    state = PauseState.from_json(paused.state.to_json())
    (blob_id,) = referenced_blob_ids(state)
    assert isinstance(store, SweepableBlobStore)
    future = datetime.now(UTC) + timedelta(hours=2)
    assert (await store.sweep(timedelta(hours=1), now=future)).deleted == (blob_id,)
    second = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c3", "inspect", {"blob_id": blob_id})]),
            ScriptedResponse.text("The ledger is gone."),
        ]
    )
    resumer = Worker(second, tools=[ledger, pay], blob_store=store)
    with anyio.fail_after(60):
        result = await resumer.resume(state, decisions={"c2": Decision.approve()})
    assert result.status is RunStatus.FINISHED and PAID == ["INV-00007"]
    read = resumer.history[-2].tool_results[0]
    assert read.is_error and "no blob" in read.content
