"""Review probes: the approval card shows what an approval runs (issue #28 item 10, web side).

A sanitizing hook before the pausing one rewrites the call's arguments; `Decision.approve()`
runs the rewrite (`PendingCall.arguments`), so the browser must be shown it, not the model's
arguments: Vercel sends `data-llm-worker-approval` before the approval request, AG-UI puts the
rewrite in the interrupt's `metadata.input`. Approved, the tool runs exactly that.
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_worker import TextPart, ToolUsePart, Worker
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter

from .conftest import Factory
from .test_review_adapters import USER, answered, chunks, post, site

pytestmark = pytest.mark.anyio

AG_USER = {"id": "u", "role": "user", "content": "Weather?"}


def sanitize(ctx: ToolCallContext) -> None:
    ctx.call.input["city"] = ctx.call.input["city"].strip().title()


def approval(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("a person checks each lookup")


def hooked(factory: Factory) -> Any:
    def make() -> Worker:
        worker = factory()
        worker.add_before_tool_call_hook(sanitize)
        worker.add_before_tool_call_hook(approval)
        return worker

    make.workers = factory.workers  # type: ignore[attr-defined]
    return make


def lookup(city: str) -> list[ScriptedResponse]:
    step = ScriptedResponse([TextPart("Checking."), ToolUsePart("", "weather", {"city": city})])
    return [step, ScriptedResponse.text("Done.")]


async def test_vercel_shows_the_rewritten_arguments_and_the_approval_runs_them() -> None:
    adapter = lambda f: VercelAIAdapter(hooked(f))  # noqa: E731
    async with site(adapter, lookup("  oslo ")) as (_, url, http):
        first = chunks((await post(http, url, {"id": "c1", "messages": [USER]})).text)
        kinds = [c["type"] for c in first]
        shown = [c for c in first if c["type"] == "data-llm-worker-approval"]
        asks = [c for c in first if c["type"] == "tool-approval-request"]
        assert len(shown) == 1 and len(asks) == 1
        call_id = str(asks[0]["toolCallId"])
        assert shown[0]["data"] == {"toolCallId": call_id, "input": {"city": "Oslo"}}
        assert kinds.index("data-llm-worker-approval") < kinds.index("tool-approval-request")
        message = answered([], call_id, approved=True)
        message["parts"][-1] |= {"type": "tool-weather", "input": {"city": "  oslo "}}
        message["parts"].append(shown[0] | {"type": "data-llm-worker-approval"})
        second = await post(http, url, {"id": "c1", "messages": [USER, message], "messageId": "a1"})
    outputs = [c for c in chunks(second.text) if c["type"] == "tool-output-available"]
    assert [o["output"] for o in outputs] == ["Oslo: sunny"]


async def test_vercel_sends_no_approval_part_when_no_hook_rewrote() -> None:
    adapter = lambda f: VercelAIAdapter(hooked(f))  # noqa: E731
    async with site(adapter, lookup("Oslo")) as (_, url, http):
        first = chunks((await post(http, url, {"id": "c1", "messages": [USER]})).text)
    assert [c for c in first if c["type"] == "tool-approval-request"]
    assert not [c for c in first if c["type"] == "data-llm-worker-approval"]


async def test_agui_interrupt_carries_the_rewritten_arguments_and_the_approval_runs_them() -> None:
    adapter = lambda f: AGUIAdapter(hooked(f))  # noqa: E731
    async with site(adapter, lookup("  oslo ")) as (_, url, http):
        body = {"threadId": "t1", "runId": "r1", "messages": [AG_USER]}
        first = chunks((await post(http, url, body)).text)
        finished = [c for c in first if c["type"] == "RUN_FINISHED"]
        (interrupt,) = finished[0]["outcome"]["interrupts"]
        assert interrupt["metadata"] == {"toolName": "weather", "input": {"city": "Oslo"}}
        resume = [{"interruptId": interrupt["id"], "status": "resolved",
                   "payload": {"approved": True}}]  # fmt: skip
        again = {"threadId": "t1", "runId": "r2", "messages": [AG_USER], "resume": resume}
        second = chunks((await post(http, url, again)).text)
    results = [c["content"] for c in second if c["type"] == "TOOL_CALL_RESULT"]
    assert results == ["Oslo: sunny"]
