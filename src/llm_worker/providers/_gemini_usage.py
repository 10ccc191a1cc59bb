"""Gemini's `usageMetadata` as the neutral `UsageEvent` snapshot.

Gemini repeats its running counts in every chunk; the client makes a snapshot at most once
per network read, when a count it reads changed (`GeminiClient`'s `end_of_read`). Paced, one
chunk per read, that is once per event: the six counts are read and checked inline, and the
event is built field by field.
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker.events import UsageEvent

__all__ = ("Counts", "counts_of", "snapshot")

_new = object.__new__

Counts = tuple[int | None, int | None, int | None, int | None, int | None]
_NO_COUNTS: Final[Counts] = (None, None, None, None, None)


def counts_of(usage: Any) -> Counts:
    """The counts a usage snapshot holds, from the six of a `usageMetadata` this library reads.

    Input (prompt, cached included, + tool-use prompt), output (candidates + thoughts),
    total, cached content, thoughts; a count that is no integer is `None` (`as_int`'s rule,
    inline: it runs once per paced event). The snapshot's own values, not the six raw
    counts: raw counts that change while their sums stay (a count moved from the prompt to
    the tool-use prompt) are no new snapshot.
    """
    if usage.__class__ is not dict:
        return _NO_COUNTS
    get = usage.get
    prompt, tool_prompt, candidates, thoughts, total, cached = (
        get("promptTokenCount"),
        get("toolUsePromptTokenCount"),
        get("candidatesTokenCount"),
        get("thoughtsTokenCount"),
        get("totalTokenCount"),
        get("cachedContentTokenCount"),
    )
    prompt = prompt if prompt.__class__ is int else None
    candidates = candidates if candidates.__class__ is int else None
    # The sums inline (no call per paced event): each side counts when it is an integer.
    if tool_prompt.__class__ is int:
        prompt = tool_prompt if prompt is None else prompt + tool_prompt
    if thoughts.__class__ is int:
        candidates = thoughts if candidates is None else candidates + thoughts
    else:
        thoughts = None
    return (
        prompt,
        candidates,
        total if total.__class__ is int else None,
        cached if cached.__class__ is int else None,
        thoughts,
    )


def snapshot(counts: Counts) -> UsageEvent:
    """`UsageEvent(input, output, total, cached, None, thoughts)`, built field by field.

    Calling the class enters its `__init__` from C (an interpreter frame and sixteen stores
    behind it); paced, a snapshot is built per event. Every field is set, as the
    emitter's text events are (tests/providers/test_gemini_usage_per_read.py holds it equal
    to the constructed one).
    """
    event = _new(UsageEvent)
    (
        event.input_tokens,
        event.output_tokens,
        event.total_tokens,
        event.cache_read_input_tokens,
        event.reasoning_tokens,
    ) = counts
    event.cache_creation_input_tokens = event.cache_creation_5m_input_tokens = None
    event.cache_creation_1h_input_tokens = event.web_search_requests = None
    event.web_fetch_requests = event.audio_input_tokens = event.audio_output_tokens = None
    event.accepted_prediction_tokens = event.rejected_prediction_tokens = None
    event.path = ()
    return event
