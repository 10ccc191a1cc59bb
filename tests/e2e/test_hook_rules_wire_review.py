"""Adversarial probes of the hook rules over every wire format: stored (blob) outputs, early
start, pause / resume in a fresh Worker from JSON, signatures on rewritten calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from llm_worker import Aborted, FsBlobStore, PauseState, RunStatus, ToolUsePart, Worker, tool
from llm_worker.hooks import Abort, Pause, ToolCallContext, ToolResultContext
from llm_worker.testing import ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT, serve, worker_options
from support.wire_bodies import assert_valid

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("provider", PROVIDERS)]

SECRET = "hunter2"
SIGNATURE = "CikB0e2Kbw5tJ9dwYB9m1I9W28H1signature=="


def _big(name: str) -> str:
    # The secret sits in the first lines, which the stored output's summary shows.
    head = f"{name}: SECRET={SECRET}\n"
    return head + "".join(f"{name} line {n:05d} padding padding padding\n" for n in range(400))


@tool(effect="read_only")
async def dump_env(name: str) -> str:
    """Dump an environment (large)."""
    return _big(name)


async def _mask(ctx: ToolResultContext) -> None:
    ctx.result.content = ctx.result.content.replace(SECRET, "***")


def _two_dumps() -> ScriptedResponse:
    return ScriptedResponse(
        [
            ToolUsePart("call_1", "dump_env", {"name": "prod"}),
            ToolUsePart("call_2", "dump_env", {"name": "stage"}),
        ]
    )


async def test_stored_outputs_started_early_are_withheld_when_the_chain_aborts(
    provider: str, tmp_path: Path
) -> None:
    async def audit(ctx: ToolResultContext) -> Abort | None:
        assert ctx.stored
        return Abort("audit down") if ctx.call.input["name"] == "stage" else None

    script = [_two_dumps(), ScriptedResponse.text("ok")]
    async with serve(provider, script) as wire:
        worker = Worker(
            wire.client(),
            tools=[dump_env],
            blob_store=FsBlobStore(tmp_path),
            early_tool_start=True,
            **worker_options(provider),
        )
        worker.add_after_tool_call_hook(audit)
        worker.add_after_tool_call_hook(_mask)
        with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
            await worker.run("dump both")
        with anyio.fail_after(TIMEOUT):
            await worker.run("and now?")
        body = wire.body(1)
    assert SECRET not in orjson.dumps(body).decode()
    (step,) = assert_valid(provider, body)
    assert "***" in step.results[0].output
    assert "after_tool_call" in step.results[1].output


async def test_a_stored_early_result_over_a_json_pause_is_checked_in_the_fresh_worker(
    provider: str, tmp_path: Path
) -> None:
    async def pause_stage(ctx: ToolCallContext) -> Pause | None:
        return Pause("ask") if ctx.call.input["name"] == "stage" and not ctx.resumed else None

    async def broken(ctx: ToolResultContext) -> None:
        raise RuntimeError("audit down")

    async with serve(provider, [_two_dumps(), ScriptedResponse.text("ok")]) as wire:
        worker = Worker(
            wire.client(),
            tools=[dump_env],
            blob_store=FsBlobStore(tmp_path),
            early_tool_start=True,
            **worker_options(provider),
        )
        worker.add_before_tool_call_hook(pause_stage)
        with anyio.fail_after(TIMEOUT):
            paused = await worker.run("dump both")
        assert paused.state is not None
        assert [p.status for p in paused.state.pending] == ["done", "pending"]
        saved = paused.state.to_json()

        fresh = Worker(
            wire.client(),
            tools=[dump_env],
            blob_store=FsBlobStore(tmp_path),
            **worker_options(provider),
        )
        fresh.add_before_tool_call_hook(pause_stage)
        fresh.add_after_tool_call_hook(broken)
        fresh.add_after_tool_call_hook(_mask)
        with anyio.fail_after(TIMEOUT), pytest.raises(Exception, match="audit down"):
            await fresh.resume(PauseState.from_json(saved))
        with anyio.fail_after(TIMEOUT):
            await fresh.run("and now?")
        body = wire.body(1)
    assert SECRET not in orjson.dumps(body).decode()
    (step,) = assert_valid(provider, body)
    assert all("after_tool_call" in r.output for r in step.results)


@tool(effect="side_effect")
async def query(table: str, where: dict[str, Any], columns: list[str]) -> str:
    """Query a table."""
    return f"{table} {sorted(where.items())} {columns}"


async def test_nested_rewrites_keep_the_signed_call_across_a_json_pause(provider: str) -> None:
    async def scope_to_tenant(ctx: ToolCallContext) -> None:
        ctx.call.input["where"]["tenant"] = "t1"
        ctx.call.input["columns"].append("tenant")
        ctx.call.input["table"] += "_v2"

    async def approval(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("approve?")

    model_args = {"table": "users", "where": {"age": {"gt": 30}}, "columns": ["id", "名前"]}
    first = ScriptedResponse(
        [ToolUsePart("call_1", "query", model_args, signature=SIGNATURE)]
        if provider == "gemini"
        else [ToolUsePart("call_1", "query", model_args)]
    )
    async with serve(provider, [first, ScriptedResponse.text("ok")]) as wire:
        worker = Worker(wire.client(), tools=[query], **worker_options(provider))
        worker.add_before_tool_call_hook(scope_to_tenant)
        worker.add_before_tool_call_hook(approval)
        with anyio.fail_after(TIMEOUT):
            paused = await worker.run("query")
        assert paused.state is not None
        fresh = Worker(wire.client(), tools=[query], **worker_options(provider))
        fresh.add_before_tool_call_hook(scope_to_tenant)
        fresh.add_before_tool_call_hook(approval)
        with anyio.fail_after(TIMEOUT):
            result = await fresh.resume(PauseState.from_json(paused.state.to_json()))
        assert result.status is RunStatus.FINISHED
        body = wire.body(1)
    (step,) = assert_valid(provider, body)
    assert [c.args for c in step.calls] == [model_args]
    assert step.results[0].output == (
        "users_v2 [('age', {'gt': 30}), ('tenant', 't1')] ['id', '名前', 'tenant']"
    )
    if provider == "gemini":
        assert SIGNATURE in orjson.dumps(body).decode()
