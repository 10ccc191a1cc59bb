"""A long run's per-request work stays flat: the history is checked only where it changed.

Not timed (timings flake on a shared machine): the per-message checks of `repair` are counted
instead. Before the incremental check, each request made two full passes (2 x history checks).
"""

from __future__ import annotations

import itertools

import pytest

from llm_worker import Message, TextPart, ToolResultPart, ToolUsePart, Worker, tool
from llm_worker.events import UsageEvent
from llm_worker.hooks import MessageSendContext
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.worker import _history

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=10, output_tokens=5)


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n} " + "x" * 40


def looping(turns: int) -> ScriptedClient:
    """One call of `read` per request, then a text answer at request `turns`."""

    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= turns - 1:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        return ScriptedResponse([ToolUsePart("", "read", {"n": request.index})], usage=USAGE)

    return ScriptedClient(step)


def assert_paired(messages: list[Message]) -> None:
    for i, message in enumerate(messages):
        if message.role == "assistant" and message.tool_uses:
            ids = [r.tool_use_id for r in messages[i + 1].tool_results]
            assert ids == [c.id for c in message.tool_uses]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of the per-message checks `repair` makes (one `_unique_calls` per message)."""
    counter = [0]
    real = _history._unique_calls  # pyright: ignore[reportPrivateUsage]

    def counted(message: Message) -> tuple[Message, int]:
        counter[0] += 1
        return real(message)

    monkeypatch.setattr(_history, "_unique_calls", counted)
    return counter


async def test_each_request_checks_only_what_is_new(checks: list[int]) -> None:
    turns = 300
    per_request: list[int] = []
    client = looping(turns)
    worker = Worker(client, tools=[read], max_requests=turns)

    def measured(ctx: MessageSendContext) -> None:
        per_request.append(checks[0])  # after the history's check, before the sent one

    worker.add_on_message_send_hook(measured)
    result = await worker.run("read every page")
    assert result.text == "done" and result.requests == turns
    assert len(worker.history) == 2 * turns
    made = [b - a for a, b in itertools.pairwise(per_request)]
    # Two checks (history, sent) of the few messages since the last request: constant,
    # where a full pass would check 2 x 600 messages by the end.
    assert max(made[10:]) <= 10, made[-5:]
    assert checks[0] <= 10 * turns
    assert_paired(client.requests[-1].messages)


async def test_runs_of_one_conversation_share_the_checks(checks: list[int]) -> None:
    client = ScriptedClient(
        lambda r: ScriptedResponse([TextPart(f"answer {r.index}")], usage=USAGE)
    )
    worker = Worker(client)
    for n in range(60):
        await worker.run(f"question {n}")
    before = checks[0]
    await worker.run("one more")
    assert checks[0] - before <= 10  # not the 120 messages again, though a new run


async def test_a_hook_that_drops_an_old_result_gets_a_full_check() -> None:
    turns = 40
    client = looping(turns)
    worker = Worker(client, tools=[read], max_requests=turns)

    def drop_third_result(ctx: MessageSendContext) -> None:
        if ctx.request_number == 30:  # replaces message 2 (the first results) with a text
            ctx.messages[2] = Message.user("results were here")

    worker.add_on_message_send_hook(drop_third_result)
    await worker.run("go")
    sent = client.requests[29].messages
    assert sent[2].tool_results and sent[2].tool_results[0].is_error  # synthesized
    assert "interrupted" in sent[2].tool_results[0].content
    assert_paired(sent)
    assert_paired(client.requests[30].messages)  # the next request: the history unchanged
    assert client.requests[30].messages[2] is worker.history[2]


async def test_a_hook_that_edits_the_last_message_in_place_is_seen() -> None:
    client = looping(6)
    worker = Worker(client, tools=[read])

    def steal_result(ctx: MessageSendContext) -> None:
        last = ctx.messages[-1]
        if ctx.request_number == 4 and last.tool_results:
            last.content[:] = [TextPart("gone")]  # in place: the history's message too

    worker.add_on_message_send_hook(steal_result)
    await worker.run("go")
    assert_paired(client.requests[3].messages)
    assert_paired(worker.history)


async def test_history_edited_between_runs_is_checked_again() -> None:
    client = looping(20)
    worker = Worker(client, tools=[read], max_requests=20)
    await worker.run("go")
    del worker.history[4]  # an old results message: its call is now unanswered
    await worker.run("and?")
    assert_paired(client.requests[-1].messages)
    assert_paired(worker.history)
    answer = worker.history[4].tool_results[0]
    assert answer.is_error and isinstance(answer, ToolResultPart)
