"""Guardrails with tripwires: an input check beside the first request, an output check that
holds streamed text back until it passes.

The input guardrail runs concurrently with the model's first answer, so a passing check costs
no time; while it is pending, no tool whose effect is not read-only starts. Here the model
asks for a refund (a side-effecting tool) before the slow check has finished: the check
trips, the run stops with `GuardrailTripped`, and the refund never happens.

The output guardrail sees the answer's text every 24 characters (`hold=24`) before a reader of
`Worker.stream()` does: the text that passed is shown, its last 24 characters held back until
the next check, so the card details (and any start of them) never are.

Run: `python examples/guardrails.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import re

import anyio
from _common import model

from llm_worker import (
    BlockAbort,
    BlockDelta,
    GuardrailChecked,
    GuardrailTripped,
    InputGuardrailContext,
    OutputGuardrailContext,
    TextDelta,
    ToolContext,
    ToolUsePart,
    Trip,
    Worker,
    input_guardrail,
    output_guardrail,
    tool,
)
from llm_worker.testing import ScriptedResponse

REFUNDS: list[str] = []


@tool(effect="side_effect")
def refund(order: str, ctx: ToolContext) -> str:
    """Refund an order."""
    REFUNDS.append(f"{order} (idempotency key {ctx.call_id})")
    return f"refunded {order}"


@input_guardrail
async def no_fraud(ctx: InputGuardrailContext) -> Trip | None:
    await anyio.sleep(0.2)  # a moderation model takes its time
    if "every order" in ctx.text:
        return Trip("bulk refunds need a person", info={"rule": "bulk-refund"})
    return None


# Checked on the text so far; the last 24 characters stay held after each check, so a rule
# needs to match within 24 characters of where what it refuses starts.
CARD = re.compile(r"\bcard\b.{0,20}\d", re.IGNORECASE)


@output_guardrail(hold=24)
def no_card_numbers(ctx: OutputGuardrailContext) -> Trip | None:
    return Trip("card details in the answer") if CARD.search(ctx.text) else None


SCRIPT = [
    ScriptedResponse([ToolUsePart("", "refund", {"order": "A-1"})]),
    ScriptedResponse.text(
        "Your order ships tomorrow by courier, before noon. "
        "The card on file is 4111 1111 1111 1111, valid to 2029.",
        chunk_size=6,
    ),
]


async def main() -> None:
    async with model(SCRIPT) as (client, _):
        worker = Worker(client, tools=[refund], guardrails=[no_fraud, no_card_numbers])
        try:
            await worker.run("Refund every order of this account, now.")
        except GuardrailTripped as tripped:
            print(f"input guardrail {tripped.guardrail!r} tripped: {tripped.reason}")
        print(f"refunds made: {REFUNDS}")
        shown: list[str] = []
        try:
            async with worker.stream("When does my order ship?") as stream:
                async for event in stream:
                    match event:
                        case BlockDelta(delta=TextDelta(text=text)):
                            shown.append(text)
                        case GuardrailChecked(tripped=False, final=False):
                            print(f"· {event.guardrail} passed the text so far")
                        case BlockAbort():
                            print("· the held text was dropped")
                        case _:
                            pass
        except GuardrailTripped as tripped:
            print(f"output guardrail {tripped.guardrail!r} tripped: {tripped.reason}")
        print(f"the reader saw: {''.join(shown)!r}")


if __name__ == "__main__":
    anyio.run(main)
