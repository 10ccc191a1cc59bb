"""A call that ran before its batch paused keeps its `ToolOutput` through JSON (issue #28, 13).

With early start, a read-only call runs while a later call of its batch waits for approval.
Resumed from the state object or from its JSON in a fresh Worker, the after_tool_call hooks
see the same output: `ctx.stored`, the `StoredOutput` with its blob id, summary and content
(read back from the blob store), or the `InlineOutput`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from llm_worker import (
    FsBlobStore,
    PauseState,
    PauseStateError,
    RunStatus,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.blobs import InlineOutput, StoredOutput, StructuredContent, TextContent
from llm_worker.hooks import Pause, ToolCallContext, ToolResultContext
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
LOG = "".join(f"line {n:05d} of the build log, padded to be long enough\n" for n in range(300))
ROWS = [{"id": n, "status": "paid", "customer": f"customer-{n}"} for n in range(200)]


@tool(effect="read_only")
async def read(what: str) -> str:
    """Read a log, a ledger or a note."""
    if what == "log":
        return LOG
    if what == "ledger":
        return orjson.dumps(ROWS).decode()
    return "a short note"


@tool(effect="side_effect")
async def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed or ctx.call.name != "send" else Pause("approve?")


def script(*reads: str) -> list[ScriptedResponse]:
    calls = [ToolUsePart(f"r{n}", "read", {"what": w}) for n, w in enumerate(reads)]
    return [
        ScriptedResponse([*calls, ToolUsePart("s1", "send", {"to": "ana"})]),
        ScriptedResponse.text("done"),
    ]


class Seen:
    """An after hook that records what it sees of each result."""

    def __init__(self) -> None:
        self.results: dict[str, tuple[bool, Any]] = {}

    def __call__(self, ctx: ToolResultContext) -> None:
        self.results[ctx.call.id] = (ctx.stored, ctx.result.output)


def worker(client: ScriptedClient, store: FsBlobStore | None, seen: Seen | None = None) -> Worker:
    made = Worker(client, tools=[read, send], blob_store=store, early_tool_start=True)
    made.add_before_tool_call_hook(approval)
    if seen is not None:
        made.add_after_tool_call_hook(seen)
    return made


async def paused(tmp_path: Path, *reads: str) -> PauseState:
    with anyio.fail_after(TIMEOUT):
        result = await worker(ScriptedClient(script(*reads)), FsBlobStore(tmp_path)).run("go")
    assert result.status is RunStatus.PAUSED
    assert result.state is not None
    assert [p.status for p in result.state.pending][:-1] == ["done"] * len(reads)
    return result.state


async def resumed(state: PauseState, store: FsBlobStore | None) -> Seen:
    seen = Seen()
    fresh = worker(ScriptedClient([ScriptedResponse.text("done")]), store, seen)
    with anyio.fail_after(TIMEOUT):
        result = await fresh.resume(state)
    assert result.status is RunStatus.FINISHED
    return seen


async def test_the_after_hooks_see_the_same_outputs_resumed_from_json(tmp_path: Path) -> None:
    state = await paused(tmp_path, "log", "ledger", "note")
    direct = await resumed(state, FsBlobStore(tmp_path))
    from_json = await resumed(PauseState.from_json(state.to_json()), FsBlobStore(tmp_path))
    assert from_json.results == direct.results
    stored, log = from_json.results["r0"]
    assert stored
    assert isinstance(log, StoredOutput)
    assert log.blob_id is not None
    assert log.summary.startswith(f"[blob:{log.blob_id}]")
    assert log.content == TextContent(LOG)
    stored, ledger = from_json.results["r1"]
    assert stored
    assert isinstance(ledger, StoredOutput)
    assert isinstance(ledger.content, StructuredContent)
    assert ledger.content.value == ROWS
    assert from_json.results["r2"] == (False, InlineOutput("a short note"))


async def test_the_json_holds_the_reference_not_the_content(tmp_path: Path) -> None:
    state = await paused(tmp_path, "log")
    saved = state.to_json()
    assert len(saved) < 3000 < len(LOG)
    output = orjson.loads(saved)["pending"][0]["result"]["output"]
    assert output["kind"] == "stored"
    assert state.pending[0].result is not None
    assert state.pending[0].result.content.startswith(f"[blob:{output['blob_id']}]")
    # Loading and saving again changes nothing, without a store.
    assert PauseState.from_json(saved).to_json() == saved


async def test_a_missing_blob_is_a_typed_error_before_anything_runs(tmp_path: Path) -> None:
    saved = (await paused(tmp_path / "first", "log")).to_json()
    for store in (FsBlobStore(tmp_path / "elsewhere"), None):
        fresh = worker(ScriptedClient([]), store)
        with anyio.fail_after(TIMEOUT), pytest.raises(PauseStateError, match="blob"):
            await fresh.resume(PauseState.from_json(saved))
        assert fresh.history == []
        with anyio.fail_after(TIMEOUT), pytest.raises(PauseStateError, match="blob"):
            await fresh.discard_pause(state=PauseState.from_json(saved))
        assert fresh.history == []


async def test_discarding_a_state_from_json_shows_the_hooks_the_stored_output(
    tmp_path: Path,
) -> None:
    saved = (await paused(tmp_path, "log")).to_json()
    seen = Seen()
    fresh = worker(ScriptedClient([]), FsBlobStore(tmp_path), seen)
    with anyio.fail_after(TIMEOUT):
        await fresh.discard_pause(state=PauseState.from_json(saved))
    stored, output = seen.results["r0"]
    assert stored
    assert isinstance(output, StoredOutput)
    assert output.content == TextContent(LOG)
    assert seen.results["s1"] == (False, None)


@pytest.mark.parametrize(
    "output",
    [
        {"kind": "stored", "blob_id": "../../etc/passwd"},
        {"kind": "stored"},
        {"kind": "pickle", "blob_id": "x"},
        {"kind": "inline", "text": 7},
        ["stored"],
    ],
)
async def test_a_damaged_output_in_the_json_is_a_typed_error(
    tmp_path: Path, output: object
) -> None:
    body = orjson.loads((await paused(tmp_path, "log")).to_json())
    body["pending"][0]["result"]["output"] = output
    with pytest.raises(PauseStateError):
        PauseState.from_json(orjson.dumps(body))
