"""End-to-end runs of the Worker over a scripted model speaking a provider's real wire format.

The runs here are shared by the per-provider tests in `tests/e2e/`: each provider file scripts
its own first answer (thinking, signatures and ids as that provider streams them) and checks
the request bodies in that provider's exact shape; the loop, the hooks and the pause / resume
round trip are the same everywhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from llm_worker import (
    Decision,
    Message,
    PauseState,
    RunResult,
    RunStatus,
    ThinkingConfig,
    ToolUsePart,
    UsageEvent,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, Skip, ToolCallContext
from llm_worker.messages import Part
from llm_worker.testing import Chunking, ScriptedModelServer, ScriptedResponse, ScriptStep
from support.wire_bodies import Exchange, assert_valid

__all__ = (
    "FINAL_TEXT",
    "FIRST_USAGE",
    "PROVIDERS",
    "SECOND_USAGE",
    "TIMEOUT",
    "Desk",
    "LoopRun",
    "Wire",
    "calls_of",
    "run_paused_then_resumed",
    "run_tool_loop",
    "run_with_skip",
    "serve",
    "worker_options",
)

TIMEOUT = 10.0
"""Seconds any one run may take; far above what it needs (tens of milliseconds)."""

PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")

FIRST_USAGE = UsageEvent(input_tokens=120, output_tokens=45, total_tokens=165)
SECOND_USAGE = UsageEvent(input_tokens=210, output_tokens=12, total_tokens=222)
FINAL_TEXT = "Kyoto is clear at 21 C; the other call failed."


class Desk:
    """The tools of the scripted conversations, recording what ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    @tool
    async def lookup(self, city: str) -> str:
        """Look up the weather of a city."""
        self.ran.append(("lookup", {"city": city}))
        return f"{city}: 21 C, clear"

    @tool
    async def explode(self, reason: str) -> str:
        """A tool that always fails."""
        self.ran.append(("explode", {"reason": reason}))
        raise RuntimeError(f"boom: {reason}")

    def tools(self) -> list[Any]:
        """The bound tools, to register with a Worker."""
        return [self.lookup, self.explode]


@dataclass(slots=True)
class Wire:
    """A scripted model server and the clients made for it (closed when `serve` ends)."""

    server: ScriptedModelServer
    clients: list[Any] = field(default_factory=lambda: [])

    def client(self) -> Any:
        """A new real client of the provider, pointed at the server."""
        client = self.server.client()
        self.clients.append(client)
        return client

    def body(self, n: int) -> dict[str, Any]:
        """The JSON body of the n-th request the server received."""
        return self.server.requests[n].json()

    @property
    def count(self) -> int:
        """Requests received so far."""
        return len(self.server.requests)


@asynccontextmanager
async def serve(
    provider: str, script: Sequence[ScriptStep], *, model: str = "scripted-model"
) -> AsyncIterator[Wire]:
    """Run a `ScriptedModelServer` for `provider` playing `script`.

    The answers are written in random pieces (reproducibly), so events and UTF-8 sequences
    are split across network reads as real streams split them.
    """
    server = ScriptedModelServer(
        provider, script, model=model, chunking=Chunking.random(seed=7, max_size=48)
    )
    wire = Wire(server)
    async with wire.server:
        try:
            yield wire
        finally:
            for client in wire.clients:
                await client.aclose()


def worker_options(provider: str) -> dict[str, Any]:
    """Thinking settings under which each provider streams and wants back its opaque data.

    Responses runs with `store: false`, where the reasoning item can be replayed only with its
    encrypted content: the strictest case; it asks for the reasoning summary it streams.
    """
    if provider == "openai_responses":
        thinking = ThinkingConfig(effort="low", include_thoughts=True)
        return {"thinking": thinking, "options": {"store": False}}
    if provider == "openai_chat":
        return {"thinking": ThinkingConfig(effort="low")}
    return {"thinking": ThinkingConfig(budget_tokens=1024)}


