"""Anthropic usage: a compaction's own sampling and the cache writes by lifetime."""

from __future__ import annotations

from typing import Any, Final

from llm_worker._json import as_dict, as_int

__all__ = ("INPUT_KEYS", "cache_split", "compaction_usage")

INPUT_KEYS: Final = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
# Usage iterations of the answer's own model (an advisor's are another model's tokens).
_OWN_ITERATIONS: Final = frozenset({"message", "compaction", "fallback_message"})


def compaction_usage(iterations: list[Any]) -> list[int]:
    """Uncached input, cache read, cache creation and output of the compaction iterations."""
    sums = [0, 0, 0, 0]
    for entry in iterations:
        item = as_dict(entry)
        if item.get("type") != "compaction":
            continue
        for n, key in enumerate((*INPUT_KEYS, "output_tokens")):
            sums[n] += as_int(item.get(key)) or 0
    return sums


def cache_split(fields: dict[str, Any], iterations: list[Any]) -> tuple[int | None, int | None]:
    """Cache writes by lifetime (5 minutes, 1 hour): the iterations' sum, when listed."""
    if not iterations:
        split = as_dict(fields.get("cache_creation"))
        return (
            as_int(split.get("ephemeral_5m_input_tokens")),
            as_int(split.get("ephemeral_1h_input_tokens")),
        )
    five_minutes: int | None = None
    one_hour: int | None = None
    for entry in iterations:
        item = as_dict(entry)
        split = as_dict(item.get("cache_creation"))
        if item.get("type") not in _OWN_ITERATIONS or not split:
            continue
        five_minutes = (five_minutes or 0) + (as_int(split.get("ephemeral_5m_input_tokens")) or 0)
        one_hour = (one_hour or 0) + (as_int(split.get("ephemeral_1h_input_tokens")) or 0)
    return five_minutes, one_hour
