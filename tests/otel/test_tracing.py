"""Worker runs traced by the GenAI semantic conventions, read back from in-memory exporters."""

from __future__ import annotations

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from llm_worker import Decision, PauseState, ToolUsePart, Worker, tool
from llm_worker.errors import OverloadedError
from llm_worker.events import UsageEvent
from llm_worker.hooks import Pause, Skip, ToolCallContext
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from llm_worker.worker import StreamRetry
from support.telemetry import Telemetry, attrs, parent_of, span_id

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def mul(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


def two_tools() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [
                ToolUsePart("c1", "add", {"a": 1, "b": 2}),
                ToolUsePart("c2", "mul", {"a": 3, "b": 4}),
            ],
            usage=UsageEvent(input_tokens=100, output_tokens=20, cache_read_input_tokens=60),
        ),
        ScriptedResponse.text("3 and 12", usage=UsageEvent(input_tokens=150, output_tokens=5)),
    ]


async def test_a_run_with_two_parallel_tools_is_one_tree_of_conventional_spans() -> None:
    mul_started = anyio.Event()

    @tool(name="add")
    async def slow_add(a: int, b: int) -> int:
        """Add two numbers."""
        await mul_started.wait()  # returns only once mul runs: the two overlap
        return a + b

    @tool(name="mul")
    async def quick_mul(a: int, b: int) -> int:
        """Multiply two numbers."""
        mul_started.set()
        return a * b

    t = Telemetry()
    client = ScriptedClient(two_tools(), model="m-1", provider="anthropic")
    tools = [slow_add, quick_mul]
    worker = Worker(client, tools=tools, name="calc", instrument=t.instrumentation())
    with anyio.fail_after(10):
        result = await worker.run("1+2 and 3*4?")
    assert result.text == "3 and 12"

    run = t.one("invoke_agent calc")
    chats = t.named("chat m-1")
    tools = [t.one("execute_tool add"), t.one("execute_tool mul")]
    assert len(t.spans()) == 5
    assert parent_of(run) is None
    for child in [*chats, *tools]:
        assert parent_of(child) == span_id(run)
        assert child.context is not None and run.context is not None
        assert child.context.trace_id == run.context.trace_id
    # the tools ran side by side: each started before the other ended
    assert tools[0].start_time is not None and tools[1].end_time is not None
    assert tools[0].start_time < tools[1].end_time
    assert tools[1].start_time is not None and tools[0].end_time is not None
    assert tools[1].start_time < tools[0].end_time

    assert run.kind is SpanKind.INTERNAL
    assert attrs(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "m-1",
        "llm_worker.run.status": "finished",
        "llm_worker.run.requests": 2,
        "gen_ai.usage.input_tokens": 250,
        "gen_ai.usage.output_tokens": 25,
        "gen_ai.usage.cache_read.input_tokens": 60,
    }
    first, second = chats
    assert first.kind is SpanKind.CLIENT
    a = attrs(first)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == "m-1"
    assert a["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (100, 20)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 60
    assert a["gen_ai.response.time_to_first_chunk"] >= 0
    assert "gen_ai.input.messages" not in a  # no content unless asked
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(tools[0]) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two numbers.",
        "llm_worker.tool.outcome": "done",
    }
    assert all(s.status.status_code is StatusCode.UNSET for s in t.spans())


async def test_token_duration_and_first_chunk_histograms_carry_the_conventions_attributes() -> None:
    t = Telemetry()
    client = ScriptedClient(two_tools(), model="m-1", provider="openai_chat")
    worker = Worker(client, tools=[add, mul], instrument=t.instrumentation())
    with anyio.fail_after(10):
        await worker.run("go")
    tokens = {
        (p.attributes or {})["gen_ai.token.type"]: p.sum
        for p in t.points("gen_ai.client.token.usage")
    }
    assert tokens == {"input": 250, "output": 25}
    [duration] = t.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert dict(duration.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m-1",
    }
    [first] = t.points("gen_ai.client.operation.time_to_first_chunk")
    assert first.count == 2
    assert first.sum <= duration.sum


async def test_a_skipped_call_gets_its_span_and_every_hook_is_an_event() -> None:
    t = Telemetry()
    worker = Worker(ScriptedClient(two_tools()), tools=[add, mul], instrument=t.instrumentation())

    def no_mul(ctx: ToolCallContext) -> Skip | None:
        return Skip("no multiplying") if ctx.call.name == "mul" else None

    worker.add_before_tool_call_hook(no_mul)
    with anyio.fail_after(10):
        await worker.run("go")
    skipped = t.one("execute_tool mul")
    assert attrs(skipped)["llm_worker.tool.outcome"] == "skipped"
    assert attrs(skipped)["gen_ai.tool.call.id"] == "c2"
    assert attrs(t.one("execute_tool add"))["llm_worker.tool.outcome"] == "done"
    run = t.one("invoke_agent")
    assert parent_of(skipped) == span_id(run)
    hooks = [dict(e.attributes or {}) for e in run.events if e.name == "llm_worker.hook"]
    assert [(h["llm_worker.hook.point"], h["llm_worker.hook.result"]) for h in hooks] == [
        ("before_tool_call", "None"),
        ("before_tool_call", "Skip"),
    ]
    assert {str(h["llm_worker.hook.name"]).rsplit(".", 1)[-1] for h in hooks} == {"no_mul"}


