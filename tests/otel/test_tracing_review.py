"""Adversarial probes of tracing: hostile content, cancellation, secrets across wire formats."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.errors import HookError
from llm_worker.events import UsageEvent
from llm_worker.hooks import ToolCallContext
from llm_worker.providers._http import RetryPolicy
from llm_worker.state import RunStatus
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from support.telemetry import Telemetry, attrs

pytestmark = pytest.mark.anyio

KEY = "sk-REVIEWSECRET-0123456789abcdef"


class _Open(SpanProcessor):
    """Counts spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        assert span.context is not None
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.open.pop(span.context.span_id, None)


@tool
async def echo(text: str, n: int) -> str:
    """Echo the text."""
    return text[:10]


@tool
async def listing() -> str:
    """List a folder whose file names are not UTF-8 (as `os.listdir` decodes them)."""
    return os.fsdecode(b"caf\xe9.txt \xff\xfe.bin")


async def test_a_surrogate_escaped_tool_result_with_content_capture_does_not_fail_the_run() -> None:
    # The tool result goes into the next request's `gen_ai.input.messages`.
    t = Telemetry()
    script = [
        ScriptedResponse([ToolUsePart("c1", "listing", {})], usage=UsageEvent(9, 3)),
        ScriptedResponse.text("done", usage=UsageEvent(9, 3)),
    ]
    worker = Worker(
        ScriptedClient(script), tools=[listing], instrument=t.instrumentation(capture_content=True)
    )
    with anyio.fail_after(10):
        result = await worker.run("list \udcff it")
    assert result.status is RunStatus.FINISHED
    chats = [attrs(s) for s in t.spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert "\\udcff" in chats[0]["gen_ai.input.messages"]  # the prompt, escaped
    # The tool result, made valid where it entered the history (U+FFFD for each surrogate).
    assert "\\ufffd\\ufffd.bin" in chats[1]["gen_ai.input.messages"]


async def test_a_task_cancelled_mid_tool_leaves_no_span_open() -> None:
    t = Telemetry()
    probe = _Open()
    t.tracer_provider.add_span_processor(probe)
    started = anyio.Event()

    @tool
    async def wait() -> str:
        """Wait forever."""
        started.set()
        await anyio.sleep_forever()
        return ""

    script = [ScriptedResponse([ToolUsePart("c1", "wait", {})])]
    worker = Worker(ScriptedClient(script), tools=[wait], instrument=t.instrumentation())
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run, "go")
            await started.wait()
            group.cancel_scope.cancel()
    assert probe.open == {}
    assert attrs(t.one("invoke_agent"))["llm_worker.run.status"] == "cancelled"


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_the_api_key_is_in_no_span_attribute_or_event(provider: str) -> None:
    t = Telemetry()
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": "hi", "n": 1})]),
        ScriptedResponse.text("done"),
    ]
    async with ScriptedModelServer(provider, script) as server:  # type: ignore[arg-type]
        client = server.client(api_key=KEY)
        worker = Worker(client, tools=[echo], instrument=t.instrumentation(capture_content=True))
        with anyio.fail_after(10):
            result = await worker.run("hello")
        await client.aclose()
    assert result.status is RunStatus.FINISHED
    dumped = [s.to_json() for s in t.spans()]
    assert dumped and not [d for d in dumped if KEY in d or KEY[-12:] in d]


async def test_worker_cancel_mid_stream_ends_the_request_span_unerrored() -> None:
    t = Telemetry()
    probe = _Open()
    t.tracer_provider.add_span_processor(probe)
    slow = ScriptedResponse.text("x" * 400, chunk_size=1, delay=0.01, usage=UsageEvent(5, 5))
    worker = Worker(ScriptedClient([slow]), instrument=t.instrumentation())
    seen = anyio.Event()

    async def go() -> None:
        async for _ in worker.stream("go"):
            seen.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(go)
            await seen.wait()
            worker.cancel()
    assert probe.open == {}
    run = attrs(t.one("invoke_agent"))
    assert run["llm_worker.run.status"] == "cancelled"
    [chat] = [s for s in t.spans() if s.name.startswith("chat ")]
    assert chat.status.status_code is not StatusCode.ERROR


async def test_a_raising_neighbour_hook_leaves_no_span_open_and_is_an_event() -> None:
    t = Telemetry()
    probe = _Open()
    t.tracer_provider.add_span_processor(probe)
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": "a", "n": 1})]),
        ScriptedResponse.text("done"),
    ]
    worker = Worker(ScriptedClient(script), tools=[echo], instrument=t.instrumentation())

    def broken(ctx: ToolCallContext) -> None:
        raise RuntimeError("hook broke")

    worker.add_before_tool_call_hook(broken)
    with anyio.fail_after(10):
        with pytest.raises(HookError):
            await worker.run("go")
    assert probe.open == {}
    events = [e for s in t.spans() for e in s.events if e.name == "llm_worker.hook"]
    assert events, "the failing hook call is an event"
    assert attrs(t.one("invoke_agent"))["llm_worker.run.status"] == "failed"


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_the_api_key_is_in_no_span_of_a_failed_connection(provider: str) -> None:
    t = Telemetry()
    async with ScriptedModelServer(provider, []) as server:  # type: ignore[arg-type]
        client = server.client(api_key=KEY, retry=RetryPolicy(max_attempts=1))
    # The server is gone: every request fails to connect.
    worker = Worker(client, instrument=t.instrumentation(capture_content=True))
    with anyio.fail_after(20):
        with pytest.raises(Exception):  # noqa: B017, PT011 - any typed error will do
            await worker.run("hello")
    await client.aclose()
    dumped = [s.to_json() for s in t.spans()]
    assert len(dumped) == 2 and not [d for d in dumped if KEY in d or KEY[-12:] in d]


@dataclass
class Verdict:
    """A structured answer."""

    ok: bool
    why: str


@pytest.mark.parametrize("mode", ["tool", "native"])
async def test_structured_output_is_one_tree_without_duplicate_spans(mode: str) -> None:
    t = Telemetry()
    probe = _Open()
    t.tracer_provider.add_span_processor(probe)
    tool_name = "final_result" if mode == "tool" else None
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": "a", "n": 1})]),
        ScriptedResponse.output(Verdict(ok=True, why="fine"), tool=tool_name),
    ]
    worker = Worker(
        ScriptedClient(script),
        tools=[echo],
        output_type=Verdict,
        output_mode=mode,  # type: ignore[arg-type]
        instrument=t.instrumentation(capture_content=True),
    )
    with anyio.fail_after(10):
        result = await worker.run("judge")
    assert result.output == Verdict(ok=True, why="fine")
    assert probe.open == {}
    spans = t.spans()
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    assert [s.name for s in spans].count("invoke_agent") == 1
    assert [s.name for s in spans].count("execute_tool echo") == 1
    assert len([s for s in spans if s.name.startswith("chat ")]) == 2
