"""Provider clients, one per wire protocol, all yielding the events of `llm_worker.events`.

| class | protocol | key from | base URL from |
|---|---|---|---|
| `OpenAIChatClient` | OpenAI Chat Completions, compatibles | `OPENAI_API_KEY` | `OPENAI_BASE_URL` |
| `OpenAIResponsesClient` | OpenAI Responses | `OPENAI_API_KEY` | `OPENAI_BASE_URL` |
| `AnthropicClient` | Anthropic Messages | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` |
| `GeminiClient` | Google Gemini | `GEMINI_API_KEY`, `GOOGLE_API_KEY` | `GOOGLE_GEMINI_BASE_URL` |

The base-URL variables are read as the official SDKs read them (`GOOGLE_GEMINI_BASE_URL` is
the root without the API version); a `base_url` passed to the constructor wins over them.
Each class is imported on first use. `from_string("anthropic:claude-sonnet-4-5")` picks one;
`model_from_env()` names a model of the first provider whose API key is set.
`FallbackClient` sends each request to the first of several clients that answers (with a
`Cooldown` per client shared by the process); `KeyPool` rotates several API keys of one model.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from llm_worker.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_worker.providers._base import HttpClient, LLMClient
    from llm_worker.providers._cooldown import Cooldown
    from llm_worker.providers._fallback import FallbackClient
    from llm_worker.providers._http import RetryPolicy
    from llm_worker.providers._key_pool import KeyPool
    from llm_worker.providers.anthropic import AnthropicClient
    from llm_worker.providers.gemini import GeminiClient
    from llm_worker.providers.openai_chat import OpenAIChatClient
    from llm_worker.providers.openai_responses import OpenAIResponsesClient

_LAZY: dict[str, str] = {
    "OpenAIChatClient": "llm_worker.providers.openai_chat",
    "OpenAIResponsesClient": "llm_worker.providers.openai_responses",
    "AnthropicClient": "llm_worker.providers.anthropic",
    "GeminiClient": "llm_worker.providers.gemini",
    "Cooldown": "llm_worker.providers._cooldown",
    "FallbackClient": "llm_worker.providers._fallback",
    "KeyPool": "llm_worker.providers._key_pool",
    "HttpClient": "llm_worker.providers._base",
    "LLMClient": "llm_worker.providers._base",
    "RetryPolicy": "llm_worker.providers._http",
}

# The prefixes of a model string ("anthropic:claude-sonnet-4-5") and the client they pick.
PROVIDER_PREFIXES: dict[str, str] = {
    "openai": "OpenAIChatClient",
    "openai_chat": "OpenAIChatClient",
    "openai-responses": "OpenAIResponsesClient",
    "openai_responses": "OpenAIResponsesClient",
    "anthropic": "AnthropicClient",
    "gemini": "GeminiClient",
    "google": "GeminiClient",
}

__all__ = (
    "DEFAULT_MODELS",
    "PROVIDER_PREFIXES",
    "AnthropicClient",
    "Cooldown",
    "FallbackClient",
    "GeminiClient",
    "HttpClient",
    "KeyPool",
    "LLMClient",
    "OpenAIChatClient",
    "OpenAIResponsesClient",
    "RetryPolicy",
    "from_string",
    "model_from_env",
)

DEFAULT_MODELS: dict[str, str] = {
    "ANTHROPIC_API_KEY": "anthropic:claude-sonnet-4-5",
    "OPENAI_API_KEY": "openai:gpt-4.1-mini",
    "GEMINI_API_KEY": "gemini:gemini-2.5-flash",
    "GOOGLE_API_KEY": "gemini:gemini-2.5-flash",
}
"""The model `model_from_env` picks for each API key variable, in the order it looks."""


def model_from_env(explicit: str | None = None) -> str | None:
    """The model string to run live: `explicit` if given, else the first provider's with a key.

    Looks at `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GEMINI_API_KEY`, `GOOGLE_API_KEY` in that
    order (see `DEFAULT_MODELS`).

    Returns:
        A `"provider:model"` string for `from_string`, or `None` when no key is set.
    """
    if explicit:
        return explicit
    for env, model in DEFAULT_MODELS.items():
        if os.environ.get(env):
            return model
    return None


def from_string(model: str, **options: Any) -> HttpClient:
    """Build the client a model string names: `"provider:model"`.

    Prefixes: `openai` (Chat Completions), `openai-responses`, `anthropic`, `gemini` (or
    `google`). Other keyword arguments go to the client's constructor (`api_key`, `base_url`,
    `http_client`, `timeout`, `retry`, `headers`); without `base_url`, the provider's base-URL
    variable (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`) is honoured.

    Raises:
        ConfigurationError: The string has no known `provider:` prefix or no model name.
    """
    prefix, colon, name = model.partition(":")
    if not colon or not name or prefix.lower() not in PROVIDER_PREFIXES:
        known = ", ".join(sorted(PROVIDER_PREFIXES))
        raise ConfigurationError(
            f"unknown model string {model!r}: expected 'provider:model' with provider one of "
            f"{known} (e.g. 'anthropic:claude-sonnet-4-5')"
        )
    cls = __getattr__(PROVIDER_PREFIXES[prefix.lower()])
    return cls(model=name, **options)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_worker.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
