"""Interceptors wrap every run, request and tool call; a recorded answer replaces a request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest

from llm_worker import Aborted, Message, ToolUsePart, Worker, tool
from llm_worker.hooks import Abort, ToolCallContext
from llm_worker.state import RunResult, RunStatus
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools import ToolResult
from llm_worker.worker._assembler import Assembler
from llm_worker.worker._intercept import Interceptor, RequestStep, RunStep, ToolStep

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    ran.append(f"add({a},{b})")
    return a + b


class Recorder(Interceptor):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def run(self, step: RunStep, proceed: Callable[[], Awaitable[RunResult]]) -> RunResult:
        self.log.append(f"{self.name} run >")
        try:
            return await proceed()
        finally:
            self.log.append(f"{self.name} run <")

    async def request(
        self, step: RequestStep, proceed: Callable[[], Awaitable[Assembler]]
    ) -> Assembler:
        self.log.append(f"{self.name} request {step.number} >")
        answer = await proceed()
        self.log.append(f"{self.name} request {step.number} < {len(answer.calls)} calls")
        return answer

    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        self.log.append(f"{self.name} tool {step.call.name} {step.call.input} of {step.request}")
        return await proceed()


def script() -> ScriptedClient:
    return ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "add", {"a": 1, "b": 2})]),
            ScriptedResponse.text("3"),
        ]
    )


async def test_interceptors_nest_first_registered_outermost_around_every_step() -> None:
    log: list[str] = []
    worker = Worker(script(), tools=[add])
    worker._cfg.interceptors += [Recorder("outer", log), Recorder("inner", log)]  # pyright: ignore[reportPrivateUsage]
    result = await worker.run("1+2?")
    assert result.text == "3"
    assert log == [
        "outer run >",
        "inner run >",
        "outer request 1 >",
        "inner request 1 >",
        "inner request 1 < 1 calls",
        "outer request 1 < 1 calls",
        "outer tool add {'a': 1, 'b': 2} of 1",
        "inner tool add {'a': 1, 'b': 2} of 1",
        "outer request 2 >",
        "inner request 2 >",
        "inner request 2 < 0 calls",
        "outer request 2 < 0 calls",
        "inner run <",
        "outer run <",
    ]


class Replayer(Interceptor):
    """Answers each request and tool call from a record of an earlier run, where it has one."""

    def __init__(self) -> None:
        self.answers: dict[int, Assembler] = {}
        self.results: dict[str, ToolResult] = {}
        self.streamed = 0

    async def request(
        self, step: RequestStep, proceed: Callable[[], Awaitable[Assembler]]
    ) -> Assembler:
        if step.number in self.answers:
            return self.answers[step.number]
        self.streamed += 1
        self.answers[step.number] = answer = await proceed()
        return answer

    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        if step.call.id not in self.results:
            self.results[step.call.id] = await proceed()
        return self.results[step.call.id]


@pytest.mark.parametrize("early", [False, True])
async def test_a_recorded_answer_skips_the_stream_and_its_calls_still_run_through_hooks(
    early: bool,
) -> None:
    replayer = Replayer()
    first = Worker(script(), tools=[add], early_tool_start=early)
    first._cfg.interceptors.append(replayer)  # pyright: ignore[reportPrivateUsage]
    ran.clear()
    await first.run("1+2?")
    assert (replayer.streamed, ran) == (2, ["add(1,2)"])

    seen: list[str] = []
    empty = ScriptedClient([])  # any request that reached the client would fail the run
    second = Worker(empty, tools=[add], early_tool_start=early)
    second._cfg.interceptors.append(replayer)  # pyright: ignore[reportPrivateUsage]
    second.add_before_tool_call_hook(lambda ctx: seen.append(ctx.call.id))
    texts: list[str] = []
    second.on_text_complete(texts.append)
    result = await second.run("1+2?")
    assert result.status is RunStatus.FINISHED
    assert result.text == "3"
    assert ran == ["add(1,2)"]  # the tool did not run again
    assert seen == ["c1"]  # the hooks still saw the recorded call
    assert texts == []  # a recorded answer streams nothing
    assert [m.role for m in second.history] == ["user", "assistant", "user", "assistant"]
    assert second.history[2].tool_results[0].content == "3"


class Failing(Interceptor):
    async def tool_call(
        self, step: ToolStep, proceed: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        raise RuntimeError("the interceptor broke")


async def test_an_aborting_hook_and_a_cancel_pass_through_the_run_interceptor() -> None:
    log: list[str] = []
    worker = Worker(script(), tools=[add])
    worker._cfg.interceptors.append(Recorder("r", log))  # pyright: ignore[reportPrivateUsage]

    def abort(ctx: ToolCallContext) -> Abort:
        return Abort("no")

    worker.add_before_tool_call_hook(abort)
    with pytest.raises(Aborted):
        await worker.run("1+2?")
    assert log[0] == "r run >"
    assert log[-1] == "r run <"
    history: list[Message] = worker.history
    assert history[-1].tool_results  # the call got its error result: the history is whole

    log.clear()
    slow = Worker(ScriptedClient([ScriptedResponse.text("x" * 400, delay=0.05)]))
    slow._cfg.interceptors.append(Recorder("r", log))  # pyright: ignore[reportPrivateUsage]
    slow.on_text_block(lambda event: slow.cancel())
    with anyio.fail_after(10):
        result = await slow.run("hi")
    assert result.status is RunStatus.CANCELLED
    assert log == ["r run >", "r request 1 >", "r run <"]


async def test_a_failing_tool_interceptor_gives_an_error_result_the_model_reads() -> None:
    client = script()
    worker = Worker(client, tools=[add])
    worker._cfg.interceptors.append(Failing())  # pyright: ignore[reportPrivateUsage]
    result = await worker.run("1+2?")
    assert result.status is RunStatus.FINISHED
    (sent,) = worker.history[2].tool_results
    assert sent.is_error
    assert sent.content == "the call could not be completed: RuntimeError: the interceptor broke"