async def test_a_tool_error_marks_its_span_and_the_run_goes_on() -> None:
    @tool
    async def boom() -> str:
        """Fail."""
        raise ValueError("no")

    t = Telemetry()
    script = [ScriptedResponse([ToolUsePart("c1", "boom", {})]), ScriptedResponse.text("ok")]
    worker = Worker(ScriptedClient(script), tools=[boom], instrument=t.instrumentation())
    with anyio.fail_after(10):
        await worker.run("go")
    span = t.one("execute_tool boom")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "ValueError"
    assert attrs(span)["llm_worker.tool.outcome"] == "error"


async def test_pause_and_resume_in_another_worker_link_the_runs_through_the_state() -> None:
    t = Telemetry()

    def ask(ctx: ToolCallContext) -> Pause | None:
        return Pause("approve?") if ctx.call.name == "add" and not ctx.resumed else None

    first = Worker(
        ScriptedClient(two_tools()[:1]), tools=[add, mul], instrument=t.instrumentation()
    )
    first.add_before_tool_call_hook(ask)
    with anyio.fail_after(10):
        paused = await first.run("go")
    assert paused.status is RunStatus.PAUSED and paused.state is not None
    saved = paused.state.to_json()  # another process would load this
    paused_run = t.one("invoke_agent")
    assert attrs(paused_run)["llm_worker.run.status"] == "paused"
    t.exporter.clear()

    second = Worker(
        ScriptedClient(two_tools()[1:]), tools=[add, mul], instrument=t.instrumentation()
    )
    second.add_before_tool_call_hook(ask)
    with anyio.fail_after(10):
        result = await second.resume(PauseState.from_json(saved))
    assert result.status is RunStatus.FINISHED
    resumed = t.one("invoke_agent")
    assert resumed.context is not None and paused_run.context is not None
    [link] = resumed.links
    assert link.context.trace_id == paused_run.context.trace_id
    assert link.context.span_id == paused_run.context.span_id
    assert attrs(resumed)["llm_worker.run.status"] == "finished"
    assert {s.name for s in t.spans()} == {
        "invoke_agent",
        "execute_tool add",
        "execute_tool mul",
        "chat scripted",
    }


async def test_a_state_saved_without_tracing_resumes_traced_without_a_link() -> None:
    t = Telemetry()
    first = Worker(ScriptedClient(two_tools()[:1]), tools=[add, mul], instrument=False)
    first.add_before_tool_call_hook(lambda ctx: None if ctx.resumed else Pause("wait"))
    # (the resuming Worker has no hook: both calls run)
    with anyio.fail_after(10):
        paused = await first.run("go")
    assert paused.state is not None and paused.state.trace_context is None
    second = Worker(
        ScriptedClient(two_tools()[1:]), tools=[add, mul], instrument=t.instrumentation()
    )
    with anyio.fail_after(10):
        await second.resume(PauseState.from_json(paused.state.to_json()))
    assert t.one("invoke_agent").links == ()


async def test_a_mid_stream_failure_is_an_error_on_the_request_and_the_run() -> None:
    t = Telemetry()
    broken = OverloadedError("busy", error_type="overloaded_error")
    script = [ScriptedResponse.text("partial answer", fail_with=broken)]
    retry = StreamRetry(on_overloaded=False)
    worker = Worker(ScriptedClient(script), instrument=t.instrumentation(), stream_retry=retry)
    with anyio.fail_after(10), pytest.raises(OverloadedError):
        await worker.run("go")
    chat = t.one("chat scripted")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "overloaded_error"
    assert [e.name for e in chat.events] == ["exception"]
    run = t.one("invoke_agent")
    assert attrs(run)["llm_worker.run.status"] == "failed"
    assert run.status.status_code is StatusCode.ERROR
    [duration] = t.points("gen_ai.client.operation.duration")
    assert (duration.attributes or {})["error.type"] == "overloaded_error"


