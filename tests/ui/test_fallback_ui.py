"""A run on a FallbackClient through the web adapters: a withdrawn answer's opaque data keeps
its own client's mark, and the answer after it carries the answering client's (so a history
the browser sends back never gives one provider's signature to another)."""

from __future__ import annotations

import re

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import OverloadedError
from llm_worker.messages import Origin, TextPart, ThinkingPart
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import to_agui_events, to_vercel_stream

pytestmark = pytest.mark.anyio

FIRST = Origin("alpha", "a-1")


def worker() -> Worker[str]:
    error = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
    broken = ScriptedResponse(
        [ThinkingPart("x", signature="sig-a"), TextPart("half")], fail_with=error
    )
    whole = ScriptedResponse([ThinkingPart("y", signature="sig-b"), TextPart("whole")])
    first = ScriptedClient([broken], provider=FIRST.provider, model=FIRST.model)
    second = ScriptedClient([whole], provider="beta", model="b-1")
    return Worker(FallbackClient([first, second], cooldown=Cooldown.disabled()))


_MARK = re.compile(r'"signature":"(sig-[ab])","origin":\{"provider":"([^"]+)","model":"([^"]+)"\}')


def origins_of(lines: list[str]) -> set[tuple[str, str, str]]:
    """(signature, provider, model) of every opaque value sent (nested JSON unescaped)."""
    found: set[tuple[str, str, str]] = set()
    for line in lines:
        for match in _MARK.finditer(line.replace('\\"', '"')):
            found.add((match[1], match[2], match[3]))
    return found


async def test_vercel_stream_marks_each_answer_with_the_client_that_streamed_it() -> None:
    with anyio.fail_after(5):
        lines = [
            line
            async for line in to_vercel_stream(worker().stream("go"), message_id="m1", origin=FIRST)
        ]
    assert origins_of(lines) == {("sig-a", "alpha", "a-1"), ("sig-b", "beta", "b-1")}


async def test_agui_events_mark_the_answer_with_the_client_that_streamed_it() -> None:
    with anyio.fail_after(5):
        events = to_agui_events(worker().stream("go"), thread_id="t", run_id="r", origin=FIRST)
        lines = [line async for line in events]
    # The snapshot of the conversation holds the answer that completed, marked as beta's.
    assert origins_of(lines) == {("sig-a", "alpha", "a-1"), ("sig-b", "beta", "b-1")}
