"""One object receives every event of a Worker: `worker.subscribe`.

`subscribe` registers each method the object has: block handlers with their scopes
(`on_text_block(scope, event)` with `new_text_block_scope()`, and the same for thinking and
tool-use blocks), the meta events (`on_usage`, `on_status`, `on_error`), the Worker's own
completed pieces (`on_text_complete(text)`, `on_tool_call_complete(call)`) and the turn
boundaries (`on_turn_start(turn)`, `on_turn_end(turn)`). Methods it lacks are simply not
registered — a logger, a metrics collector or a UI is one class. Subclassing `Subscriber`
(its type argument: the text blocks' scope type) lets the type checker check each method; an
async one, which could never run mid-stream, is refused by `subscribe`.

Run: `python examples/subscriber.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import anyio
from _common import model

from llm_worker import (
    ResponseStatus,
    StatusEvent,
    TextBlockEvent,
    TextBlockStop,
    TextDelta,
    ToolCall,
    ToolUsePart,
    UsageEvent,
    Worker,
    tool,
)
from llm_worker.hooks import Subscriber
from llm_worker.testing import ScriptedResponse


class TurnLog(Subscriber[list[str]]):
    """Logs a conversation turn by turn, and counts requests and tokens across turns."""

    def __init__(self) -> None:
        self.requests = 0
        self.output_tokens = 0
        self._usage: UsageEvent | None = None

    def on_turn_start(self, turn: int) -> None:
        print(f"── turn {turn} starts")

    def new_text_block_scope(self) -> list[str]:
        return []  # a fresh list per text block

    def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:
        if isinstance(event, TextDelta):
            scope.append(event.text)
        elif isinstance(event, TextBlockStop):
            print(f"   a text block streamed in {len(scope)} pieces")

    def on_text_complete(self, text: str) -> None:
        print(f"   text: {text!r}")

    def on_tool_call_complete(self, call: ToolCall) -> None:
        print(f"   tool call: {call.name}({call.input})")

    def on_usage(self, usage: UsageEvent) -> None:
        self._usage = usage  # a snapshot: the last one of an answer is its total

    def on_status(self, event: StatusEvent) -> None:
        if event.status is ResponseStatus.COMPLETED:
            self.requests += 1
            self.output_tokens += (self._usage.output_tokens or 0) if self._usage else 0

    def on_turn_end(self, turn: int) -> None:
        print(
            f"── turn {turn} ends ({self.requests} requests, "
            f"{self.output_tokens} output tokens so far)"
        )


@tool(effect="read_only")
def convert(amount: float, currency: str) -> str:
    """Convert an amount of euros to another currency."""
    rate = {"JPY": 162.0, "USD": 1.08}.get(currency.upper(), 1.0)
    return f"{amount} EUR = {amount * rate:.2f} {currency.upper()}"


SCRIPT = [
    ScriptedResponse([ToolUsePart("", "convert", {"amount": 20, "currency": "JPY"})]),
    ScriptedResponse.text("20 euros are 3240 yen."),
    ScriptedResponse.text("And 20 euros are 21.60 dollars."),  # the second turn remembers
]


async def main() -> None:
    async with model(SCRIPT, provider="openai_chat") as (client, _):
        worker = Worker(client, tools=[convert])
        log = TurnLog()
        worker.subscribe(log)
        await worker.run("How many yen are 20 euros?")
        await worker.run("And in dollars?")
        print(f"history: {len(worker.history)} messages")


if __name__ == "__main__":
    anyio.run(main)
