"""A sub-agent's progress through both web adapters, read by the official JS consumers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_worker import TextPart, ToolUsePart, Worker
from llm_worker.testing import ScriptedClient, ScriptedResponse

from .conftest import AGUI, VERCEL, Consumer, scripted, serve

pytestmark = pytest.mark.anyio


class TreeFactory:
    """Workers whose one tool is a sub-agent (a scripted child that reports and answers)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.workers: list[Worker] = []

    def __call__(self) -> Worker:
        child = Worker(
            ScriptedClient(ScriptedResponse([TextPart("Found three sources.")], chunk_size=5))
        )
        kid = child.as_tool(name="research", description="Researches.")
        worker = Worker(self.client, tools=[kid])
        self.workers.append(worker)
        return worker


SCRIPT = [
    ScriptedResponse([TextPart("Asking."), ToolUsePart("call_r", "research", {"input": "x"})]),
    ScriptedResponse.text("It found three sources."),
]


async def tree_run(consumer: Consumer, node_modules: Path) -> tuple[dict[str, Any], Worker]:
    async with scripted("anthropic", SCRIPT) as (_, plain):
        factory = TreeFactory(plain.client)
        async with serve(consumer.adapter(factory)) as url:
            out = await consumer.consume(node_modules, url, [{"send": "Research x"}])
    return out, factory.workers[0]


async def test_vercel_client_keeps_each_sub_agents_latest_record(node_modules: Path) -> None:
    out, worker = await tree_run(VERCEL, node_modules)
    records = [c for c in out["chunks"] if c["type"] == "data-subagent"]
    assert {c["id"] for c in records} == {"call_r"}
    assert records[-1]["data"] == {
        "path": ["call_r"],
        "status": "done",
        "text": "Found three sources.",
        "tool": None,
    }
    deltas = [c["data"]["text"] for c in out["chunks"] if c["type"] == "data-subagent-delta"]
    assert "".join(deltas) == "Found three sources."
    # the client's message holds one part for the sub-agent (its latest), beside the root's
    parts = out["messages"][-1]["parts"]
    kept = [p for p in parts if p["type"] == "data-subagent"]
    assert [p["data"]["status"] for p in kept] == ["done"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    assert texts == ["Asking.", "It found three sources."]  # no child text among the root's
    assert VERCEL.history(out) == worker.history  # the history round-trips as before


async def test_agui_client_gets_sub_agent_progress_as_custom_events(node_modules: Path) -> None:
    out, worker = await tree_run(AGUI, node_modules)
    custom = [e for e in out["events"] if e["type"] == "CUSTOM"]
    records = [e["value"] for e in custom if e["name"] == "llm-worker.subagent"]
    assert records[0]["status"] == "running" and records[-1]["status"] == "done"
    assert records[-1]["text"] == "Found three sources."
    deltas = [e["value"]["text"] for e in custom if e["name"] == "llm-worker.subagent-delta"]
    assert "".join(deltas) == "Found three sources."
    texts = [e["delta"] for e in out["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(texts) == "Asking.It found three sources."
    assert AGUI.history(out) == worker.history
