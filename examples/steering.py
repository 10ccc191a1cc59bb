"""Steering a running agent: `worker.steer(...)` while it works, `worker.follow_up(...)` after.

A steer is a user message the running loop takes in at its next boundary, before its next
request: a call of the current answer that has not started is skipped (the model reads that
the user sent a new instruction), a call already running finishes. A follow-up waits until the
run would finish, and the run goes on with it. Here a person changes their mind while the
model's answer streams, then adds a request for afterwards — from another task, as a chat UI
or a web request (`POST …/{chat id}/steer`) would.

Run: `python examples/steering.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import anyio
from _common import model

from llm_worker import (
    BlockDelta,
    Steered,
    TextDelta,
    TextPart,
    ToolResultReady,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.testing import ScriptedResponse

BOOKED: list[str] = []


@tool(effect="side_effect")
def book_hotel(city: str) -> str:
    """Book a hotel for tonight."""
    BOOKED.append(city)
    return f"booked a hotel in {city}"


SCRIPT = [
    ScriptedResponse(
        [
            TextPart("Booking your hotel in Kyoto now. "),
            ToolUsePart("", "book_hotel", {"city": "Kyoto"}),
        ],
        chunk_size=4,
        delay=0.02,
    ),
    ScriptedResponse([ToolUsePart("", "book_hotel", {"city": "Osaka"})]),
    ScriptedResponse.text("Done: your hotel is in Osaka."),
    ScriptedResponse.text("Dinner: try Kushikatsu Daruma in Dotonbori."),
]


async def main() -> None:
    async with model(SCRIPT) as (client, _):
        worker = Worker(client, tools=[book_hotel])
        async with worker.stream("Book me a hotel in Kyoto.") as stream:
            async for event in stream:
                match event:
                    case BlockDelta(delta=TextDelta()) if not worker.queued[0] and not BOOKED:
                        # The person changes their mind while the answer streams.
                        worker.steer("Actually, make it Osaka.")
                        worker.follow_up("And where should I eat tonight?")
                        print("» steer: Actually, make it Osaka.")
                        print("» follow-up: And where should I eat tonight?")
                    case Steered(messages=messages, kind=kind):
                        print(f"· {kind} taken in: {messages[0].text}")
                    case ToolResultReady(result=result):
                        print(f"← {result.name}: {result.content}")
                    case _:
                        pass
        print(f"final answer: {stream.result.text}")
        print(f"hotels booked: {BOOKED}")


if __name__ == "__main__":
    anyio.run(main)
