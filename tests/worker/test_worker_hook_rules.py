"""What the hooks promise, exactly (issue #18): one test (or more) per rule.

- a result enters the history only after every after_tool_call hook has seen it;
- the history keeps the model's own call; the tool, the after hooks, the result and the
  events see the rewritten arguments;
- a resumed call's before_tool_call chain runs on the model's arguments, once;
- handler objects for on_text_complete / on_tool_call_complete;
- hook results checked at run time;
- run() after a pause, discard_pause();
- Decision.approve(input=) validated at resume();
- after hooks for every result, with its outcome.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import (
    Aborted,
    ConfigurationError,
    HookError,
    PauseState,
    PauseStateError,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.collectors import ToolCall
from llm_worker.hooks import (
    Abort,
    Continue,
    Finish,
    Pause,
    Skip,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
)
from llm_worker.state import Decision, RunStatus, ToolResultReady
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools import ToolResult

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
SECRET = "hunter2"


@tool(effect="read_only")
async def env(name: str) -> str:
    """Read a setting (its value is secret)."""
    return f"{name}=SECRET={SECRET}"


def two_env_calls() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [ToolUsePart("c1", "env", {"name": "A"}), ToolUsePart("c2", "env", {"name": "B"})]
        ),
        ScriptedResponse.text("noted"),
    ]


async def mask(ctx: ToolResultContext) -> None:
    ctx.result.content = ctx.result.content.replace(SECRET, "***")


def sent_text(client: ScriptedClient, n: int) -> str:
    """Everything request `n` carried, as text."""
    return repr([m.to_dict() for m in client.requests[n].messages])


# -- 1. a result enters the history only after every after hook has seen it --------------------


async def test_after_hook_abort_withholds_the_unmasked_results_from_the_next_run() -> None:
    async def abort_on_b(ctx: ToolResultContext) -> Abort | None:
        return Abort("stop") if ctx.call.input["name"] == "B" else None

    client = ScriptedClient([*two_env_calls(), ScriptedResponse.text("ok")])
    worker = Worker(client, tools=[env])
    worker.add_after_tool_call_hook(abort_on_b)
    worker.add_after_tool_call_hook(mask)
    with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
        await worker.run("read A and B")
    with anyio.fail_after(TIMEOUT):
        await worker.run("go on")
    assert SECRET not in sent_text(client, 1)
    first, second = client.requests[1].messages[2].tool_results
    assert first.content == "A=SECRET=***" and not first.is_error  # it got through every hook
    assert second.is_error and "after_tool_call" in second.content


async def test_after_hook_raising_withholds_the_result() -> None:
    async def broken(ctx: ToolResultContext) -> None:
        raise RuntimeError("logging backend down")

    client = ScriptedClient([*two_env_calls(), ScriptedResponse.text("ok")])
    worker = Worker(client, tools=[env])
    worker.add_after_tool_call_hook(broken)
    worker.add_after_tool_call_hook(mask)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError):
        await worker.run("read")
    assert SECRET not in repr([m.to_dict() for m in worker.history])
    results = worker.history[-1].tool_results
    assert [r.is_error for r in results] == [True, True]


async def test_cancel_while_after_hooks_run_withholds_unchecked_results() -> None:
    worker: Worker

    async def cancel_on_b(ctx: ToolResultContext) -> None:
        if ctx.call.input["name"] == "B":
            worker.cancel()
            await anyio.sleep_forever()

    client = ScriptedClient(two_env_calls())
    worker = Worker(client, tools=[env])
    worker.add_after_tool_call_hook(mask)
    worker.add_after_tool_call_hook(cancel_on_b)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("read")
    assert result.status is RunStatus.CANCELLED
    history = repr([m.to_dict() for m in worker.history])
    assert SECRET not in history
    first, second = worker.history[-1].tool_results
    assert first.content == "A=SECRET=***"
    assert second.is_error and "after_tool_call" in second.content


async def test_an_early_result_kept_over_a_pause_is_withheld_when_resume_aborts() -> None:
    # c1 ran while the answer streamed; c2 paused the batch; on resume an after hook aborts
    # before the masking hook saw c1's result.
    async def pause_b(ctx: ToolCallContext) -> Pause | None:
        return Pause("ask") if ctx.call.input["name"] == "B" and not ctx.resumed else None

    async def abort_on_a(ctx: ToolResultContext) -> Abort | None:
        return Abort("stop") if ctx.call.input["name"] == "A" else None

    worker = Worker(ScriptedClient(two_env_calls()), tools=[env], early_tool_start=True)
    worker.add_before_tool_call_hook(pause_b)
    worker.add_after_tool_call_hook(abort_on_a)
    worker.add_after_tool_call_hook(mask)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("read")
    assert paused.state is not None
    assert [p.status for p in paused.state.pending] == ["done", "pending"]
    state = PauseState.from_json(paused.state.to_json())
    with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
        await worker.resume(state)
    assert SECRET not in repr([m.to_dict() for m in worker.history])
    results = worker.history[-1].tool_results
    assert [r.is_error for r in results] == [True, True]
    assert all("after_tool_call" in r.content for r in results)


# -- 2. the history keeps the model's own call -------------------------------------------------


@tool(effect="read_only")
async def fetch(url: str, options: dict[str, Any]) -> str:
    """Fetch a page."""
    return f"fetched {url} with {sorted(options)}"


async def test_in_place_rewrites_reach_the_tool_not_the_history() -> None:
    async def rewrite(ctx: ToolCallContext) -> None:
        ctx.call.input["url"] = "https://proxy/" + ctx.call.input["url"]
        ctx.call.input["options"]["proxied"] = True  # nested, in place

    seen: list[dict[str, Any]] = []

    async def look(ctx: ToolResultContext) -> None:
        seen.append(dict(ctx.call.input))

    model_args = {"url": "a.com", "options": {"depth": 1}}
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "fetch", model_args)]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[fetch])
    worker.add_before_tool_call_hook(rewrite)
    worker.add_after_tool_call_hook(look)
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async for event in worker.stream("fetch"):
            events.append(event)
    assert worker.history[1].tool_uses[0].input == model_args
    assert client.requests[1].messages[1].tool_uses[0].input == model_args
    rewritten = {"url": "https://proxy/a.com", "options": {"depth": 1, "proxied": True}}
    assert seen == [rewritten]
    result = worker.history[2].tool_results[0]
    assert result.content == "fetched https://proxy/a.com with ['depth', 'proxied']"
    ready = [e.result for e in events if isinstance(e, ToolResultReady)]
    assert [r.input for r in ready] == [rewritten]


# -- 3. resume runs the before chain on the model's arguments, once ---------------------------

RAN: list[str] = []


@tool(effect="side_effect")
def act(x: str) -> str:
    """Do something."""
    RAN.append(x)
    return f"did {x}"


async def bang(ctx: ToolCallContext) -> None:
    ctx.call.input["x"] += "!"


async def approve_on_resume(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed else Pause("approve?")


async def test_a_rewrite_applies_once_across_pause_and_resume() -> None:
    RAN.clear()
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "act", {"x": "b"})]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(bang)
    worker.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
    assert paused.state is not None
    assert paused.state.pending[0].call.input == {"x": "b"}  # what the model sent
    state = PauseState.from_json(paused.state.to_json())
    with anyio.fail_after(TIMEOUT):
        result = await worker.resume(state)
    assert result.status is RunStatus.FINISHED
    assert RAN == ["b!"]
    assert worker.history[1].tool_uses[0].input == {"x": "b"}


# -- 4. handler objects for the completion events ------------------------------------------------


class TextLogger:
    def __init__(self) -> None:
        self.scopes = 0
        self.texts: list[tuple[int, str]] = []

    def new_scope(self) -> int:
        self.scopes += 1
        return self.scopes

    def on_event(self, scope: int, text: str, /) -> None:
        self.texts.append((scope, text))


class CallLogger:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def new_scope(self) -> None:
        return None

    def on_event(self, scope: None, call: ToolCall, /) -> None:
        self.calls.append(call.name)


async def test_handler_objects_receive_completed_texts_and_calls() -> None:
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "act", {"x": "y"})]),
            ScriptedResponse.text("done"),
        ]
    )
    worker = Worker(client, tools=[act])
    texts, calls = TextLogger(), CallLogger()
    worker.on_text_complete(texts)
    worker.on_tool_call_complete(calls)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("go")
    assert result.status is RunStatus.FINISHED
    assert texts.texts == [(1, "done")]
    assert calls.calls == ["act"]


async def test_a_handler_that_is_neither_form_is_refused_at_registration() -> None:
    worker = Worker(ScriptedClient([]))
    with pytest.raises(ConfigurationError, match="on_event"):
        worker.on_text_complete(object())  # pyright: ignore[reportArgumentType]
    with pytest.raises(ConfigurationError, match="on_event"):
        worker.on_tool_call_complete(42)  # pyright: ignore[reportArgumentType]


# -- 5. hook results are checked at run time ---------------------------------------------------


async def test_finish_from_before_tool_call_ends_the_run_with_a_hook_error() -> None:
    async def wrong(ctx: ToolCallContext) -> Any:
        return Finish()

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "act", {"x": "y"})])])
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(wrong)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError) as info:
        await worker.run("go")
    message = str(info.value)
    assert "wrong" in message and "before_tool_call" in message
    assert "Continue, Skip, Abort, Pause" in message
    assert info.value.kind == "before_tool_call"


async def test_continue_from_on_turn_end_ends_the_run_with_a_hook_error() -> None:
    async def wrong(ctx: TurnEndContext) -> Any:
        return Continue()

    worker = Worker(ScriptedClient([ScriptedResponse.text("hi")]))
    worker.add_on_turn_end_hook(wrong)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="Finish, ContinueWithMessages"):
        await worker.run("go")


# -- 6. run() after a pause --------------------------------------------------------------------


def paying_worker(*more: ScriptedResponse) -> tuple[Worker, ScriptedClient]:
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "act", {"x": "pay"})]),
            *more,
        ]
    )
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(approve_on_resume)
    return worker, client


async def test_run_after_a_pause_is_refused_and_changes_nothing() -> None:
    worker, _ = paying_worker()
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("pay")
    assert paused.status is RunStatus.PAUSED
    before = list(worker.history)
    with pytest.raises(PauseStateError, match="resume"):
        await worker.run("something else")
    assert worker.history == before


async def test_discard_pause_records_the_calls_as_not_run() -> None:
    RAN.clear()
    worker, client = paying_worker(ScriptedResponse.text("fine"))
    outcomes: list[str] = []

    async def watch(ctx: ToolResultContext) -> None:
        outcomes.append(ctx.outcome)

    worker.add_after_tool_call_hook(watch)
    with anyio.fail_after(TIMEOUT):
        await worker.run("pay")
        await worker.discard_pause("the user changed their mind")
        result = await worker.run("something else")
    assert result.status is RunStatus.FINISHED
    assert RAN == []
    answer = client.requests[1].messages[2].tool_results[0]
    assert answer.is_error
    assert "never started" in answer.content and "the user changed their mind" in answer.content
    assert "interrupted" not in answer.content
    assert outcomes == ["not_run"]


async def test_discard_pause_of_a_saved_state_in_a_fresh_worker() -> None:
    worker, _ = paying_worker()
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("pay")
    assert paused.state is not None
    saved = PauseState.from_json(paused.state.to_json())
    client = ScriptedClient([ScriptedResponse.text("ok")])
    fresh = Worker(client, tools=[act])
    with anyio.fail_after(TIMEOUT):
        await fresh.discard_pause(state=saved)
        await fresh.run("next")
    (answer,) = client.requests[0].messages[2].tool_results
    assert answer.is_error and "never started" in answer.content


# -- 7. Decision.approve(input=) is validated when resume() is called --------------------------


@tool(effect="side_effect")
def transfer(amount: int, to: str = "savings") -> str:
    """Move money."""
    RAN.append(f"{amount}->{to}")
    return f"moved {amount} to {to}"


async def paused_transfer() -> tuple[Worker, PauseState, ScriptedClient]:
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "transfer", {"amount": 5, "to": "bob"})]),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[transfer])
    worker.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("pay")
    assert paused.state is not None
    return worker, paused.state, client


async def test_an_invalid_edit_is_raised_to_the_caller_not_sent_to_the_model() -> None:
    worker, state, client = await paused_transfer()
    before = list(worker.history)
    bad = {"c1": Decision.approve(input={"amount": "lots"})}
    with pytest.raises(PauseStateError, match="amount"):
        await worker.resume(state, decisions=bad)
    assert worker.history == before
    assert len(client.requests) == 1


async def test_approve_input_replaces_and_merge_keeps_the_model_arguments() -> None:
    RAN.clear()
    worker, state, _ = await paused_transfer()
    with anyio.fail_after(TIMEOUT):
        await worker.resume(state, decisions={"c1": Decision.approve(input={"amount": 1})})
    worker, state, _ = await paused_transfer()
    with anyio.fail_after(TIMEOUT):
        merged = Decision.approve(input={"amount": 2}, merge=True)
        await worker.resume(state, decisions={"c1": merged})
    assert RAN == ["1->savings", "2->bob"]


# -- 8. after hooks see every result, with its outcome -------------------------------------------


@tool(effect="read_only")
async def boom() -> str:
    """Fails."""
    raise RuntimeError("nope")


async def test_after_hooks_see_skipped_denied_failed_and_done_results() -> None:
    async def skip_env(ctx: ToolCallContext) -> Skip | Pause | None:
        if ctx.call.name == "env":
            return Skip("not now")
        if ctx.call.name == "act" and not ctx.resumed:
            return Pause("ask")
        return None

    seen: list[tuple[str, str]] = []

    async def watch(ctx: ToolResultContext) -> None:
        seen.append((ctx.call.id, ctx.outcome))

    client = ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("c1", "env", {"name": "A"}),
                    ToolUsePart("c2", "boom", {}),
                    ToolUsePart("c3", "act", {"x": "1"}),
                    ToolUsePart("c4", "act", {"x": "2"}),
                ]
            ),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[env, boom, act])
    worker.add_before_tool_call_hook(skip_env)
    worker.add_after_tool_call_hook(watch)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("go")
        assert paused.state is not None
        await worker.resume(paused.state, decisions={"c4": Decision.deny("no")})
    assert seen == [("c1", "skipped"), ("c2", "error"), ("c3", "done"), ("c4", "denied")]


# -- seeds: ctx.tool's state, ToolResult constructors ------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.count = 0

    @tool(effect="idempotent")
    async def bump(self) -> str:
        """Count one."""
        self.count += 1
        return str(self.count)


async def test_a_hook_reaches_the_instance_of_a_method_tool() -> None:
    counter = Counter()
    seen: list[object] = []

    async def look(ctx: ToolCallContext) -> None:
        seen.append(ctx.instance)

    async def look_after(ctx: ToolResultContext) -> None:
        seen.append(ctx.instance)

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "bump", {})]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[counter.bump])
    worker.add_before_tool_call_hook(look)
    worker.add_after_tool_call_hook(look_after)
    with anyio.fail_after(TIMEOUT):
        await worker.run("go")
    assert seen == [counter, counter]
    assert counter.bump.instance is counter
    assert env.instance is None


async def test_tool_result_success_and_error_constructors() -> None:
    ok = ToolResult.success("c1", "fine", name="t")
    bad = ToolResult.error("c2", "broken")
    assert (ok.tool_use_id, ok.content, ok.is_error, ok.name) == ("c1", "fine", False, "t")
    assert (bad.tool_use_id, bad.content, bad.is_error) == ("c2", "broken", True)

    async def replace(ctx: ToolResultContext) -> None:
        ctx.result = ToolResult.error(ctx.call.id, "withheld by policy")

    client = ScriptedClient([*two_env_calls()])
    worker = Worker(client, tools=[env])
    worker.add_after_tool_call_hook(replace)
    with anyio.fail_after(TIMEOUT):
        await worker.run("go")
    results = worker.history[2].tool_results
    assert [(r.content, r.name) for r in results] == [("withheld by policy", "env")] * 2
