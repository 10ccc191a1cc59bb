"""Steering: messages for a running run, delivered at its next boundary.

`Worker.steer(message)` queues a user message the running loop takes in before its next
request: calls of the current batch that have not started are answered "skipped: the user
sent a new instruction" (calls already running finish: none is abandoned), and a final answer
that arrives meanwhile is not final — the run goes on with the message. `Worker.follow_up`
queues one taken in only when the run would otherwise finish.

Only the run's own task writes the history, at those boundaries: a message sent from another
task (a web request while the run streams) never races the loop on the transcript. What a run
did not take in stays queued: a pause carries it in its `PauseState` (delivered after the
resume, in any process), and after a cancel or a failure the next run of the Worker takes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from llm_worker._run_events import Steered
from llm_worker.messages import Message
from llm_worker.tools import ToolResult
from llm_worker.worker._guard import check_inputs
from llm_worker.worker._history import as_messages

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.worker._turn import Run

__all__ = ("SKIPPED", "SteerQueue", "Steered", "Steering", "skipped_result", "take_in")

SKIPPED = "Skipped: the user sent a new instruction before this call started; read it first."
"""What the model reads for a call a steer cut short (it never ran)."""


class SteerQueue:
    """The messages a Worker holds for its running (or next) run."""

    __slots__ = ("_lock", "follow_ups", "steers")

    def __init__(self) -> None:
        self.steers: list[Message] = []
        self.follow_ups: list[Message] = []
        # A steer may come from another thread: without the lock, one that read the list
        # just before `take` swapped it appended to the taken list after it was read: lost.
        self._lock = threading.Lock()

    def put(self, kind: Literal["steer", "follow_up"], messages: list[Message]) -> None:
        """Queue `messages` (from any thread)."""
        with self._lock:
            (self.steers if kind == "steer" else self.follow_ups).extend(messages)

    def take(self, kind: Literal["steer", "follow_up"]) -> list[Message]:
        """Empty one queue and return what it held, oldest first."""
        with self._lock:
            if kind == "steer":
                taken, self.steers = self.steers, []
            else:
                taken, self.follow_ups = self.follow_ups, []
        return taken

    def restore(self, steers: Iterable[Message], follow_ups: Iterable[Message]) -> None:
        """Put back what a pause carried, before anything queued since."""
        steers, follow_ups = list(steers), list(follow_ups)
        with self._lock:
            self.steers[:0] = steers
            self.follow_ups[:0] = follow_ups

    def copies(self) -> tuple[list[Message], list[Message]]:
        """Copies of both queues."""
        with self._lock:
            return list(self.steers), list(self.follow_ups)


async def take_in(run: Run, kind: Literal["steer", "follow_up"]) -> bool:
    """Append the queued steers (or follow-ups) to the run's history; whether there were any.

    They are the user's input as much as the run's first message: the input guardrails
    check them first (in order, before the request that carries them).

    Raises:
        GuardrailTripped: An input guardrail tripped on them (they are not in the history).
    """
    messages = run.queue.take(kind) if run.queue is not None else []
    if not messages:
        return False
    await check_inputs(run, messages)
    run.history.extend(messages)
    for sink in run.cfg.sinks:
        sink(Steered(messages, kind))
    return True


def skipped_result(call: ToolCall) -> ToolResult:
    """The result of a call a steer cut short before it started."""
    return ToolResult(call.id, call.name, SKIPPED, is_error=True, input=call.input)


class Steering:
    """`Worker.steer` / `Worker.follow_up`, kept beside the queue they fill."""

    __slots__ = ()
    _queue: SteerQueue

    def steer(self, message: str | Message | Iterable[Message]) -> None:
        """Queue a user message for the running run, taken in before its next request.

        Safe to call from any task of the Worker's event loop, or any thread, while the run
        streams (a web request, a UI callback); the run's own task adds the message to the
        history. Calls of
        the current batch that have not started are skipped (the model reads why); running
        ones finish. With no run going, the next run takes it in after its input; a pause
        carries it (`PauseState.steers`) to its resume.

        Raises:
            ConfigurationError: An item is not a `Message`.
        """
        self._queue.put("steer", _messages(message))

    def follow_up(self, message: str | Message | Iterable[Message]) -> None:
        """Queue a user message taken in when the run would finish: it goes on with it.

        Raises:
            ConfigurationError: An item is not a `Message`.
        """
        self._queue.put("follow_up", _messages(message))

    @property
    def queued(self) -> tuple[list[Message], list[Message]]:
        """Copies of the steers and follow-ups not taken in yet."""
        return self._queue.copies()


def _messages(message: Any) -> list[Message]:
    return as_messages(message)
