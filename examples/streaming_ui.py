"""A streaming UI built from Timeline handlers with per-block scopes.

A handler is an object with `new_scope()` and `on_event(scope, event)`. The Timeline asks
each handler for a fresh scope when a block starts, passes it with every event of that block,
and drops it when the block stops — so per-block state (a buffer, a counter, a timer) never
leaks from one block into the next. A plain function works too, when no state is needed.

Run: `python examples/streaming_ui.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from _common import model

from llm_worker import (
    InputJsonDelta,
    TextBlockAbort,
    TextBlockEvent,
    TextBlockStart,
    TextBlockStop,
    TextDelta,
    TextPart,
    ThinkingBlockEvent,
    ThinkingBlockStart,
    ThinkingBlockStop,
    ThinkingDelta,
    ThinkingPart,
    ToolUseBlockAbort,
    ToolUseBlockEvent,
    ToolUseBlockStart,
    ToolUseBlockStop,
    ToolUsePart,
    UsageEvent,
    Worker,
    tool,
)
from llm_worker.testing import ScriptedResponse


@dataclass
class BlockStats:
    """The scope of one text or thinking block: fresh at each block start."""

    pieces: int = 0
    chars: int = 0


class TextPrinter:
    """Prints answer text as it streams; the scope counts the pieces of one block."""

    def new_scope(self) -> BlockStats:
        return BlockStats()

    def on_event(self, scope: BlockStats, event: TextBlockEvent) -> None:
        if isinstance(event, TextBlockStart):
            print("┌ text")
        elif isinstance(event, TextDelta):
            scope.pieces += 1
            scope.chars += len(event.text)
            print(event.text, end="", flush=True)
        elif isinstance(event, TextBlockStop):
            print(f"\n└ text: {scope.chars} chars in {scope.pieces} pieces")
        elif isinstance(event, TextBlockAbort):
            print(f"\n└ text aborted: {event.reason}")


class ThinkingPrinter:
    """Shows only the size of the model's thinking, not its words."""

    def new_scope(self) -> BlockStats:
        return BlockStats()

    def on_event(self, scope: BlockStats, event: ThinkingBlockEvent) -> None:
        if isinstance(event, ThinkingBlockStart):
            print("┌ thinking…")
        elif isinstance(event, ThinkingDelta):
            scope.chars += len(event.text)
        elif isinstance(event, ThinkingBlockStop):
            print(f"└ thinking: {scope.chars} chars")


class ToolCallPrinter:
    """Collects a call's JSON arguments in its scope (a list of fragments) and prints them whole."""

    def new_scope(self) -> list[str]:
        return []

    def on_event(self, scope: list[str], event: ToolUseBlockEvent) -> None:
        if isinstance(event, ToolUseBlockStart):
            print(f"┌ tool {event.name}")
        elif isinstance(event, InputJsonDelta):
            scope.append(event.partial_json)
        elif isinstance(event, ToolUseBlockStop):
            print(f"└ tool {event.name}({''.join(scope)}) in {len(scope)} fragments")
        elif isinstance(event, ToolUseBlockAbort):
            print(f"└ tool {event.name} aborted: {event.reason}")


class UsageMeter:
    """A meta handler: it gets one scope, at registration, for all its events.

    Providers send usage as snapshots (several per answer on some), so the meter keeps them
    all and the latest of each answer is the one that counts.
    """

    def __init__(self) -> None:
        self.snapshots: list[UsageEvent] = []

    def new_scope(self) -> list[UsageEvent]:
        return self.snapshots

    def on_event(self, scope: list[UsageEvent], event: UsageEvent) -> None:
        scope.append(event)


@tool(effect="read_only")
def get_weather(city: str) -> str:
    """Get the current weather of a city."""
    return f"{city}: 21 °C, clear sky"


# What the scripted model answers offline: thinking, a sentence and a tool call, then the answer.
SCRIPT = [
    ScriptedResponse(
        [
            ThinkingPart("The user asks about Kyoto; I should call the weather tool."),
            TextPart("Let me check the weather in Kyoto."),
            ToolUsePart("", "get_weather", {"city": "Kyoto"}),
        ],
        chunk_size=6,
        usage=UsageEvent(input_tokens=310, output_tokens=42),
    ),
    ScriptedResponse.text(
        "It is 21 °C with a clear sky in Kyoto.",
        chunk_size=6,
        usage=UsageEvent(input_tokens=380, output_tokens=15),
    ),
]


async def main() -> None:
    async with model(SCRIPT) as (client, _):
        worker = Worker(client, tools=[get_weather])
        worker.on_text_block(TextPrinter())
        worker.on_thinking_block(ThinkingPrinter())
        worker.on_tool_use_block(ToolCallPrinter())
        meter = UsageMeter()
        worker.on_usage(meter)
        worker.on_status(lambda event: print(f"· {event.status.value}"))  # a plain function
        result = await worker.run("What's the weather in Kyoto?")
        print(f"final answer: {result.text}")
        print(f"usage snapshots seen by the meter: {len(meter.snapshots)}")
        usage = result.usage  # the Worker sums the answers' final snapshots
        print(
            f"usage: {result.requests} requests, {usage.input_tokens} tokens in, "
            f"{usage.output_tokens} out"
        )


if __name__ == "__main__":
    anyio.run(main)
