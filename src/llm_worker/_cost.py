"""A request's price from its token usage, by the `genai-prices` table (`llm-worker[cost]`).

The table is kept by the pydantic team and covers the providers llm-worker speaks to, with
cache read and write prices. A model the table does not know has no price here: None, never
a guess from a similar name.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from llm_worker._extras import require_extra
from llm_worker.events import UsageEvent

__all__ = ("price",)

# Our provider names, as genai-prices names the company that sets the price.
_PRICED_BY = {
    "anthropic": "anthropic",
    "openai_chat": "openai",
    "openai_responses": "openai",
    "gemini": "google",
}


def price(provider: str, model: str, usage: UsageEvent) -> Decimal | None:
    """The US dollar price of one request, or None when the provider or model is unknown.

    Raises:
        MissingExtraError: `genai-prices` is not installed.
    """
    prices = require_extra("genai_prices", "cost", feature="cost estimates")
    priced_by = _PRICED_BY.get(provider)
    if priced_by is None or not model or usage.input_tokens is None:
        return None
    try:
        calculation = prices.calc_price(
            prices.Usage(**_counts(usage)), model, provider_id=priced_by
        )
    except LookupError:
        return None
    except ValueError:
        # Counts the table refuses (more cached tokens than prompt tokens): no price, not a guess.
        return None
    total: Any = calculation.total_price
    return Decimal(total)


def _counts(usage: UsageEvent) -> dict[str, int]:
    # Both count every prompt token in `input_tokens`, cached ones included.
    counts = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_input_tokens,
        "cache_write_tokens": usage.cache_creation_input_tokens,
        "input_audio_tokens": usage.audio_input_tokens,
        "output_audio_tokens": usage.audio_output_tokens,
    }
    return {k: v for k, v in counts.items() if v is not None}
