"""Review probes of `output_guardrail(hold=...)`: a refused string split across deltas."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    GuardrailTripped,
    OutputGuardrailContext,
    TextDelta,
    Trip,
    Worker,
    output_guardrail,
)
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio
TIMEOUT = 10.0
SECRET = "h\u00fcnt\U0001f511r2"  # non-ASCII, a character outside the BMP


def _shown(events: list[Any]) -> str:
    return "".join(
        e.delta.text for e in events if isinstance(e, BlockDelta) and isinstance(e.delta, TextDelta)
    )


async def _read(worker: Worker[Any], prompt: str, events: list[Any]) -> None:
    async with worker.stream(prompt) as stream:
        async for event in stream:
            events.append(event)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("at", range(0, 12))
async def test_no_part_of_a_refused_string_as_long_as_the_window_is_shown(
    chunk: int, at: int
) -> None:
    # Wherever a window boundary falls inside the refused string, none of it reaches readers.
    text = "x" * at + "Your code is " + SECRET + " and more text after it."

    @output_guardrail(hold=len(SECRET))
    def no_secret(ctx: OutputGuardrailContext) -> Trip | None:
        return Trip("a secret") if SECRET in ctx.text else None

    worker = Worker(
        ScriptedClient([ScriptedResponse.text(text, chunk_size=chunk)]), guardrails=[no_secret]
    )
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT), pytest.raises(GuardrailTripped):
        await _read(worker, "code?", events)
    shown = _shown(events)
    assert text.startswith(shown)
    assert not shown.endswith(SECRET[0]) and SECRET[:2] not in shown
    assert any(isinstance(e, BlockAbort) for e in events)


async def test_a_passing_answer_is_shown_whole_after_a_sliding_hold() -> None:
    text = "Kyoto: clear, 21\u00b0C \U0001f324\ufe0f, light wind from the west."

    @output_guardrail(hold=6)
    def fine(ctx: OutputGuardrailContext) -> None:
        return None

    worker = Worker(ScriptedClient([ScriptedResponse.text(text, chunk_size=4)]), guardrails=[fine])
    events: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with worker.stream("weather?") as stream:
            async for event in stream:
                events.append(event)
    assert _shown(events) == text
    assert worker.history[-1].text == text
    kinds = [type(e).__name__ for e in events if isinstance(e, BlockStart | BlockDelta | BlockStop)]
    assert kinds[0] == "BlockStart" and kinds[-1] == "BlockStop"  # the block ends for readers
    assert kinds.count("BlockStop") == 1
