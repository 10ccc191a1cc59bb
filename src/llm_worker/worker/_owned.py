"""The client a Worker makes from a model string, or a fallback client from several."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_worker.providers._base import HttpClient, LLMClient
    from llm_worker.providers._fallback import FallbackClient

__all__ = ("owned_client",)


def owned_client(
    client: LLMClient | str | Sequence[str],
) -> tuple[LLMClient, HttpClient | FallbackClient | None]:
    """The client, and the one the Worker made from model strings (it closes that one)."""
    if isinstance(client, str):
        from llm_worker.providers import from_string

        made = from_string(client)
        return made, made
    if isinstance(client, Sequence):
        from llm_worker.providers._fallback import FallbackClient

        fallback = FallbackClient.from_models(client)
        return fallback, fallback
    return client, None
