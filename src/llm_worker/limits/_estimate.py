"""A request's input tokens before it is sent: the provider's counter where the client has one.

A client with a `count_tokens(request)` method (every `HttpClient`: the provider's counting
endpoint where it has one, else its calibrated estimate; `ScriptedClient`) is asked; any
other client, or a counter that fails, gets the estimate of 4 characters a token over what
the request says (text, thinking, tool calls and results, the system prompt and the tools'
schemas). The estimate says which it is: `LimitExceededError` messages carry it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_worker._log import logger
from llm_worker._tokens import media_provider, request_chars
from llm_worker.messages import Request

if TYPE_CHECKING:
    from llm_worker.providers._base import LLMClient

__all__ = ("CHARS_PER_TOKEN", "Estimate", "estimate_input")

CHARS_PER_TOKEN = 4
_log = logger("llm_worker.limits")


@dataclass(slots=True, frozen=True)
class Estimate:
    """A request's input tokens, and how they were counted (for the error messages)."""

    tokens: int
    how: str


async def estimate_input(client: LLMClient, request: Request) -> Estimate:
    """The request's input tokens by the client's counter, else by characters."""
    counter: Any = getattr(client, "count_tokens", None)
    if callable(counter):
        try:
            counted: Any = counter(request)
            if inspect.isawaitable(counted):
                counted = await counted
            tokens = int(getattr(counted, "input_tokens", counted))
        except Exception as exc:  # a counter is a help, never a reason to fail the run
            _log.debug("count_tokens failed, estimating by characters: %r", exc)
        else:
            source = getattr(counted, "source", "provider")
            return Estimate(tokens, f"input by {type(client).__name__}.count_tokens ({source})")
    tokens = chars_estimate(request, media_provider(client))
    return Estimate(tokens, "input estimated at 4 characters a token")


def chars_estimate(request: Request, provider: str | None = None) -> int:
    """Input tokens at 4 characters a token (at least 1), over what the request says.

    The characters are `request_chars`' (the same count the calibrated estimate and the
    scripted servers' usage use), so a budget and a context policy agree on a request's size.
    """
    return request_chars(request, provider) // CHARS_PER_TOKEN + 1
