"""OpenAI's refusals that only the caller can cure, as a `ConfigurationError` saying how.

An organization that is not verified is refused reasoning summaries (Responses) and the
streaming of some models (o3 and later, on both APIs). Retrying cannot help, so the HTTP error
becomes a configuration error naming the fix; OpenAI's own words stay in its message.
"""

from __future__ import annotations

from typing import Final

from llm_worker.errors import APIStatusError, ConfigurationError, LLMWorkerError, ProviderError

__all__ = ("unverified_organization",)

_VERIFY: Final = (
    "Verify the organization at https://platform.openai.com/settings/organization/general "
    "(it can take 15 minutes to apply)"
)
_CURES: Final[dict[str, str]] = {
    "must be verified to generate reasoning summaries": (
        "OpenAI generates reasoning summaries only for verified organizations, and this "
        "request asked for one (ThinkingConfig(include_thoughts=True) or a `reasoning.summary` "
        f"option). {_VERIFY}, or leave include_thoughts unset: the model still reasons, "
        "without a summary to show."
    ),
    "must be verified to stream this model": (
        "OpenAI streams this model only for verified organizations, and llm-worker always "
        f"streams. {_VERIFY}, or choose a model your organization may stream."
    ),
}


def unverified_organization(exc: ProviderError) -> LLMWorkerError | None:
    """The configuration error for an unverified organization's refusal, else `None`."""
    if not isinstance(exc, APIStatusError):
        return None
    for words, cure in _CURES.items():
        if words in exc.message:
            return ConfigurationError(f"{cure} OpenAI said: {exc.message}")
    return None
