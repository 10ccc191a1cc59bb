"""The model catalog: context windows, output limits, modalities, thinking and prices.

`model_info("anthropic:claude-sonnet-4-5")` answers from three sources, first match first:

1. models you registered (`register_model`): local and fine-tuned models, or an override;
2. genai-prices' data (the `llm-worker[cost]` extra; kept by the pydantic team, ~1,400
   models): the context window and the prices;
3. the library's own table of the four providers' current models (`_models_builtin`): the
   maximum output, input modalities and thinking support that genai-prices does not carry,
   and the window and prices when genai-prices is not installed or does not know the model.

Nothing is loaded at `import llm_worker`: genai-prices' data (half a second to import) on the
first lookup that needs it. Each lookup reads genai-prices' current snapshot (its own lookups
are cached), so prices it updated (`genai_prices.UpdatePrices`) are seen at once.

Token counting lives beside: `TokenCount` is what every client's `count_tokens` returns,
`TokenEstimator` the calibrated estimate behind it. `docs/models.md` tells the sources and
how to override them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from llm_worker._models_builtin import BUILTIN, Row
from llm_worker._tokens import CountSource, TokenCount, TokenEstimator, request_chars
from llm_worker.errors import ConfigurationError, UnknownModelError
from llm_worker.messages import Request

__all__ = (
    "CountSource",
    "ModelInfo",
    "ModelPrices",
    "TokenCount",
    "TokenEstimator",
    "estimate_tokens",
    "model_info",
    "register_model",
    "request_chars",
    "unregister_model",
)

# The prefixes of model strings and client providers, as the company that makes the model.
_MAKER: Final[dict[str, str]] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai_chat": "openai",
    "openai_responses": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "google": "google",
}


@dataclass(slots=True, frozen=True)
class ModelPrices:
    """A model's prices in US dollars per million tokens (the base tier); None: unknown.

    Attributes:
        input: Uncached input tokens.
        output: Output tokens (thinking included).
        cache_read: Input tokens read from the prompt cache.
        cache_write: Input tokens written to the prompt cache (Anthropic's 5-minute write).
    """

    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None


@dataclass(slots=True, frozen=True)
class ModelInfo:
    """What the catalog knows of one model.

    Attributes:
        provider: The catalog's provider (`"anthropic"`, `"openai"`, `"google"`, or the one
            a registration named).
        model: The model's name as looked up.
        context_window: The most input tokens a request may hold, if known.
        max_output_tokens: The most tokens one answer may hold, if known.
        input_modalities: What the model reads (`"text"`, `"image"`, `"pdf"`, `"audio"`,
            `"video"`), or None when unknown.
        thinking: Whether the model can think before answering, or None when unknown.
        prices: Its prices, if known.
        sources: Where the fields came from, in the order applied: `"registered"`,
            `"genai-prices"`, `"built-in"`.
    """

    provider: str
    model: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    input_modalities: frozenset[str] | None = None
    thinking: bool | None = None
    prices: ModelPrices | None = None
    sources: tuple[str, ...] = ()


_registered: dict[str, ModelInfo] = {}
_lock = threading.Lock()
# Bumped by every registration: what a caller cached from `model_info` (a context policy's
# window) is looked up again once it changed, so a later `register_model` takes effect.
_generation = [0]


def catalog_generation() -> int:
    """A number that changes whenever `register_model` or `unregister_model` is called."""
    return _generation[0]


def register_model(
    model: str,
    *,
    context_window: int,
    max_output_tokens: int | None = None,
    input_modalities: Iterable[str] | None = None,
    thinking: bool | None = None,
    prices: ModelPrices | None = None,
) -> ModelInfo:
    """Add a model to the catalog (a local or fine-tuned model), or override an entry.

    Args:
        model: `"provider:model"` (`"openai:my-finetune"`, `"scripted:scripted"`), or a bare
            name, which matches that model on every provider.
        context_window: The most input tokens a request may hold.
        max_output_tokens: The most tokens one answer may hold.
        input_modalities: What it reads (`"text"`, `"image"`, …).
        thinking: Whether it can think before answering.
        prices: Its prices.

    Returns:
        The entry, as `model_info` will answer it.

    Raises:
        ConfigurationError: A window or output limit that is not a positive number.
    """
    limits: tuple[tuple[str, object], ...] = (
        ("context_window", context_window),
        ("max_output_tokens", max_output_tokens),
    )
    for name, value in limits:
        # Checked at run time too: a float or a string is a caller's slip, not a window.
        if value is not None and (type(value) is not int or value <= 0):
            raise ConfigurationError(
                f"register_model: {name} must be a positive int, not {value!r}"
            )
    provider, name = _split(model)
    info = ModelInfo(
        _MAKER.get(provider, provider) or "*",
        name,
        context_window,
        max_output_tokens,
        frozenset(input_modalities) if input_modalities is not None else None,
        thinking,
        prices,
        ("registered",),
    )
    with _lock:
        _registered[_key(provider, name)] = info
        _generation[0] += 1
    return info


def unregister_model(model: str) -> None:
    """Remove what `register_model` added for `model` (nothing if it was not registered)."""
    provider, name = _split(model)
    with _lock:
        _registered.pop(_key(provider, name), None)
        _generation[0] += 1


def model_info(model: str, *, provider: str | None = None) -> ModelInfo:
    """What the catalog knows of a model.

    Args:
        model: `"provider:model"` (`"anthropic:claude-sonnet-4-5"`), or the model's name with
            `provider` given (a client's `provider` and `model`).
        provider: The provider, when `model` has no prefix (`"anthropic"`, `"openai_chat"`, …).

    Raises:
        UnknownModelError: No source knows the model; the message names `register_model`.
    """
    # With `provider` given, `model` is the whole name (a fine-tune's `ft:…` has colons).
    prefix, name = _split(model) if provider is None else ("", model)
    provider = (prefix or provider or "").lower()
    with _lock:
        found = _registered.get(_key(provider, name)) or _registered.get(_key("", name))
    if found is not None:
        # A bare registered name answers for whichever provider asked.
        return replace(found, provider=provider) if found.provider == "*" else found
    info = _looked_up(_MAKER.get(provider, provider), name.lower())
    if info is None:
        raise UnknownModelError(
            f"the model catalog does not know {provider}:{name}: call "
            f"llm_worker.models.register_model({f'{provider}:{name}'!r}, context_window=...) "
            "for a local or fine-tuned model, or give the window yourself "
            "(ContextPolicy(window_tokens=...))",
            model=f"{provider}:{name}",
        )
    return info


def _looked_up(maker: str, name: str) -> ModelInfo | None:
    """genai-prices' entry merged with the built-in row; None when neither has one."""
    row = _builtin(maker, name)
    priced = _genai_prices(maker, name)
    if row is None and priced is None:
        return None
    sources: list[str] = []
    window = prices = None
    if priced is not None:
        window, prices = priced
        sources.append("genai-prices")
    if row is not None:
        sources.append("built-in")
    return ModelInfo(
        maker,
        name,
        window or (row.context_window if row else None),
        row.max_output_tokens if row else None,
        frozenset(row.modalities) if row else None,
        row.thinking if row else None,
        prices or (_row_prices(row) if row else None),
        tuple(sources),
    )


def _builtin(maker: str, name: str) -> Row | None:
    """The row of the longest built-in name that `name` is, or starts with at a `-`."""
    table = BUILTIN.get(maker, {})
    best = ""
    for known in table:
        fits = name == known or name.startswith(known + "-")
        if fits and len(known) > len(best):
            best = known
    return table[best] if best else None


def _row_prices(row: Row) -> ModelPrices:
    values = [Decimal(v) if v is not None else None for v in row.prices]
    return ModelPrices(*values)


def _genai_prices(maker: str, name: str) -> tuple[int | None, ModelPrices | None] | None:
    """`(context window, prices)` from genai-prices' data; None without it or the model."""
    try:
        from genai_prices.data_snapshot import get_snapshot
    except ImportError:  # the `cost` extra is optional: the built-in table stands in
        return None
    try:
        _, found = get_snapshot().find_provider_model(name, None, maker, None)
    except LookupError:
        return None
    window: Any = found.context_window
    return (window if isinstance(window, int) else None), _prices_of(found.prices)


def _prices_of(given: Any) -> ModelPrices | None:
    # Any: genai-prices' ModelPrice, or a list of conditional prices, the last in force winning.
    prices: Any = given
    if isinstance(given, list):
        now = datetime.now(UTC)
        conditional: list[Any] = given  # pyright: ignore[reportUnknownVariableType]
        current = [c for c in conditional if c.constraint is None or c.constraint.active(now)]
        if not current:
            return None
        prices = current[-1].prices
    fields = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
    return ModelPrices(*(_base(getattr(prices, f, None)) for f in fields))


def _base(price: Any) -> Decimal | None:
    # A tiered price (more per token past 200k on some models) gives its base tier.
    price = getattr(price, "base", price)
    return price if isinstance(price, Decimal) else None


def _split(model: str) -> tuple[str, str]:
    prefix, colon, name = model.partition(":")
    if not colon:
        return "", model
    if not name:
        raise ConfigurationError(f"no model name in {model!r}: expected 'provider:model'")
    return prefix.lower(), name


def _key(provider: str, name: str) -> str:
    return f"{_MAKER.get(provider, provider)}:{name.lower()}"


def estimate_tokens(request: Request, estimator: TokenEstimator | None = None) -> TokenCount:
    """A request's estimated input tokens: `estimator.estimate`, else 4 characters a token."""
    return (estimator or TokenEstimator()).estimate(request)
