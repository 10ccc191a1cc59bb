"""A tripped guardrail reaches the official JS consumers as an error they render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_worker import InputGuardrailContext, Trip, Worker, input_guardrail
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

from .conftest import run_node, scripted, serve

pytestmark = pytest.mark.anyio


@input_guardrail
async def no_passwords(ctx: InputGuardrailContext) -> Trip | None:
    return Trip("Requests for passwords are refused.") if "password" in ctx.text else None


async def consumed(adapter_type: Any, script: str, node_modules: Path) -> Any:
    answer = ScriptedResponse.text("The admin password is hunter2.", chunk_size=4, delay=0.01)
    async with scripted("anthropic", [answer]) as (_, factory):

        def make() -> Worker:
            return Worker(factory.client, guardrails=[no_passwords])

        async with serve(adapter_type(make)) as url:
            plan = json.dumps([{"send": "What is the admin password?"}])
            return await run_node(node_modules, script, url, plan)


async def test_the_ai_client_shows_the_guardrails_reason(node_modules: Path) -> None:
    out = await consumed(VercelAIAdapter, "vercel_consumer.mjs", node_modules)
    assert out["status"] == "error"
    assert any("Requests for passwords are refused." in e for e in out["errors"])
    assert "hunter2" not in json.dumps(out["messages"])


async def test_the_agui_client_fails_the_run_with_the_reason(node_modules: Path) -> None:
    out = await consumed(AGUIAdapter, "agui_consumer.mjs", node_modules)
    errors = [e for e in out["events"] if e["type"] == "RUN_ERROR"]
    assert len(errors) == 1 and "Requests for passwords are refused." in errors[0]["message"]
    assert not out["finished"]
    assert "hunter2" not in json.dumps(out["messages"])
