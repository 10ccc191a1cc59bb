"""Review probes of steering: steers from other threads and loops while the run takes them in."""

from __future__ import annotations

import sys
import threading
from typing import Any

import anyio
import pytest

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio
TIMEOUT = 60.0


@pytest.fixture
def tight_switches() -> Any:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the GIL changes hands as often as it can
    yield
    sys.setswitchinterval(old)


@pytest.mark.usefixtures("tight_switches")
async def test_steers_from_threads_each_reach_the_history_exactly_once() -> None:
    turns = 45

    ticks: list[int] = []

    @tool(effect="read_only")
    def tick(n: int) -> str:
        """One step."""
        ticks.append(n)
        return str(n)

    def answer(request: ScriptedRequest) -> ScriptedResponse:
        n = len(ticks)
        if n >= turns:
            return ScriptedResponse.text("done")
        return ScriptedResponse([ToolUsePart(f"c{n}", "tick", {"n": n})])

    worker = Worker(ScriptedClient(answer), tools=[tick], max_requests=100)
    stop = threading.Event()
    sent: list[list[str]] = [[], []]

    def hammer(who: int) -> None:
        i = 0
        while not stop.is_set() and i < 3000:
            text = f"t{who}-{i}"
            worker.steer(text)
            sent[who].append(text)
            i += 1

    threads = [threading.Thread(target=hammer, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    try:
        with anyio.fail_after(TIMEOUT):
            await worker.run("go")
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    steers, _ = worker.queued
    seen = [m.text for m in worker.history if m.role == "user" and m.text.startswith("t")]
    seen += [m.text for m in steers]
    expected = sent[0] + sent[1]
    assert len(seen) == len(set(seen))  # none twice
    assert sorted(seen) == sorted(expected)  # none lost
