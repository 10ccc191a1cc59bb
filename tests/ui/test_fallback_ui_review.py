"""Review probes: a FallbackClient run through the web adapters, read by the official clients.

The first client's answer breaks mid-stream after its thinking and some text; the second
answers. What the browser keeps (and would send back) must be the Worker's history: the
withdrawn answer's completed thinking and its half text are not in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import OverloadedError
from llm_worker.messages import TextPart, ThinkingPart
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.testing import ScriptedClient, ScriptedResponse

from .conftest import AGUI, VERCEL, Consumer, serve

pytestmark = pytest.mark.anyio


class Factory:
    def __init__(self, fallback: bool) -> None:
        self.fallback = fallback
        self.workers: list[Worker[str]] = []

    def __call__(self) -> Worker[str]:
        error = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
        broken = ScriptedResponse(
            [ThinkingPart("withdrawn thought", signature="sig-a"), TextPart("HALF answer")],
            fail_with=error,
        )
        whole = ScriptedResponse([ThinkingPart("kept thought", signature="sig-b"), TextPart("ok")])
        if not self.fallback:  # the same withdrawal by the Worker's own stream retry
            worker = Worker(ScriptedClient([broken, whole], provider="anthropic", model="a-1"))
            self.workers.append(worker)
            return worker
        first = ScriptedClient([broken], provider="anthropic", model="a-1")
        second = ScriptedClient([whole], provider="gemini", model="b-1")
        worker = Worker(FallbackClient([first, second], cooldown=Cooldown.disabled()))
        self.workers.append(worker)
        return worker


@pytest.mark.parametrize("fallback", [True, False], ids=["fallback", "stream-retry"])
@pytest.mark.parametrize("consumer", [VERCEL, AGUI], ids=["vercel", "ag-ui"])
async def test_the_browser_keeps_no_withdrawn_answer(
    consumer: Consumer, fallback: bool, node_modules: Path
) -> None:
    factory = Factory(fallback)
    adapter: Any = consumer.adapter(factory)
    with anyio.fail_after(60):
        async with serve(adapter) as url:
            out = await consumer.consume(node_modules, url, [{"send": "go"}])
    history = factory.workers[0].history
    assert [m.text for m in history] == ["go", "ok"]
    kept = consumer.history(out)
    assert "HALF answer" not in repr(kept)
    assert "withdrawn thought" not in repr(kept)
    assert kept == history
