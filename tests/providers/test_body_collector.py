"""A long history's request body is built and encoded with the cyclic collector paused (issue 32).

Built under the collector, the thousands of dicts and lists of a 2,000-message body set off a
dozen passes per request that walked the body being built and moved it into the older
generations, whose growth then set off full passes over the whole heap. The pause must hold
for the build, end with it (the collector on again, whatever happened), and keep a caller's
own `gc.disable()`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import anyio
import orjson
import pytest

from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import Message, Request, TextPart, ToolResultPart, ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

WIRES = ("anthropic", "gemini", "openai_chat", "openai_responses")


def long_history(turns: int = 300) -> list[Message]:
    """A long run's history: a tool call and its 400-character result per turn."""
    messages = [Message("user", [TextPart("read every page")])]
    for n in range(turns):
        call = ToolUsePart(f"call_{n}", "read", {"n": n})
        messages.append(Message("assistant", [call]))
        messages.append(Message("user", [ToolResultPart(f"call_{n}", "r" * 400)]))
    return messages


class Passes:
    """The collector's passes that start while `watching` is set."""

    def __init__(self) -> None:
        self.watching = False
        self.started = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and self.watching:
            self.started += 1


@pytest.fixture
def passes() -> Iterator[Passes]:
    watch = Passes()
    gc.callbacks.append(watch)
    try:
        yield watch
    finally:
        gc.callbacks.remove(watch)
        gc.enable()


def watched_build(client: Any, passes: Passes, seen: list[bool]) -> None:
    """Wrap the client's build_body: note whether the collector was on, count passes in it."""
    build = client.build_body

    def build_body(request: Request) -> dict[str, Any]:
        seen.append(gc.isenabled())
        passes.watching = True
        try:
            return build(request)
        finally:
            passes.watching = False

    client.build_body = build_body


@pytest.mark.parametrize("wire", WIRES)
async def test_no_collector_pass_runs_while_a_long_body_is_built(
    wire: str, http_transport: str, passes: Passes
) -> None:
    assert gc.isenabled()
    async with (
        ScriptedModelServer(wire, ScriptedResponse.text("done")) as server,
        server.client() as client,
    ):
        seen: list[bool] = []
        watched_build(client, passes, seen)
        history = long_history()
        with anyio.fail_after(60):
            text = [e async for e in client.stream(Request(history))]
        assert text  # answered
        assert seen == [False]  # built once, with the collector paused
        # Built under the collector, 2,000 messages' dicts and lists set off passes here.
        assert passes.started == 0
        assert gc.isenabled()  # on again once the body was sent
        # The server got the whole history, as built: each result once, the last call too.
        assert len(server.requests) == 1
        sent = orjson.dumps(server.requests[0].json())
        assert sent.count(b"r" * 400) == 300
        assert b"call_299" in sent or wire == "gemini"  # Gemini's calls carry no id


@pytest.mark.parametrize("wire", WIRES)
async def test_the_collector_is_on_again_after_a_body_that_cannot_be_sent(
    wire: str, passes: Passes
) -> None:
    async with (
        ScriptedModelServer(wire, ScriptedResponse.text("x")) as server,
        server.client() as client,
    ):
        bad = [*long_history(10), Message("user", [TextPart("bad \udc80 name")])]
        with anyio.fail_after(30), pytest.raises(InvalidMessagesError):
            async for _ in client.stream(Request(bad)):
                pass
        assert gc.isenabled()

        def failing(request: Request) -> dict[str, Any]:
            raise RuntimeError("a build that fails")

        client.build_body = failing  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="a build that fails"):
            client.stream(Request(long_history(10)))
        assert gc.isenabled()
        assert server.requests == []  # nothing was sent


async def test_a_caller_who_turned_the_collector_off_keeps_it_off(passes: Passes) -> None:
    async with (
        ScriptedModelServer("openai_chat", ScriptedResponse.text("x")) as server,
        server.client() as client,
    ):
        gc.disable()  # the caller's own choice (the fixture turns it on again)
        with anyio.fail_after(30):
            async for _ in client.stream(Request(long_history(10))):
                pass
        assert not gc.isenabled()
        assert len(server.requests) == 1
