"""Captured content on spans is capped: a huge prompt, answer, argument or result stays bounded."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.errors import ConfigurationError
from llm_worker.otel import Instrumentation, instrument, uninstrument
from llm_worker.testing import ScriptedClient, ScriptedResponse
from support.telemetry import Telemetry, attrs

pytestmark = pytest.mark.anyio

HUGE = 5_000_000  # characters of one tool output (no blob store: all of it goes to the model)
MARK = "llm_worker.truncated."


@tool
async def dump(fill: str) -> str:
    """A very long output."""
    return fill * HUGE


async def _run(t: Telemetry, **options: Any) -> None:
    args = {"fill": "ü"}
    client = ScriptedClient(
        [
            ScriptedResponse([ToolUsePart("c1", "dump", args)]),
            ScriptedResponse.text("é" * 100_000),
        ]
    )
    instrumentation = t.instrumentation(capture_content=True, **options)
    worker = Worker(client, tools=[dump], system="s" * 40_000, instrument=instrumentation)
    with anyio.fail_after(30):
        await worker.run("go")


@pytest.mark.parametrize("cap", [None, 1000])
async def test_each_captured_attribute_is_cut_to_the_cap_and_says_its_size(
    cap: int | None,
) -> None:
    t = Telemetry()
    await _run(t, **({} if cap is None else {"content_max_chars": cap}))
    limit = cap or 16_384
    first, second = t.named("chat scripted")
    tool_span = t.one("execute_tool dump")
    result = attrs(tool_span)["gen_ai.tool.call.result"]
    assert len(result) == limit and result.endswith(f"…[truncated: {HUGE} chars]")
    assert result.startswith("ü" * 100)
    assert attrs(tool_span)[MARK + "gen_ai.tool.call.result"] == HUGE
    assert attrs(tool_span)["gen_ai.tool.call.arguments"] == '{"fill":"ü"}'  # short: whole
    assert MARK + "gen_ai.tool.call.arguments" not in attrs(tool_span)
    # The history carries the output into the second request's input messages.
    for span, name in [
        (first, "gen_ai.system_instructions"),
        (second, "gen_ai.system_instructions"),
        (second, "gen_ai.output.messages"),
    ]:
        assert len(attrs(span)[name]) == limit and attrs(span)[MARK + name] > 40_000
    assert MARK + "gen_ai.input.messages" not in attrs(first)
    assert MARK + "gen_ai.output.messages" not in attrs(first)
    messages = attrs(second)["gen_ai.input.messages"]
    assert len(messages) == limit and attrs(second)[MARK + "gen_ai.input.messages"] > HUGE
    assert attrs(second)["gen_ai.output.messages"].startswith('[{"role":"assistant"')


async def test_content_within_the_cap_is_recorded_whole_and_unmarked() -> None:
    t = Telemetry()
    await _run(t, content_max_chars=20_000_000)
    for span in t.spans():
        assert not [k for k in attrs(span) if k.startswith(MARK)], span.name
    result = attrs(t.one("execute_tool dump"))["gen_ai.tool.call.result"]
    assert result == "ü" * HUGE


@pytest.mark.parametrize("value", [0, 63, -1, True, 1000.0, "1000", None])
def test_a_bad_cap_is_refused(value: Any) -> None:
    t = Telemetry()
    with pytest.raises(ConfigurationError, match="content_max_chars"):
        t.instrumentation(capture_content=True, content_max_chars=value)
    try:
        with pytest.raises(ConfigurationError, match="content_max_chars"):
            instrument(content_max_chars=value)
    finally:
        uninstrument()


def test_the_default_cap_is_documented_and_exposed() -> None:
    inst = Instrumentation(capture_content=True)
    assert inst.content_max_chars == 16_384 and inst.content == 16_384
    assert Instrumentation().content is None  # not capturing: nothing to cap
    assert "16,384" in (Instrumentation.__doc__ or "")
