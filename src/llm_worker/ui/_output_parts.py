"""A structured output in the browser: its partial, rejected and final values as parts.

The Worker's `OutputPartial` and `OutputRejected` events, and a finished run's output, become
one part per answer of the model — `data-llm-worker-output` for the `ai` client (a data part
whose id stays the same while the answer streams, so the client replaces it in place), a
`CUSTOM` event named `llm-worker.output` for AG-UI — whose `status` goes from `"partial"` to
`"final"`, or to `"rejected"` (with the validation errors the model is sent) when the answer
did not fit and the model is asked again; the next answer then gets a part of its own. A run
that ends without an output (paused, cancelled, refused) leaves the open part with that
status and its last value.

Each partial part carries the whole value so far (neither protocol patches a data part), so a
partial is sent only once the answer has grown by an eighth since the last one sent: the
bytes on the wire stay within about nine times the answer's size, however long it streams.
"""

from __future__ import annotations

from typing import Any

from llm_worker.state import OutputPartial, OutputRejected, RunResult

__all__ = ("OutputTrack", "output_json")


def output_json(value: object) -> Any:
    """A structured output as JSON data: a model or dataclass dumped by pydantic (by alias).

    A value pydantic cannot write (a custom serializer that fails) is `None`; without
    pydantic the output type was a JSON Schema, and its value is JSON already.
    """
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        from pydantic_core import to_jsonable_python
    except ImportError:  # no pydantic: the value came from a JSON Schema output, plain JSON
        return value
    try:
        return to_jsonable_python(value, by_alias=True)
    except (TypeError, ValueError):  # pydantic's serialization error is a ValueError
        return None


class OutputTrack:
    """The output parts of one run's stream: which answer they belong to, and whether any."""

    __slots__ = ("answer", "latest", "seen", "sent")

    def __init__(self) -> None:
        self.answer = 1  # the model's structured answers in this stream, the current one
        self.seen = False  # an output event came: the run has an output type
        self.latest: OutputPartial[Any] | None = None  # the current answer's last partial
        self.sent = 0  # the size of the current answer's last partial sent

    def partial(self, event: OutputPartial[Any]) -> dict[str, Any] | None:
        """The data of a partial value; None when it has not grown enough to be sent."""
        self.seen = True
        first = self.latest is None
        self.latest = event
        if not first and event.size - self.sent < self.sent >> 3:
            return None
        self.sent = event.size
        return _data("partial", event)

    def rejected(self, event: OutputRejected) -> dict[str, Any]:
        """The data of a rejected answer; what comes next belongs to the next answer."""
        self.seen = True
        self.latest, self.sent = None, 0
        return {
            "status": "rejected",
            "errors": list(event.errors),
            "attempt": event.attempt,
            "retriesLeft": event.retries_left,
        }

    def final(self, result: RunResult[Any]) -> dict[str, Any] | None:
        """The data of a finished run's output, or None when it has none to show.

        A run without an output type has its text as output: no part (a stream that carried
        no output event and ends with text is taken for one). A run without an output marks
        the current answer's part, if it has one, with its status (`"paused"`,
        `"cancelled"`, `"refused"`).
        """
        if not result.has_output:
            if self.latest is None:
                return None
            status = "refused" if result.refusal is not None else result.status.value
            return _data(status, self.latest)
        value = result.output_or_none
        if not self.seen and isinstance(value, str):
            return None
        return {"status": "final", "value": output_json(value)}


def _data(status: str, partial: OutputPartial[Any]) -> dict[str, Any]:
    return {"status": status, "value": output_json(partial.value), "size": partial.size}
