"""Runs that outlive their connection: a bounded event log per run, read again on reconnect.

A resumable run is produced into its `RunLog` by the request that started it; that request
sends the log to its browser and, when the browser goes away, stops sending but keeps
producing until the run ends (the ASGI call returns then, so no task outlives its request).
A reconnect reads the same log from the start or from after its `Last-Event-ID`.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing

import anyio

from llm_worker.ui._auth import owner_part

__all__ = ("ResumableStreams", "RunLog", "StreamGone")


class StreamGone(Exception):
    """A reconnect the log cannot serve: an id of another run (404) or events dropped (410)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RunLog:
    """The SSE events of one run, each with an `id:` line, bounded in count and bytes.

    Past a bound the oldest events are dropped: a reader that needs one of them is refused
    (or, reading live, ends its stream), the run itself goes on.
    """

    def __init__(self, key: str, run_id: str, max_events: int, max_bytes: int) -> None:
        self.key, self.run_id = key, run_id
        self.max_events, self.max_bytes = max_events, max_bytes
        self.token = secrets.token_hex(8)  # ids of this run only: another run's id is unknown
        self.scope = anyio.CancelScope()
        self.done = False
        self.finished_at = 0.0
        # The framed events alone: their sizes are worked out again when they are dropped (a
        # (text, size) pair per event was a third of a kept log's memory).
        self._events: deque[str] = deque()
        self._first = 0  # the number of the oldest event kept
        self._bytes = 0
        self._changed = anyio.Event()

    def __len__(self) -> int:
        return len(self._events)

    @property
    def first(self) -> int:
        """The number of the oldest event kept (0 until the bounds drop one)."""
        return self._first

    @property
    def size(self) -> int:
        """The bytes of the events kept."""
        return self._bytes

    def append(self, text: str) -> None:
        """Add one SSE event (a `data:` line and a blank line), numbered; wake the readers."""
        framed = f"id: {self.token}-{self._first + len(self._events)}\n{text}"
        self._events.append(framed)
        self._bytes += _size(framed)
        while len(self._events) > 1 and (
            len(self._events) > self.max_events or self._bytes > self.max_bytes
        ):
            self._bytes -= _size(self._events.popleft())
            self._first += 1
        self._wake()

    def texts(self) -> list[str]:
        """The events kept, as appended (without their `id:` line)."""
        return [framed.split("\n", 1)[1] for framed in self._events]

    def close(self, now: float) -> None:
        """Mark the run ended: readers stop at the last event."""
        self.done, self.finished_at = True, now
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def position(self, last_event_id: str | None) -> int:
        """The number of the first event to send after `last_event_id` (0: from the start).

        Raises:
            StreamGone: The id is not one of this run's (404), or the events after it were
                dropped past the log's bounds (410).
        """
        start = 0
        if last_event_id is not None:
            token, _, number = last_event_id.rpartition("-")
            # ASCII digits only, and few: int() refuses "²" and a 5000-digit number (a 500).
            if (
                token != self.token
                or not (number.isascii() and number.isdigit())
                or len(number) > 18
            ):
                raise StreamGone(404, f"{last_event_id!r} is no event id of the current run")
            start = int(number) + 1
            if start > self._first + len(self._events):
                raise StreamGone(404, f"{last_event_id!r} is no event id of the current run")
        if start < self._first:
            raise StreamGone(410, "the events to resume from were dropped (the log is bounded)")
        return start

    async def read(self, start: int, behind: Iterable[str] = ()) -> AsyncGenerator[str, None]:
        """The events from number `start` on, waiting for new ones until the run ends.

        A reader that falls behind the dropped events gets `behind` (the events saying so:
        its stream would else end mid-answer without a word) and ends.
        """
        position = start
        while position >= self._first:
            index = position - self._first
            if index < len(self._events):
                yield self._events[index]
                position += 1
            elif self.done:
                return
            else:
                await self._changed.wait()
        for text in behind:
            yield text


def _size(framed: str) -> int:
    """The bytes of an event as sent (UTF-8); an ASCII one's length, without encoding it."""
    return len(framed) if framed.isascii() else len(framed.encode())


