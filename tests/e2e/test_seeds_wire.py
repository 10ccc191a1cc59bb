"""Issue #28's seed items over every wire format, through pause → JSON → resume in a fresh
Worker: an approval runs the sanitized arguments while the provider gets the model's call
back (item 10), and a stored output started early keeps its blob reference (item 13)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from llm_worker import Decision, FsBlobStore, PauseState, RunStatus, ToolUsePart, Worker, tool
from llm_worker.blobs import StoredOutput, TextContent
from llm_worker.hooks import Pause, ToolCallContext, ToolResultContext
from llm_worker.testing import ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT, serve, worker_options
from support.wire_bodies import assert_valid

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("provider", PROVIDERS)]

RAN: list[str] = []
LOG = "".join(f"build step {n:04d} ok, padded to make the log long\n" for n in range(200))


@tool(effect="side_effect")
def shell(cmd: str) -> str:
    """Run a command."""
    RAN.append(cmd)
    return f"ran {cmd}"


@tool(effect="read_only")
async def read_log() -> str:
    """Read the build log (large)."""
    return LOG


def sanitize(ctx: ToolCallContext) -> None:
    if ctx.call.name == "shell":
        ctx.call.input["cmd"] = ctx.call.input["cmd"].replace(" --force", "")


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed or ctx.call.name != "shell" else Pause("approve?")


def make(wire_client: object, provider: str, store: FsBlobStore, *, early: bool) -> Worker:
    worker = Worker(
        wire_client,  # type: ignore[arg-type]
        tools=[shell, read_log],
        blob_store=store,
        early_tool_start=early,
        **worker_options(provider),
    )
    worker.add_before_tool_call_hook(sanitize)
    worker.add_before_tool_call_hook(approval)
    return worker


async def test_an_approved_call_runs_sanitized_and_the_wire_gets_the_models_call(
    provider: str, tmp_path: Path
) -> None:
    RAN.clear()
    seen: list[tuple[bool, object]] = []

    def audit(ctx: ToolResultContext) -> None:
        seen.append((ctx.stored, ctx.result.output))

    first = ScriptedResponse(
        [
            ToolUsePart("call_1", "read_log", {}),
            ToolUsePart("call_2", "shell", {"cmd": "rm -r build --force"}),
        ]
    )
    async with serve(provider, [first, ScriptedResponse.text("cleaned")]) as wire:
        worker = make(wire.client(), provider, FsBlobStore(tmp_path), early=True)
        with anyio.fail_after(TIMEOUT):
            paused = await worker.run("clean the build")
        assert paused.status is RunStatus.PAUSED
        assert paused.state is not None
        saved = paused.state.to_json()

        fresh = make(wire.client(), provider, FsBlobStore(tmp_path), early=False)
        fresh.add_after_tool_call_hook(audit)
        state = PauseState.from_json(saved)
        shell_call = state.pending[1].call.id  # Gemini sends no ids: the library made them
        assert state.pending[1].arguments == {"cmd": "rm -r build"}  # what the person sees
        with anyio.fail_after(TIMEOUT):
            result = await fresh.resume(state, decisions={shell_call: Decision.approve()})
        body = wire.body(1)
    assert result.status is RunStatus.FINISHED
    assert RAN == ["rm -r build"]
    stored, output = seen[0]
    assert stored
    assert isinstance(output, StoredOutput)
    assert output.content == TextContent(LOG)
    (step,) = assert_valid(provider, body)
    # The provider gets its model's call back as sent, and the result of what ran.
    assert step.calls[1].args == {"cmd": "rm -r build --force"}
    assert step.results[1].output == "ran rm -r build"
    assert step.results[0].output.startswith(f"[blob:{output.blob_id}]")