async def test_a_retried_stream_shows_its_retry_on_the_request_span() -> None:
    t = Telemetry()
    broken = OverloadedError("busy", error_type="overloaded_error", streamed=True)
    script = [ScriptedResponse.text("partial", fail_with=broken), ScriptedResponse.text("ok")]
    retry = StreamRetry(on_overloaded=True, delay=0.0)
    worker = Worker(ScriptedClient(script), instrument=t.instrumentation(), stream_retry=retry)
    with anyio.fail_after(10):
        result = await worker.run("go")
    assert result.text == "ok"
    chat = t.one("chat scripted")  # one logical request, its retry inside
    [event] = [e for e in chat.events if e.name == "llm_worker.retry"]
    assert dict(event.attributes or {}) == {
        "llm_worker.retry.kind": "stream",
        "llm_worker.retry.attempt": 1,
        "llm_worker.retry.wait": 0.0,
        "error.type": "overloaded_error",
    }
    assert chat.status.status_code is StatusCode.UNSET


async def test_http_retries_and_the_response_id_and_model_of_a_real_provider() -> None:
    t = Telemetry()
    answer = ScriptedResponse.text("hi")
    async with ScriptedModelServer("anthropic", [answer]) as server:
        client = server.client()
        worker = Worker(client, instrument=t.instrumentation(), max_tokens=64, temperature=0.5)
        with anyio.fail_after(10):
            result = await worker.run("hello")
        await client.aclose()
    chat = attrs(t.one(f"chat {client.model}"))
    assert chat["gen_ai.response.id"] == result.response_ids[0]
    assert chat["gen_ai.response.model"]
    assert chat["gen_ai.request.max_tokens"] == 64
    assert chat["gen_ai.request.temperature"] == 0.5
    assert chat["gen_ai.provider.name"] == "anthropic"


@pytest.mark.parametrize("capture", [False, True])
async def test_content_is_recorded_only_when_asked(capture: bool) -> None:
    t = Telemetry()
    worker = Worker(
        ScriptedClient(two_tools()),
        tools=[add, mul],
        system="Be exact.",
        instrument=t.instrumentation(capture_content=capture),
    )
    with anyio.fail_after(10):
        await worker.run("1+2 and 3*4?")
    first, second = t.named("chat scripted")
    add_span = t.one("execute_tool add")
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    recorded = {k for s in t.spans() for k in attrs(s)} & content_keys
    if not capture:
        assert recorded == set()
        return
    assert recorded == content_keys
    assert attrs(first)["gen_ai.system_instructions"] == '[{"type":"text","content":"Be exact."}]'
    assert attrs(first)["gen_ai.input.messages"] == (
        '[{"role":"user","parts":[{"type":"text","content":"1+2 and 3*4?"}]}]'
    )
    assert attrs(first)["gen_ai.output.messages"] == (
        '[{"role":"assistant","parts":['
        '{"type":"tool_call","id":"c1","name":"add","arguments":{"a":1,"b":2}},'
        '{"type":"tool_call","id":"c2","name":"mul","arguments":{"a":3,"b":4}}],'
        '"finish_reason":"tool_call"}]'
    )
    assert (
        '{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"3"}'
        in (attrs(second)["gen_ai.input.messages"])
    )
    assert attrs(add_span)["gen_ai.tool.call.arguments"] == '{"a":1,"b":2}'
    assert attrs(add_span)["gen_ai.tool.call.result"] == "3"


async def test_a_denied_call_gets_its_span_with_the_outcome() -> None:
    t = Telemetry()

    def ask(ctx: ToolCallContext) -> Pause | None:
        return Pause("approve?") if ctx.call.name == "add" and not ctx.resumed else None

    first = Worker(ScriptedClient(two_tools()), tools=[add, mul], instrument=t.instrumentation())
    first.add_before_tool_call_hook(ask)
    with anyio.fail_after(10):
        paused = await first.run("go")
    assert paused.state is not None
    t.exporter.clear()
    with anyio.fail_after(10):
        await first.resume(paused.state, decisions={"c1": Decision.deny("no")})
    assert attrs(t.one("execute_tool add"))["llm_worker.tool.outcome"] == "denied"
    assert attrs(t.one("execute_tool mul"))["llm_worker.tool.outcome"] == "done"


async def test_a_cancelled_run_says_so_on_its_span() -> None:
    t = Telemetry()
    started = anyio.Event()

    @tool
    async def wait() -> str:
        """Wait forever."""
        started.set()
        await anyio.sleep_forever()
        return ""

    script = [ScriptedResponse([ToolUsePart("c1", "wait", {})])]
    worker = Worker(ScriptedClient(script), tools=[wait], instrument=t.instrumentation())
    results: list[RunStatus] = []

    async def go() -> None:
        results.append((await worker.run("go")).status)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(go)
            await started.wait()
            worker.cancel()
    assert results == [RunStatus.CANCELLED]
    assert attrs(t.one("invoke_agent"))["llm_worker.run.status"] == "cancelled"
