"""A failed span's `exception` event carries no content unless content is captured.

A structured-output failure's exception quotes the model's answer (its message the value, its
chained rejection the whole text): with capture off none of it reaches a span; with capture
on the message and stack trace are there, each cut to `content_max_chars`.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from llm_worker import ToolUsePart, Worker
from llm_worker.errors import OutputValidationError
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.worker._output import OutputMode
from support.telemetry import Telemetry, attrs

pytestmark = pytest.mark.anyio

CANARY = "CANARY-ANSWER-7f3a9c"
BIG = 1_000_000


class Invoice(BaseModel):
    total: int


def _answer(size: int) -> str:
    return '{"total": "' + CANARY + "x" * size + '"}'


async def _fail(t: Telemetry, mode: OutputMode, *, capture: bool, **options: Any) -> None:
    answer = _answer(BIG)
    if mode == "native":
        script = [ScriptedResponse.text(answer)]
    else:
        script = [ScriptedResponse([ToolUsePart("c1", "final_result", {"total": answer})])]
    worker = Worker(
        ScriptedClient(script),
        output_type=Invoice,
        output_mode=mode,
        output_retries=0,
        instrument=t.instrumentation(capture_content=capture, **options),
    )
    with anyio.fail_after(30), pytest.raises(OutputValidationError):
        await worker.run("bill me")


def _everything(t: Telemetry) -> list[str]:
    """Every text the exported spans hold: attributes, event attributes, status, names."""
    texts: list[str] = []
    for span in t.spans():
        texts += [span.name, str(span.status.description or "")]
        texts += [str(v) for v in attrs(span).values()]
        for event in span.events:
            texts.append(event.name)
            texts += [str(v) for v in (event.attributes or {}).values()]
    return texts


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_with_capture_off_no_span_holds_the_answer(mode: OutputMode) -> None:
    t = Telemetry()
    await _fail(t, mode, capture=False)
    assert not [text[:80] for text in _everything(t) if CANARY in text]
    run = t.one("invoke_agent")
    [event] = [e for e in run.events if e.name == "exception"]
    got = dict(event.attributes or {})
    assert got["exception.type"] == "llm_worker.errors.OutputValidationError"
    assert "exception.message" not in got
    trace = str(got["exception.stacktrace"])
    # Still useful: where it failed, and which exceptions led to it.
    assert "Traceback (most recent call last)" in trace and "_worker.py" in trace
    assert trace.rstrip().endswith("OutputValidationError")
    assert max(len(text) for text in _everything(t)) < 20_000


@pytest.mark.parametrize("mode", ["native", "tool"])
@pytest.mark.parametrize("cap", [None, 1000])
async def test_with_capture_on_the_exception_is_recorded_and_cut_to_the_cap(
    mode: OutputMode, cap: int | None
) -> None:
    t = Telemetry()
    await _fail(t, mode, capture=True, **({} if cap is None else {"content_max_chars": cap}))
    limit = cap or 16_384
    run = t.one("invoke_agent")
    [event] = [e for e in run.events if e.name == "exception"]
    got = dict(event.attributes or {})
    message, trace = str(got["exception.message"]), str(got["exception.stacktrace"])
    assert "did not match the output type" in message
    assert len(message) <= limit and len(trace) <= limit
    assert "OutputValidationError" in trace  # the cut keeps the end, which names the failure
    if mode == "native":  # the chained rejection quotes the whole answer: cut to the cap
        assert (
            len(trace) == limit and int(str(got["llm_worker.truncated.exception.stacktrace"])) > BIG
        )
        assert trace.startswith("[truncated: ")
    for text in _everything(t):
        assert len(text) <= limit, text[:80]


async def test_a_short_exception_is_recorded_whole_with_capture_on() -> None:
    t = Telemetry()
    worker = Worker(
        ScriptedClient([ScriptedResponse.text('{"total": "' + CANARY + '"}')]),
        output_type=Invoice,
        output_retries=0,
        instrument=t.instrumentation(capture_content=True, content_max_chars=1_000_000),
    )
    with anyio.fail_after(30), pytest.raises(OutputValidationError) as caught:
        await worker.run("bill me")
    [event] = [e for e in t.one("invoke_agent").events if e.name == "exception"]
    got = dict(event.attributes or {})
    assert got["exception.message"] == str(caught.value) and CANARY in str(got["exception.message"])
    assert not [k for k in got if k.startswith("llm_worker.truncated.")]