class ResumableStreams:
    """Where resumable runs keep their events, by chat (thread) id, for reconnects.

    Pass one (or `resumable=True`) to an adapter to make its runs outlive their connection.
    One run is active per chat: a new run of the same chat stops the older one. At most
    `max_live_per_owner` runs of one owner go at once: a new run past it stops that owner's
    oldest (a run outlives its connection, so an owner starting runs and hanging up would
    otherwise keep every one going; other owners' runs are never touched). A finished run's
    log is kept `keep_seconds` for a late reconnect, and at most `max_runs` finished logs,
    `max_total_bytes` of events in all, are kept (the oldest finished go first); running
    runs are never dropped.

    Args:
        max_events: Events kept per run (the oldest dropped past it).
        max_bytes: Bytes of events kept per run (the oldest dropped past it).
        keep_seconds: How long a finished run's log stays readable.
        max_runs: Finished logs kept at most.
        max_total_bytes: Bytes of events kept in all logs, past which the oldest finished
            logs are dropped (`max_runs` full logs could otherwise hold gigabytes).
        max_live_per_owner: Runs of one owner going at once (without `authorize`, every
            client is the one owner "").
        clock: The monotonic clock the expiry reads (seconds).
    """

    def __init__(
        self,
        *,
        max_events: int = 10_000,
        max_bytes: int = 8 << 20,
        keep_seconds: float = 300.0,
        max_runs: int = 1000,
        max_total_bytes: int = 256 << 20,
        max_live_per_owner: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        bounds = (max_events, max_bytes, max_runs, max_total_bytes, max_live_per_owner)
        if min(bounds) < 1 or keep_seconds < 0:
            raise ValueError(
                "max_events, max_bytes, max_runs, max_total_bytes and max_live_per_owner "
                "must be >= 1, keep_seconds >= 0"
            )
        self.max_events, self.max_bytes = max_events, max_bytes
        self.keep_seconds, self.max_runs = keep_seconds, max_runs
        self.max_total_bytes = max_total_bytes
        self.max_live_per_owner = max_live_per_owner
        self.clock = clock
        self._logs: OrderedDict[str, RunLog] = OrderedDict()

    def __len__(self) -> int:
        self._expire()
        return len(self._logs)

    def get(self, key: str) -> RunLog | None:
        """The log of the chat's current (or recently finished) run, if kept."""
        self._expire()
        return self._logs.get(key)

    def open(self, key: str, run_id: str, carried: Iterable[str] = ()) -> RunLog:
        """A new log for a run of `key`; an older run of `key` still going is stopped.

        `carried` are events a replay must show before the run's own (the start of the
        message the run continues).
        """
        self.cancel(key)
        self._logs.pop(key, None)
        self._make_room(owner_part(key))
        log = RunLog(key, run_id, self.max_events, self.max_bytes)
        for text in carried:
            log.append(text)
        self._logs[key] = log
        self._expire()
        return log

    def cancel(self, key: str) -> bool:
        """Stop the chat's running run (the explicit stop call); whether one was running."""
        log = self._logs.get(key)
        if log is None or log.done:
            return False
        log.scope.cancel()
        return True

    def _make_room(self, owner: str) -> None:
        """Stop the owner's oldest runs still going until one more may start."""
        live = [
            log
            for log in self._logs.values()
            if not log.done and not log.scope.cancel_called and owner_part(log.key) == owner
        ]
        for log in live[: max(0, len(live) - self.max_live_per_owner + 1)]:
            log.scope.cancel()

    async def produce(
        self, log: RunLog, events: AsyncGenerator[str, None], stopped: Iterable[str]
    ) -> None:
        """Run `events` into `log` to their end, whoever reads; a stop ends it with `stopped`."""
        try:
            with log.scope:
                async with aclosing(events) as run:
                    async for text in run:
                        log.append(text)
            if log.scope.cancelled_caught:
                for text in stopped:
                    log.append(text)
        finally:
            log.close(self.clock())

    def _expire(self) -> None:
        now = self.clock()
        finished = [k for k, log in self._logs.items() if log.done]
        for key in finished:
            if now - self._logs[key].finished_at > self.keep_seconds:
                del self._logs[key]
        finished = [k for k in finished if k in self._logs]
        for key in finished[: max(0, len(finished) - self.max_runs)]:
            del self._logs[key]
        total = sum(log.size for log in self._logs.values())
        for key in [k for k in finished if k in self._logs]:
            if total <= self.max_total_bytes:
                break
            total -= self._logs.pop(key).size
