"""A Chat Completions usage object as a `UsageEvent`: every provider's names for its counts."""

from __future__ import annotations

from typing import Any

from llm_worker._json import as_dict, as_int
from llm_worker.events import UsageEvent

__all__ = ["usage_event"]


def usage_event(usage: dict[str, Any]) -> UsageEvent:
    """The usage event of a chunk's (or Groq's `x_groq`) `usage` object."""
    prompt = as_dict(usage.get("prompt_tokens_details"))
    completion = as_dict(usage.get("completion_tokens_details"))
    cached = as_int(prompt.get("cached_tokens"))
    if cached is None:
        cached = as_int(usage.get("prompt_cache_hit_tokens"))  # DeepSeek's own name
    return UsageEvent(
        input_tokens=as_int(usage.get("prompt_tokens")),
        output_tokens=as_int(usage.get("completion_tokens")),
        total_tokens=as_int(usage.get("total_tokens")),
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=as_int(prompt.get("cache_write_tokens")),  # OpenRouter
        reasoning_tokens=as_int(completion.get("reasoning_tokens")),
        audio_input_tokens=as_int(prompt.get("audio_tokens")),
        audio_output_tokens=as_int(completion.get("audio_tokens")),
        accepted_prediction_tokens=as_int(completion.get("accepted_prediction_tokens")),
        rejected_prediction_tokens=as_int(completion.get("rejected_prediction_tokens")),
    )
