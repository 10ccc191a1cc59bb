"""The scripted model and the child processes the multi-process durable tests share."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from llm_worker import TextPart, ToolUsePart
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedRequest, ScriptedResponse

CHILD = Path(__file__).with_name("child.py")
USAGE = UsageEvent(input_tokens=10, output_tokens=5, total_tokens=15)


@dataclass
class Model:
    """Answers by the conversation, so a recovered run gets the answer its step expects.

    Each run (its input is its id) calls `append_line`, then (`steps=3`) `read_log`, then
    answers `done <id>`. A run whose id starts with `pay` calls `pay` (which needs an
    approval), then answers. A run whose id starts with `nest` hands `pay<id>` to its
    sub-agent (`delegate`), then answers. `seen` keeps (run id, step) of every request received.
    """

    steps: int = 3
    slow_step: int | None = None  # this step's first answer streams slowly
    seen: list[tuple[str, int]] = field(default_factory=lambda: [])
    arrived: dict[tuple[str, int], anyio.Event] = field(default_factory=lambda: {})
    counts: dict[int, anyio.Event] = field(default_factory=lambda: {})

    def event(self, run: str, step: int) -> anyio.Event:
        return self.arrived.setdefault((run, step), anyio.Event())

    def received(self, count: int) -> anyio.Event:
        """Set once `count` requests have arrived."""
        event = self.counts.setdefault(count, anyio.Event())
        if len(self.seen) >= count:
            event.set()
        return event

    def __call__(self, call: ScriptedRequest) -> ScriptedResponse:
        run = call.request.messages[0].text
        step = sum(len(m.tool_results) for m in call.request.messages)
        slow = step == self.slow_step and (run, step) not in self.seen
        self.seen.append((run, step))
        self.event(run, step).set()
        for count, event in self.counts.items():
            if len(self.seen) >= count:
                event.set()
        if run.startswith("nest") and step == 0:  # the root hands the task to its sub-agent
            handed = ToolUsePart(f"{run}-d", "delegate", {"input": f"pay{run}"})
            return ScriptedResponse([handed], usage=USAGE)
        if step == self.steps - 1 or (run.startswith(("pay", "nest")) and step == 1):
            return ScriptedResponse.text(f"done {run}", usage=USAGE)
        if run.startswith("pay"):
            part = ToolUsePart(f"{run}-p", "pay", {"amount": 5})
        elif step == 0:
            part = ToolUsePart(f"{run}-a", "append_line", {"text": run})
        else:
            part = ToolUsePart(f"{run}-r", "read_log", {})
        if slow:  # long enough to kill the process while the answer streams
            return ScriptedResponse(
                [TextPart("x" * 400), part], usage=USAGE, chunk_size=4, delay=0.05
            )
        return ScriptedResponse([part], usage=USAGE)


@dataclass
class Child:
    process: Process
    lines: AsyncIterator[str]

    async def next(self, within: float = 60.0) -> dict[str, Any]:
        with anyio.fail_after(within):
            while True:
                line = await anext(self.lines)
                if line.startswith("{"):
                    data: dict[str, Any] = json.loads(line)
                    return data

    async def until(self, key: str, within: float = 60.0) -> dict[str, Any]:
        with anyio.fail_after(within):
            while True:
                data = await self.next(within)
                if key in data:
                    return data

    async def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(f"{line}\n".encode())

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


async def _lines(stream: Any) -> AsyncIterator[str]:
    buffer = ""
    async for chunk in TextReceiveStream(stream):
        buffer += chunk
        *done, buffer = buffer.split("\n")
        for line in done:
            yield line


@asynccontextmanager
async def child(config: dict[str, Any], script: Path = CHILD) -> AsyncIterator[Child]:
    """A child process serving durable runs (child.py, or `script`); killed when the block ends."""
    env = {**os.environ, "PYTHONPATH": str(CHILD.parent.parent)}
    process = await anyio.open_process(
        [sys.executable, str(script), json.dumps(config)], env=env, stderr=None
    )
    assert process.stdout is not None
    try:
        yield Child(process, _lines(process.stdout))
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.fail_after(30):
            await process.wait()
        await process.aclose()
