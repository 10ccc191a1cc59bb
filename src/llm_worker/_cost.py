"""A request's price from its token usage, by the `genai-prices` table (`llm-worker[cost]`).

The table is kept by the pydantic team and covers the providers llm-worker speaks to, with
cache read and write prices. A model the table does not know has no price here: None, never
a guess from a similar name.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from llm_worker._extras import require_extra
from llm_worker._json import as_dict, as_int, as_str
from llm_worker.events import USAGE_FIELDS, UsageEvent

__all__ = ("RequestUsage", "cache_hit_rate", "price", "total_cost")

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


@dataclass(slots=True, frozen=True)
class RequestUsage:
    """The token usage of one model request, with what prices it.

    Attributes:
        provider: The client's provider (`"anthropic"`, `"openai_chat"`, …).
        model: The model that answered (the provider's name for it), else the one requested.
        usage: The request's usage (its stream retries included).
    """

    provider: str
    model: str
    usage: UsageEvent

    @property
    def cost(self) -> Decimal | None:
        """The request's estimated price in US dollars, or None when the model is unknown.

        Prices come from `genai-prices` (the `llm-worker[cost]` extra); cache reads and
        writes are priced as such. Never a guess: an unknown provider or model, or a request
        without token counts, or counts the table cannot price, gives None.

        Raises:
            MissingExtraError: `genai-prices` is not installed.
        """
        return price(self.provider, self.model, self.usage)

    @property
    def cache_read_tokens(self) -> int:
        """The request's input tokens read from the prompt cache (0 when none were reported)."""
        return self.usage.cache_read_input_tokens or 0

    @property
    def cache_write_tokens(self) -> int:
        """The request's input tokens written to the prompt cache (0 when none were reported)."""
        return self.usage.cache_creation_input_tokens or 0

    def to_dict(self) -> dict[str, Any]:
        """Serialize to plain JSON-ready data."""
        usage = {k: v for k in USAGE_FIELDS if (v := getattr(self.usage, k)) is not None}
        return {"provider": self.provider, "model": self.model, "usage": usage}

    @classmethod
    def from_dict(cls, data: object) -> RequestUsage:
        """Load what `to_dict` wrote."""
        body = as_dict(data)
        usage = as_dict(body.get("usage"))
        return cls(
            as_str(body.get("provider")) or "",
            as_str(body.get("model")) or "",
            UsageEvent(*(as_int(usage.get(k)) for k in USAGE_FIELDS)),
        )


def cache_hit_rate(requests: list[RequestUsage]) -> float | None:
    """Cache reads over input tokens, summed over the requests that reported input tokens."""
    read = total = 0
    for request in requests:
        if request.usage.input_tokens is not None:
            total += request.usage.input_tokens
            read += request.cache_read_tokens
    return read / total if total else None


def total_cost(requests: list[RequestUsage]) -> Decimal | None:
    """The sum of the requests' costs (0 for none); None when any of them is unknown."""
    total = Decimal(0)
    for request in requests:
        cost = request.cost
        if cost is None:
            return None
        total += cost
    return total
