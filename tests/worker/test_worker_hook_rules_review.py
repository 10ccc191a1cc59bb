"""Adversarial probes of the hook rules (issue #18): each rule crossed with cancellation,
pause / resume, a failing neighbour hook, hostile input and completion orders."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

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
from llm_worker.hooks import (
    Abort,
    Continue,
    Pause,
    Skip,
    ToolCallContext,
    ToolResultContext,
    TurnEndContext,
)
from llm_worker.state import Decision, RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools import ToolResult

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
SECRET = "hunter2"


def dump(worker: Worker) -> str:
    return repr([m.to_dict() for m in worker.history])


def sent(client: ScriptedClient, n: int) -> str:
    return repr([m.to_dict() for m in client.requests[n].messages])


def assert_answered(worker: Worker) -> None:
    """Every tool call in the history has exactly one result right after it."""
    for i, message in enumerate(worker.history):
        ids = [u.id for u in message.tool_uses]
        if ids:
            answer = worker.history[i + 1]
            assert [r.tool_use_id for r in answer.tool_results] == ids


class Gate:
    """Tools whose completion order the test decides: `first` finishes after `second`."""

    def __init__(self) -> None:
        self.second_done = anyio.Event()

    @tool(effect="read_only")
    async def first(self) -> str:
        """Finishes last."""
        await self.second_done.wait()
        return f"first SECRET={SECRET}"

    @tool(effect="read_only")
    async def second(self) -> str:
        """Finishes first."""
        self.second_done.set()
        return f"second SECRET={SECRET}"

    @tool(effect="read_only")
    async def third(self) -> str:
        """Finishes whenever."""
        return f"third SECRET={SECRET}"


def gated_script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [
                ToolUsePart("c1", "first", {}),
                ToolUsePart("c2", "second", {}),
                ToolUsePart("c3", "third", {}),
            ]
        ),
        ScriptedResponse.text("noted"),
        ScriptedResponse.text("ok"),
    ]


async def mask(ctx: ToolResultContext) -> None:
    ctx.result.content = ctx.result.content.replace(SECRET, "***")


# -- rule 1: a chain of three after hooks, the stopper at each position --------------------------


@pytest.mark.parametrize("early", [False, True])
@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("how", ["abort", "raise", "worker_cancel", "task_cancel", "wrong"])
async def test_a_stopped_after_chain_never_lets_the_secret_through(
    how: str, position: int, early: bool
) -> None:
    worker: Worker

    async def stopper(ctx: ToolResultContext) -> Any:
        if ctx.call.id != "c2":
            return None
        if how == "abort":
            return Abort("audit down")
        if how == "raise":
            raise RuntimeError("audit down")
        if how == "wrong":
            return Skip("not allowed here")
        if how == "worker_cancel":
            worker.cancel()
        else:
            scope.cancel()
        await anyio.sleep_forever()

    async def tag(ctx: ToolResultContext) -> None:
        ctx.result.content += " [seen]"

    chain = [tag, mask]
    chain.insert(position, stopper)
    gate = Gate()
    client = ScriptedClient(gated_script())
    worker = Worker(client, tools=[gate.first, gate.second, gate.third], early_tool_start=early)
    for hook in chain:
        worker.add_after_tool_call_hook(hook)
    with anyio.fail_after(TIMEOUT):
        with anyio.CancelScope() as scope:
            with contextlib.suppress(Aborted, HookError):
                await worker.run("read")
        assert_answered(worker)
        assert SECRET not in dump(worker)
        await worker.run("go on")
    body = sent(client, 1)
    assert SECRET not in body
    results = client.requests[1].messages[2].tool_results
    assert results[1].is_error and "after_tool_call" in results[1].content
    # c1's chain finished (mask included) only when the stopper comes after the mask.
    assert not results[2].content.startswith("third")


# -- rule 3: resume applies each rewrite once ----------------------------------------------------

RAN: list[str] = []


@tool(effect="side_effect")
def act(x: str) -> str:
    """Do something."""
    RAN.append(x)
    return f"did {x}"


async def bang(ctx: ToolCallContext) -> None:
    ctx.call.input["x"] += "!"


async def approve_on_resume(ctx: ToolCallContext) -> Pause | None:
    return None if ctx.resumed or ctx.call.input["x"] != "b!" else Pause("approve?")


def three_acts() -> ScriptedClient:
    return ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("c1", "act", {"x": "a"}),
                    ToolUsePart("c2", "act", {"x": "b"}),
                    ToolUsePart("c3", "act", {"x": "c"}),
                ]
            ),
            ScriptedResponse.text("ok"),
            ScriptedResponse.text("ok again"),
        ]
    )


async def test_a_pause_mid_batch_applies_each_rewrite_once_in_a_fresh_worker() -> None:
    RAN.clear()
    worker = Worker(three_acts(), tools=[act])
    worker.add_before_tool_call_hook(bang)
    worker.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
    assert paused.state is not None
    assert [p.status for p in paused.state.pending] == ["allowed", "pending", "pending"]
    saved = paused.state.to_json()
    client = ScriptedClient([ScriptedResponse.text("ok")])
    fresh = Worker(client, tools=[act])
    fresh.add_before_tool_call_hook(bang)
    fresh.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        result = await fresh.resume(PauseState.from_json(saved))
    assert result.status is RunStatus.FINISHED
    assert sorted(RAN) == ["a!", "b!", "c!"]
    assert [u.input for u in fresh.history[1].tool_uses] == [{"x": "a"}, {"x": "b"}, {"x": "c"}]


async def test_resuming_a_state_again_after_a_failed_resume_applies_after_rewrites_once() -> None:
    # The first resume fails in an after hook (a transient outage); the application retries
    # with the same state. The skipped call's result must not carry the first attempt's tag.
    fail = [True]

    async def skip_a(ctx: ToolCallContext) -> Skip | Pause | None:
        if ctx.call.input["x"] == "a":
            return Skip("no")
        return None if ctx.resumed else Pause("approve?")

    async def tag(ctx: ToolResultContext) -> None:
        ctx.result.content += " [audited]"

    async def flaky(ctx: ToolResultContext) -> None:
        if fail[0]:
            fail[0] = False
            raise RuntimeError("audit backend down")

    client = ScriptedClient(
        [
            ScriptedResponse(
                [ToolUsePart("c1", "act", {"x": "a"}), ToolUsePart("c2", "act", {"x": "b"})]
            ),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(skip_a)
    worker.add_after_tool_call_hook(tag)
    worker.add_after_tool_call_hook(flaky)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
    assert paused.state is not None
    state = paused.state
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError):
        await worker.resume(state)
    # The retry, in a fresh Worker (this one's history has moved past the pause).
    retry_client = ScriptedClient([ScriptedResponse.text("ok")])
    retry = Worker(retry_client, tools=[act])
    retry.add_after_tool_call_hook(tag)
    with anyio.fail_after(TIMEOUT):
        await retry.resume(state)
    first = retry_client.requests[0].messages[2].tool_results[0]
    assert first.content.count("[audited]") == 1, first.content


async def test_resuming_the_same_state_twice_in_one_worker_is_refused() -> None:
    RAN.clear()
    worker = Worker(three_acts(), tools=[act])
    worker.add_before_tool_call_hook(bang)
    worker.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
        assert paused.state is not None
        await worker.resume(paused.state)
    assert sorted(RAN) == ["a!", "b!", "c!"]
    history = list(worker.history)
    with anyio.fail_after(TIMEOUT), pytest.raises(PauseStateError, match="already"):
        await worker.resume(paused.state)
    assert sorted(RAN) == ["a!", "b!", "c!"]
    assert worker.history == history


async def test_resume_after_discard_pause_is_refused() -> None:
    RAN.clear()
    worker = Worker(three_acts(), tools=[act])
    worker.add_before_tool_call_hook(bang)
    worker.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
        assert paused.state is not None
        await worker.discard_pause("moved on")
        await worker.discard_pause("again")  # nothing left to discard: a no-op
    with anyio.fail_after(TIMEOUT), pytest.raises(PauseStateError, match="already"):
        await worker.resume(paused.state)
    assert RAN == []


# -- rule 4: handler objects for the completion events -------------------------------------------


async def test_an_async_completion_handler_is_refused_at_registration() -> None:
    async def log(text: str) -> None:
        raise AssertionError("never awaited")

    class AsyncHandler:
        def new_scope(self) -> None:
            return None

        async def on_event(self, scope: None, text: str, /) -> None:
            raise AssertionError("never awaited")

    worker = Worker(ScriptedClient([ScriptedResponse.text("hi")]))
    with pytest.raises(ConfigurationError, match="async"):
        worker.on_text_complete(log)
    with pytest.raises(ConfigurationError, match="async"):
        worker.on_tool_call_complete(AsyncHandler())  # pyright: ignore[reportArgumentType]


async def test_a_handler_class_instead_of_an_instance_is_refused_at_registration() -> None:
    class Logger:
        def new_scope(self) -> list[str]:
            return []

        def on_event(self, scope: list[str], text: str, /) -> None:
            scope.append(text)

    worker = Worker(ScriptedClient([]))
    with pytest.raises(ConfigurationError, match="instance"):
        worker.on_text_complete(Logger)  # pyright: ignore[reportArgumentType]


async def test_a_raising_completion_handler_fails_the_run_with_a_history_that_can_be_sent() -> None:
    def broken(call: Any) -> None:
        raise ValueError("ui gone")

    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})]),
            ScriptedResponse.text("ok"),
        ]
    )
    worker = Worker(client, tools=[act])
    worker.on_tool_call_complete(broken)
    with anyio.fail_after(TIMEOUT), pytest.raises(ValueError, match="ui gone"):
        await worker.run("act")
    assert_answered(worker)


# -- rule 5: hook results checked at run time ----------------------------------------------------


async def test_a_hook_returning_an_unawaited_coroutine_is_a_hook_error() -> None:
    async def inner(ctx: ToolCallContext) -> None:
        return None

    async def forgot_await(ctx: ToolCallContext) -> Any:
        return inner(ctx)

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})])])
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(forgot_await)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="await"):
        await worker.run("act")


async def test_a_result_class_instead_of_an_instance_is_a_hook_error() -> None:
    async def wrong(ctx: TurnEndContext) -> Any:
        return Continue

    worker = Worker(ScriptedClient([ScriptedResponse.text("hi")]))
    worker.add_on_turn_end_hook(wrong)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="on_turn_end"):
        await worker.run("go")


@pytest.mark.parametrize("value", [None, "masked", {"content": "x"}])
async def test_an_after_hook_that_puts_a_non_result_in_ctx_result_is_a_hook_error(
    value: object,
) -> None:
    async def replace(ctx: ToolResultContext) -> None:
        ctx.result = value  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})])])
    worker = Worker(client, tools=[act])
    worker.add_after_tool_call_hook(replace)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="replace"):
        await worker.run("act")
    assert_answered(worker)


async def test_an_after_hook_that_sets_non_text_content_is_a_hook_error() -> None:
    async def replace(ctx: ToolResultContext) -> None:
        ctx.result.content = {"masked": True}  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})])])
    worker = Worker(client, tools=[act])
    worker.add_after_tool_call_hook(replace)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="replace"):
        await worker.run("act")
    assert_answered(worker)


async def test_an_after_hook_result_for_another_call_keeps_the_pairing() -> None:
    async def replace(ctx: ToolResultContext) -> None:
        ctx.result = ToolResult.error("someone-else", "withheld")

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[act])
    worker.add_after_tool_call_hook(replace)
    with anyio.fail_after(TIMEOUT):
        with pytest.raises(HookError, match="c1"):
            await worker.run("act")
    assert_answered(worker)


@pytest.mark.parametrize("value", [None, ["a"], "x=a"])
async def test_a_before_hook_that_puts_non_object_arguments_gets_a_clear_result(
    value: object,
) -> None:
    async def rewrite(ctx: ToolCallContext) -> None:
        ctx.call.input = value  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(rewrite)
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match="rewrite"):
        await worker.run("act")
    assert_answered(worker)
    assert worker.history[1].tool_uses[0].input == {"x": "a"}


async def test_a_before_hook_that_changes_the_call_id_keeps_the_pairing() -> None:
    async def rewrite(ctx: ToolCallContext) -> None:
        ctx.call.id = "forged"

    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})]), ScriptedResponse.text("ok")]
    )
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(rewrite)
    RAN.clear()
    # Before, the tool ran and its result, filed under the forged id, was dropped: the model
    # read that the call "was interrupted before it returned".
    with anyio.fail_after(TIMEOUT), pytest.raises(HookError, match=r"call\.input only"):
        await worker.run("act")
    assert RAN == []
    assert_answered(worker)


# -- rule 6: run() after a pause, discard_pause --------------------------------------------------


async def test_an_on_turn_end_pause_blocks_run_and_stream_until_discarded() -> None:
    async def hold(ctx: TurnEndContext) -> Pause | None:
        return None if ctx.resumed else Pause("review the answer")

    client = ScriptedClient([ScriptedResponse.text("draft"), ScriptedResponse.text("next")])
    worker = Worker(client)
    worker.add_on_turn_end_hook(hold)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("write")
    assert paused.status is RunStatus.PAUSED
    with pytest.raises(PauseStateError, match="answer awaits"):
        await worker.run("more")
    with anyio.fail_after(TIMEOUT), pytest.raises(PauseStateError):
        async for _ in worker.stream("more"):
            pass
    with anyio.fail_after(TIMEOUT):
        await worker.discard_pause()
        await worker.discard_pause()
        worker.add_on_turn_end_hook(hold)
        result = await worker.run("more")
    assert result.status is RunStatus.PAUSED  # a new pause of a new answer
    assert [m.role for m in worker.history] == ["user", "assistant", "user", "assistant"]


async def test_an_after_hook_abort_in_discard_pause_leaves_a_history_that_can_be_sent() -> None:
    async def abort(ctx: ToolResultContext) -> Abort:
        assert ctx.outcome == "not_run"
        return Abort("no")

    worker = Worker(three_acts(), tools=[act])
    worker.add_before_tool_call_hook(bang)
    worker.add_before_tool_call_hook(approve_on_resume)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
    assert paused.state is not None
    worker.add_after_tool_call_hook(abort)
    with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
        await worker.discard_pause()
    assert_answered(worker)
    assert all(r.is_error for r in worker.history[-1].tool_results)


# -- rule 7: Decision.approve(input=...) validation -----------------------------------------------


@tool(effect="side_effect")
def configure(name: str, limits: dict[str, int], tags: list[str]) -> str:
    """Configure something."""
    RAN.append(f"{name} {limits} {tags}")
    return "configured"


async def paused_configure(hand_written: object | None = None) -> tuple[Worker, PauseState]:
    model = {"name": "svc", "limits": {"cpu": 2}, "tags": ["a"]}
    name = "configure" if hand_written is None else "raw"
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", name, model)]), ScriptedResponse.text("ok")]
    )
    tools: list[Any] = [configure] if hand_written is None else [hand_written]
    worker = Worker(client, tools=tools)

    async def ask(ctx: ToolCallContext) -> Pause | None:
        return None if ctx.resumed else Pause("approve?")

    worker.add_before_tool_call_hook(ask)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("configure")
    assert paused.state is not None
    return worker, paused.state


@pytest.mark.parametrize(
    "edit",
    [
        {"limits": {"cpu": "two"}},
        {"tags": "a"},
        {"tags": [1, {"x": 1}]},
        {"unknown": 1},
    ],
)
async def test_a_nested_merge_edit_that_breaks_the_schema_is_refused(edit: dict[str, Any]) -> None:
    RAN.clear()
    worker, state = await paused_configure()
    with pytest.raises(PauseStateError, match="c1"):
        await worker.resume(state, decisions={"c1": Decision.approve(input=edit, merge=True)})
    assert RAN == []


@pytest.mark.parametrize(
    "edit",
    ["name=svc", ["svc"], {"name": "svc", "limits": {"cpu": 2}, "tags": [b"a"]}, {1: "x"}],
)
async def test_an_edit_that_is_not_a_json_object_is_refused(edit: Any) -> None:
    RAN.clear()
    worker, state = await paused_configure()
    with pytest.raises(PauseStateError, match="c1"):
        await worker.resume(state, decisions={"c1": Decision.approve(input=edit)})
    assert RAN == []


class RawTool:
    """A hand-written tool with no schema at all."""

    name = "raw"
    description = "Does raw things."
    input_schema: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def execute(self, input_json: str) -> str:
        self.seen.append(input_json)
        return "raw done"


@pytest.mark.parametrize("edit", [{"x": {1, 2}}, {"x": object()}, {"x": float("nan")}])
async def test_non_json_values_in_an_edit_for_a_schemaless_tool_are_refused(edit: Any) -> None:
    raw = RawTool()
    worker, state = await paused_configure(raw)
    with pytest.raises(PauseStateError, match="JSON"):
        await worker.resume(state, decisions={"c1": Decision.approve(input=edit)})
    assert raw.seen == []


# -- rule 8: after hooks for every result, with its outcome --------------------------------------


async def test_outcomes_of_an_unknown_tool_a_bad_call_and_an_early_skip() -> None:
    async def skip_b(ctx: ToolCallContext) -> Skip | None:
        return Skip("no") if ctx.call.input.get("x") == "b" else None

    seen: list[tuple[str, str]] = []

    async def watch(ctx: ToolResultContext) -> None:
        seen.append((ctx.call.id, ctx.outcome))

    client = ScriptedClient(
        [
            ScriptedResponse(
                [
                    ToolUsePart("c1", "nope", {}),
                    ToolUsePart("c2", "act", {"x": 5}),
                    ToolUsePart("c3", "third", {"x": "b"}),
                    ToolUsePart("c4", "third", {}),
                ]
            ),
            ScriptedResponse.text("ok"),
        ]
    )
    gate = Gate()
    worker = Worker(client, tools=[act, gate.third], early_tool_start=True)
    worker.add_before_tool_call_hook(skip_b)
    worker.add_after_tool_call_hook(watch)
    with anyio.fail_after(TIMEOUT):
        await worker.run("go")
    assert seen == [("c1", "error"), ("c2", "error"), ("c3", "skipped"), ("c4", "done")]


# -- cancellation at each hook point --------------------------------------------------------------


@pytest.mark.parametrize(
    "point", ["on_message_send", "before_tool_call", "after_tool_call", "on_turn_end", "on_abort"]
)
@pytest.mark.parametrize("how", ["worker_cancel", "task_cancel"])
async def test_cancel_at_each_hook_point_leaves_a_history_the_next_run_can_send(
    point: str, how: str
) -> None:
    worker: Worker
    fired: list[str] = []

    async def stop(ctx: Any) -> None:
        fired.append(point)
        if len(fired) > 1:
            return  # the next run goes through
        if how == "worker_cancel":
            worker.cancel()
        else:
            scope.cancel()
        await anyio.sleep_forever()

    async def fail_once(ctx: TurnEndContext) -> Any:
        if point == "on_abort" and not fired:
            raise RuntimeError("to trigger on_abort")
        return None

    gate = Gate()
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "third", {}), ToolUsePart("c2", "third", {})]),
            ScriptedResponse.text("done"),
            ScriptedResponse.text("again"),
        ]
    )
    worker = Worker(client, tools=[gate.third])
    worker.add_after_tool_call_hook(mask)
    getattr(worker, f"add_{point}_hook")(stop)
    worker.add_on_turn_end_hook(fail_once)
    with anyio.fail_after(TIMEOUT):
        with anyio.CancelScope() as scope:
            with contextlib.suppress(HookError):
                await worker.run("go")
        assert fired[:1] == [point]
        assert_answered(worker)
        assert SECRET not in dump(worker)
        await worker.run("next")
    assert SECRET not in sent(client, len(client.requests) - 1)


async def test_worker_cancel_stops_a_hanging_on_abort_hook_of_a_cancelled_run() -> None:
    worker: Worker

    async def cancel_first(ctx: ToolCallContext) -> None:
        worker.cancel()
        await anyio.sleep_forever()

    async def hanging(ctx: Any) -> None:
        worker.cancel()  # the application gives up on the slow clean-up too
        await anyio.sleep_forever()

    client = ScriptedClient([ScriptedResponse([ToolUsePart("c1", "act", {"x": "a"})])])
    worker = Worker(client, tools=[act])
    worker.add_before_tool_call_hook(cancel_first)
    worker.add_on_abort_hook(hanging)
    with anyio.fail_after(TIMEOUT):
        result = await worker.run("act")
    assert result.status is RunStatus.CANCELLED
    assert_answered(worker)


@pytest.mark.anyio
async def test_a_call_never_decided_before_the_pause_is_not_seen_as_resumed() -> None:
    RAN.clear()
    seen: list[tuple[str, bool]] = []

    async def approval(ctx: ToolCallContext) -> Pause | None:
        seen.append((ctx.call.id, ctx.resumed))
        return None if ctx.resumed else Pause("approve?")

    worker = Worker(three_acts(), tools=[act])
    worker.add_before_tool_call_hook(approval)
    with anyio.fail_after(TIMEOUT):
        paused = await worker.run("act")
        assert paused.state is not None
        again = await worker.resume(paused.state)
    assert again.status is RunStatus.PAUSED  # c2 still needs its own approval
    assert RAN == []  # the batch waits whole
    assert again.state is not None
    with anyio.fail_after(TIMEOUT):
        done = await worker.resume(again.state, decisions={"c3": Decision.approve()})
    assert done.status is RunStatus.FINISHED
    assert sorted(RAN) == ["a", "b", "c"]
    # c1 paused, was seen again on resume; c2 was new the first time; c3, approved before the
    # hooks ever saw it, still goes through them once (resumed: decided), so a sanitizing
    # rewrite applies to it too.
    assert seen == [("c1", False), ("c1", True), ("c2", False), ("c2", True), ("c3", True)]
