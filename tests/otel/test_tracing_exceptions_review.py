"""Review of the exception events: no content on a span through any other path, capture off.

A tool whose error quotes what it read (its message, a note, an exception group of parallel
failures, a chained cause), a hook that fails quoting the call's arguments, and an answer too
large: each exception's text is content; with capture off no span may hold it, and the run's
exception event still says where and what failed.
"""

from __future__ import annotations

import traceback

import anyio
import pytest

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.errors import AnswerTooLargeError, HookError
from llm_worker.hooks import ToolCallContext
from llm_worker.testing import ScriptedClient, ScriptedModelServer, ScriptedResponse
from support.telemetry import Telemetry, attrs

pytestmark = pytest.mark.anyio

CANARY = "CANARY-CONTENT-5e1d"


def _texts(t: Telemetry) -> list[str]:
    texts: list[str] = []
    for span in t.spans():
        texts += [span.name, str(span.status.description or "")]
        texts += [str(v) for v in attrs(span).values()]
        for event in span.events:
            texts += [event.name, *(str(v) for v in (event.attributes or {}).values())]
    return texts


def _clean(t: Telemetry) -> None:
    leaked = [text[:120] for text in _texts(t) if CANARY in text]
    assert not leaked, leaked


def _group_failure(secret: str) -> ExceptionGroup[Exception]:
    inner = ValueError(f"row {secret}")
    inner.add_note(f"while reading {secret}")
    try:
        try:
            raise KeyError(secret)
        except KeyError as cause:
            raise ExceptionGroup(
                f"two lookups failed on {secret}", [inner, TypeError(secret)]
            ) from cause
    except ExceptionGroup as group:
        return group


@tool
async def lookup(query: str) -> str:
    """Look a value up."""
    raise _group_failure(query)


async def test_a_failing_tools_exception_group_reaches_no_span() -> None:
    t = Telemetry()
    script = [
        ScriptedResponse(
            [
                ToolUsePart("c1", "lookup", {"query": CANARY}),
                ToolUsePart("c2", "lookup", {"query": CANARY + "-2"}),
            ]
        ),
        ScriptedResponse.text("sorry"),
    ]
    worker = Worker(ScriptedClient(script), tools=[lookup], instrument=t.instrumentation())
    with anyio.fail_after(20):
        result = await worker.run("find it")
    assert result.text == "sorry"
    tools = t.named("execute_tool lookup")
    assert len(tools) == 2 and all(attrs(s)["error.type"] == "ExceptionGroup" for s in tools)
    _clean(t)


async def test_a_hook_failing_with_the_arguments_in_its_message_reaches_no_span() -> None:
    t = Telemetry()
    script = [ScriptedResponse([ToolUsePart("c1", "lookup", {"query": CANARY})])]
    worker = Worker(ScriptedClient(script), tools=[lookup], instrument=t.instrumentation())

    def refuses(ctx: ToolCallContext) -> None:
        error = PermissionError(f"not allowed: {ctx.call.input}")
        error.add_note(f"arguments {ctx.call.input}")
        raise _group_failure(str(ctx.call.input)) from error

    worker.add_before_tool_call_hook(refuses)
    with anyio.fail_after(20), pytest.raises(HookError) as caught:
        await worker.run("find it")
    assert CANARY in "".join(traceback.format_exception(caught.value))  # content, really
    _clean(t)
    [event] = [e for e in t.one("invoke_agent").events if e.name == "exception"]
    trace = str(dict(event.attributes or {})["exception.stacktrace"])
    # Frames and types still say what failed and what led to it.
    assert "PermissionError" in trace and "HookError" in trace and "refuses" in trace


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses", "gemini"])
async def test_an_answer_too_large_is_a_typed_span_error_without_its_text(provider: str) -> None:
    t = Telemetry()
    answer = ScriptedResponse.text(CANARY * 400, chunk_size=500)
    async with ScriptedModelServer(provider, [answer]) as server:
        worker = Worker(server.client(max_answer_chars=2048), instrument=t.instrumentation())
        with anyio.fail_after(20), pytest.raises(AnswerTooLargeError):
            await worker.run("talk")
    _clean(t)
    chat = [s for s in t.spans() if s.name.startswith("chat ")]
    assert [attrs(s)["error.type"] for s in chat] == ["AnswerTooLargeError"]
