"""Gemini tool-call ids: Gemini sends none (or its own), the neutral model needs one per call.

See `gemini`'s docstring: `gemini_call_<n>`, numbered across the conversation, skipping ids
the history already uses; an id Gemini sends is kept (and echoed back as the `item_id`).
"""

from __future__ import annotations

from llm_worker.messages import Message, ToolUsePart
from llm_worker.providers._blocks import wrong_type

__all__ = ("CallIds",)

_PART = "a candidate's content part"


class CallIds:
    """Synthesizes tool-call ids `gemini_call_<n>` that continue a conversation's numbering."""

    __slots__ = ("_earlier", "_next", "_taken")

    def __init__(self, messages: list[Message]) -> None:
        ids = [p.id for m in messages for p in m.content if isinstance(p, ToolUsePart)]
        self._earlier = frozenset(ids)
        self._taken = set(ids)
        self._next = len(ids)

    def given(self, call_id: object) -> str | None:
        """An id the provider sent (or `None`), kept out of the ids synthesized later."""
        if call_id is None or call_id == "":
            return None
        if call_id.__class__ is not str:
            raise wrong_type(_PART, "functionCall.id", call_id)
        return call_id  # type: ignore[return-value]

    def neutral(self, given: str | None) -> str:
        """The call's id: `given`, unless a call of the conversation so far has it.

        Two calls with one id would be one call to the Worker (one result for both); the
        repeated id still goes back to Gemini as the call's `item_id`. One id twice in one
        answer is left as it is: the emitter refuses it.
        """
        if given is None or given in self._earlier:
            return self.next()
        self._taken.add(given)
        return given

    def next(self) -> str:
        """The next id not used in the conversation."""
        while True:
            call_id = f"gemini_call_{self._next}"
            self._next += 1
            if call_id not in self._taken:
                self._taken.add(call_id)
                return call_id