def _script(first: list[Part]) -> list[ScriptStep]:
    return [
        ScriptedResponse(first, usage=FIRST_USAGE),
        ScriptedResponse.text(FINAL_TEXT, usage=SECOND_USAGE),
    ]


@dataclass(slots=True)
class LoopRun:
    """What one scripted run left behind."""

    result: RunResult
    history: list[Message]
    bodies: list[dict[str, Any]]
    steps: list[Exchange]
    desk: Desk
    state_json: str = ""


async def run_tool_loop(provider: str, first: list[Part], *, model: str) -> LoopRun:
    """Answer 1 is `first` (calls of `lookup` and `explode`), answer 2 a final text."""
    desk = Desk()
    async with serve(provider, _script(first), model=model) as wire:
        worker = Worker(wire.client(), tools=desk.tools(), **worker_options(provider))
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("What is the weather in Kyoto?")
        bodies = [wire.body(n) for n in range(wire.count)]
    return LoopRun(result, worker.history, bodies, assert_valid(provider, bodies[-1]), desk)


async def run_with_skip(provider: str, first: list[Part], *, model: str) -> LoopRun:
    """As `run_tool_loop`, with a before_tool_call hook that skips every `lookup` call."""
    desk = Desk()

    async def no_lookups(ctx: ToolCallContext) -> Skip | None:
        return Skip("lookups are off today") if ctx.call.name == "lookup" else None

    async with serve(provider, _script(first), model=model) as wire:
        worker = Worker(wire.client(), tools=desk.tools(), **worker_options(provider))
        worker.add_before_tool_call_hook(no_lookups)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("What is the weather in Kyoto?")
        bodies = [wire.body(n) for n in range(wire.count)]
    return LoopRun(result, worker.history, bodies, assert_valid(provider, bodies[-1]), desk)


async def _ask_a_person(ctx: ToolCallContext) -> Pause | None:
    # Pauses on the failing tool's call; a resumed run lets it through.
    if ctx.call.name == "explode" and not ctx.resumed:
        return Pause("a person must approve explode")
    return None


async def run_paused_then_resumed(
    provider: str,
    first: list[Part],
    *,
    model: str,
    decisions: dict[str, Decision] | None = None,
) -> LoopRun:
    """Pause at the `explode` call; resume from the state's JSON in a new Worker and client.

    The resuming Worker has fresh tools and a fresh client, as in another process after a
    restart; `decisions` (by call index as a string, e.g. `{"1": Decision.deny()}`) are mapped
    to the paused call ids.
    """
    desk = Desk()
    async with serve(provider, _script(first), model=model) as wire:
        pausing = Worker(wire.client(), tools=Desk().tools(), **worker_options(provider))
        pausing.add_before_tool_call_hook(_ask_a_person)
        with anyio.fail_after(TIMEOUT):
            paused = await pausing.run("What is the weather in Kyoto?")
        assert paused.status is RunStatus.PAUSED, paused
        assert paused.state is not None
        assert wire.count == 1
        saved = paused.state.to_json()
        state = PauseState.from_json(saved)
        assert state.to_dict() == paused.state.to_dict()
        ids = [p.call.id for p in state.pending]
        resuming = Worker(wire.client(), tools=desk.tools(), **worker_options(provider))
        resuming.add_before_tool_call_hook(_ask_a_person)
        chosen = {ids[int(k)]: d for k, d in (decisions or {}).items()}
        with anyio.fail_after(TIMEOUT):
            result = await resuming.resume(state, decisions=chosen)
        bodies = [wire.body(n) for n in range(wire.count)]
    steps = assert_valid(provider, bodies[-1])
    return LoopRun(result, resuming.history, bodies, steps, desk, state_json=saved)


def calls_of(history: Sequence[Message]) -> list[ToolUsePart]:
    """Every tool call of a history, in order."""
    return [p for m in history for p in m.tool_uses]
