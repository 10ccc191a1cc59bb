"""Provider request bodies read back into the neutral `Request`: what a scripted model reads.

A `ScriptedModelServer` receives each request as the real client built it, in its provider's
wire format. `decode_request` turns such a body back into the provider-neutral `Request`, so
that a callable script step reads the conversation the same way behind every wire format
(`llm_worker.testing._decode_<provider>` holds one decoder per format, the inverse of that
client's `build_body` for everything it emits).

What a body cannot say is left at its neutral default, the same way on every format: a tool
result's `name` is taken from the call it answers; opaque continuation data (signatures,
redacted thinking, item ids, provider-native blocks) gets an `Origin` of that provider and
the body's model, as the Worker's own history would have it; top-level fields the decoder does
not map (`top_k`, `metadata`, `store`, hosted tools, …) go to `Request.options`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final

from llm_worker._json import as_dict
from llm_worker.errors import ConfigurationError, InvalidMessagesError
from llm_worker.messages import Request

__all__ = ("decode_request",)

_FORMATS: Final = ("anthropic", "gemini", "openai_chat", "openai_responses")


def decode_request(provider: str, body: object, *, model: str = "") -> Request:
    """Read a provider's request body back into the neutral `Request`.

    Args:
        provider: The wire format: `"anthropic"`, `"gemini"`, `"openai_chat"` or
            `"openai_responses"`.
        body: The parsed JSON body (`RecordedRequest.json()`).
        model: The model the request was sent to, for the `Origin` of opaque data when the
            body does not name it (Gemini names it in the URL only).

    Raises:
        ConfigurationError: An unknown wire format.
        InvalidMessagesError: The body is not a JSON object, or holds a message, part or tool
            argument text of a shape the format does not have.
    """
    if provider not in _FORMATS:
        raise ConfigurationError(f"unknown wire format {provider!r}; one of {', '.join(_FORMATS)}")
    data = as_dict(body)
    if data is not body:  # as_dict gives its argument back only when it is a JSON object
        raise InvalidMessagesError(
            f"the {provider} request body must be a JSON object, not {type(body).__name__}"
        )
    decode: Callable[..., Request] = importlib.import_module(
        f"llm_worker.testing._decode_{provider}"
    ).decode
    return decode(data, model=model)
