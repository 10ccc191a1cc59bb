"""No history a provider rejects: the bodies each provider receives after things went wrong.

Every provider answers HTTP 400 to a history in which a tool call has no result right after
it, a result answers no call, or a call is answered twice. Histories get that way through a
crash, a cancelled run, a skipped call, a call denied on resume, or a history loaded from
elsewhere. For each provider and each of those, the Worker runs against the scripted model
over the real wire, and the body the server received is read in that provider's own shape by
`support.wire_bodies`, which fails on any unpaired, duplicated or misordered result.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from llm_worker import (
    Decision,
    Message,
    Request,
    RunStatus,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    Worker,
    messages_from_json,
    messages_to_json,
    providers,
    tool,
)
from llm_worker.hooks import Skip, ToolCallContext
from llm_worker.testing import WIRE_PROVIDERS, ScriptedResponse
from support.e2e import (
    PROVIDERS,
    TIMEOUT,
    Desk,
    run_paused_then_resumed,
    serve,
    worker_options,
)
from support.wire_bodies import Exchange, assert_failed, assert_valid

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("provider", PROVIDERS)]

TWO_CALLS = [
    TextPart("Checking both."),
    ToolUsePart("call_1", "lookup", {"city": "Oslo"}),
    ToolUsePart("call_2", "lookup", {"city": "Rome"}),
]
FINAL = ScriptedResponse.text("All set.")


def _texts(body: dict[str, Any]) -> str:
    return orjson.dumps(body).decode()


async def _run_on(provider: str, history: list[Message], prompt: str) -> dict[str, Any]:
    """Run a Worker holding `history` on `prompt`; the body the provider received."""
    async with serve(provider, [FINAL]) as wire:
        worker = Worker(wire.client(), tools=Desk().tools(), history=history)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run(prompt)
        assert result.status is RunStatus.FINISHED
        return wire.body(0)


async def test_crash_left_a_call_without_a_result(provider: str) -> None:
    # Saved mid-batch: Oslo's result made it to disk, Rome's call never returned.
    saved = messages_to_json(
        [
            Message.user("Weather in Oslo and Rome?"),
            Message("assistant", list(TWO_CALLS)),
            Message("user", [ToolResultPart("call_1", "Oslo: 3 C", name="lookup")]),
        ]
    )
    body = await _run_on(provider, messages_from_json(saved), "Are you still there?")

    [step] = assert_valid(provider, body)
    assert [c.name for c in step.calls] == ["lookup", "lookup"]
    assert step.results[0].output == "Oslo: 3 C"
    assert step.results[0].is_error is not True
    assert_failed(step.results[1], "No result: the call was interrupted")
    assert "Are you still there?" in _texts(body)


async def test_cancelled_run_during_a_slow_tool(provider: str) -> None:
    started = anyio.Event()

    # Exclusive: it runs after the batch's other calls finished, so the cut is deterministic.
    @tool(exclusive=True)
    async def stall() -> str:
        """Never returns."""
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    first = ScriptedResponse(
        [ToolUsePart("call_1", "lookup", {"city": "Oslo"}), ToolUsePart("call_2", "stall", {})]
    )
    async with serve(provider, [first, FINAL]) as wire:
        worker = Worker(wire.client(), tools=[*Desk().tools(), stall], **worker_options(provider))
        outcome: list[Any] = []

        async def drive() -> None:
            outcome.append(await worker.run("Weather in Oslo, then stall."))

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(drive)
                await started.wait()
                worker.cancel()
            assert outcome[0].status is RunStatus.CANCELLED
            result = await worker.run("Try again without stalling.")
        assert result.status is RunStatus.FINISHED
        assert wire.count == 2
        body = wire.body(1)

    [step] = assert_valid(provider, body)
    assert [c.name for c in step.calls] == ["lookup", "stall"]
    assert step.results[0].output == "Oslo: 21 C, clear"
    assert_failed(step.results[1], "No result: the call of 'stall' was cancelled while it ran")


async def test_skipped_call(provider: str) -> None:
    async def not_rome(ctx: ToolCallContext) -> Skip | None:
        return Skip("Rome is off limits") if ctx.call.input.get("city") == "Rome" else None

    desk = Desk()
    async with serve(provider, [ScriptedResponse(list(TWO_CALLS)), FINAL]) as wire:
        worker = Worker(wire.client(), tools=desk.tools(), **worker_options(provider))
        worker.add_before_tool_call_hook(not_rome)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Weather in Oslo and Rome?")
        assert result.status is RunStatus.FINISHED
        body = wire.body(1)

    [step] = assert_valid(provider, body)
    assert desk.ran == [("lookup", {"city": "Oslo"})]
    assert step.results[0].output == "Oslo: 21 C, clear"
    assert_failed(step.results[1], "Skipped: a before_tool_call hook did not let this call run")
    assert "Rome is off limits" in step.results[1].output


async def test_call_denied_on_resume(provider: str) -> None:
    first = [
        TextPart("Checking."),
        ToolUsePart("call_1", "lookup", {"city": "Oslo"}),
        ToolUsePart("call_2", "explode", {"reason": "dangerous"}),
    ]
    run = await run_paused_then_resumed(
        provider, first, model="scripted-model", decisions={"1": Decision.deny("not today")}
    )

    assert run.result.status is RunStatus.FINISHED
    assert run.desk.ran == [("lookup", {"city": "Oslo"})]  # the denied call never ran
    [step] = run.steps
    assert step.results[0].output == "Oslo: 21 C, clear"
    assert_failed(step.results[1], "Denied: not today")


async def test_history_from_json_with_an_orphan_and_a_duplicate_result(provider: str) -> None:
    saved = messages_to_json(
        [
            Message.user("Weather in Oslo?"),
            Message("assistant", [ToolUsePart("call_1", "lookup", {"city": "Oslo"})]),
            Message(
                "user",
                [
                    ToolResultPart("call_1", "Oslo: 3 C", name="lookup"),
                    ToolResultPart("call_1", "Oslo: duplicate", name="lookup"),
                    ToolResultPart("call_ghost", "a stale result", name="lookup"),
                ],
            ),
            Message.assistant("It is 3 C in Oslo."),
            Message("user", [ToolResultPart("call_orphan", "answers nothing", name="lookup")]),
            Message.assistant("Anything else?"),
        ]
    )
    body = await _run_on(provider, messages_from_json(saved), "And in Rome?")

    steps: list[Exchange] = assert_valid(provider, body)
    assert [[r.output for r in s.results] for s in steps] == [["Oslo: 3 C"]]
    text = _texts(body)
    for dropped in ("Oslo: duplicate", "a stale result", "answers nothing"):
        assert dropped not in text
    assert "It is 3 C in Oslo." in text
    assert "And in Rome?" in text


_ASKED = Message.user("Weather in Oslo?")
_CALLS = Message(
    "assistant",
    [ToolUsePart("call_1", "lookup", {"city": "Oslo"}), ToolUsePart("call_2", "explode", {})],
)
_ONE_CALL = Message("assistant", [ToolUsePart("call_1", "lookup", {"city": "Oslo"})])
_OSLO = ToolResultPart("call_1", "Oslo: 3 C", name="lookup")
_BOOM = ToolResultPart("call_2", "boom", is_error=True, name="explode")
BROKEN = {
    "missing": [_ASKED, _CALLS, Message("user", [_OSLO])],
    "swapped": [_ASKED, _CALLS, Message("user", [_BOOM, _OSLO])],
    "duplicate": [_ASKED, _ONE_CALL, Message("user", [_OSLO, _OSLO])],
    "orphan": [
        _ASKED,
        Message.assistant("Hello."),
        Message("user", [ToolResultPart("ghost", "stale", name="lookup"), TextPart("Hi?")]),
    ],
    "unanswered_last": [_ASKED, _ONE_CALL],
}


@pytest.mark.parametrize("fault", sorted(BROKEN))
async def test_the_checker_rejects_what_the_provider_would(provider: str, fault: str) -> None:
    # The checker's own control: histories the Worker never sends, built into this provider's
    # body by its real request builder (no repair), must fail the check.
    client_class = getattr(providers, WIRE_PROVIDERS[provider][0])
    async with client_class(model="m", api_key="k", base_url="http://127.0.0.1:9") as client:
        body = client.build_body(Request(BROKEN[fault]))
    with pytest.raises(AssertionError):
        assert_valid(provider, body)
