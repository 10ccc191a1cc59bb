"""A structured output in the browser: its partial, rejected and final values as parts.

The Worker's `OutputPartial` and `OutputRejected` events, and a finished run's output, become
one part per answer of the model — `data-llm-worker-output` for the `ai` client (a data part
whose id stays the same while the answer streams, so the client replaces it in place), a
`CUSTOM` event named `llm-worker.output` for AG-UI — whose `status` goes from `"partial"` to
`"final"`, or to `"rejected"` (with the validation errors the model is sent) when the answer
did not fit and the model is asked again; the next answer then gets a part of its own.
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

    __slots__ = ("answer", "seen")

    def __init__(self) -> None:
        self.answer = 1  # the model's structured answers in this stream, the current one
        self.seen = False  # an output event came: the run has an output type

    def partial(self, event: OutputPartial[Any]) -> dict[str, Any]:
        """The data of a partial value."""
        self.seen = True
        return {"status": "partial", "value": output_json(event.value), "size": event.size}

    def rejected(self, event: OutputRejected) -> dict[str, Any]:
        """The data of a rejected answer; what comes next belongs to the next answer."""
        self.seen = True
        return {
            "status": "rejected",
            "errors": list(event.errors),
            "attempt": event.attempt,
            "retriesLeft": event.retries_left,
        }

    def final(self, result: RunResult[Any]) -> dict[str, Any] | None:
        """The data of a finished run's output, or None when it has none to show.

        A run without an output type has its text as output: no part (a stream that carried
        no output event and ends with text is taken for one).
        """
        if not result.has_output:
            return None
        value = result.output_or_none
        if not self.seen and isinstance(value, str):
            return None
        return {"status": "final", "value": output_json(value)}
