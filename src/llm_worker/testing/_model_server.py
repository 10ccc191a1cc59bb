"""A scripted model behind a real provider wire format, on 127.0.0.1.

`ScriptedModelServer` answers each request with the next `ScriptedResponse`, encoded as the
chosen provider really streams it (OpenAI Chat Completions, OpenAI Responses, Anthropic
Messages or Gemini). The real provider client talks to it over HTTP, so tests and the offline
demo exercise the actual code path, request building and stream parsing included.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from llm_worker.errors import ConfigurationError
from llm_worker.messages import ToolUsePart
from llm_worker.testing._script import ScriptedResponse, ScriptExhaustedError
from llm_worker.testing._server import Chunking, RecordedRequest, WireResponse, WireServer

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n")

__all__ = ("WIRE_PROVIDERS", "ScriptStep", "ScriptedModelServer")

ScriptStep: TypeAlias = ScriptedResponse | Callable[[RecordedRequest], ScriptedResponse]
"""One answer of the script: fixed, or computed from the request the client sent (to echo a
tool result or a blob id back, as a real model would)."""

WIRE_PROVIDERS: dict[str, tuple[str, str]] = {
    # provider: (client class in llm_worker.providers, the base-URL suffix its paths hang from)
    "openai_chat": ("OpenAIChatClient", "/v1"),
    "openai_responses": ("OpenAIResponsesClient", "/v1"),
    "anthropic": ("AnthropicClient", ""),
    "gemini": ("GeminiClient", "/v1beta"),
}
"""The wire formats a `ScriptedModelServer` can speak."""


def _encoder(provider: str) -> Callable[..., bytes]:
    if provider not in WIRE_PROVIDERS:
        raise ConfigurationError(
            f"unknown wire format {provider!r}; one of {', '.join(sorted(WIRE_PROVIDERS))}"
        )
    module = importlib.import_module(f"llm_worker.testing._wire_{provider}")
    encode: Callable[..., bytes] = module.encode
    return encode


class ScriptedModelServer(WireServer):
    """A `WireServer` that plays a scripted model in a real provider's wire format.

    Example:
        ```python
        async with ScriptedModelServer("anthropic", [ScriptedResponse.text("Hi!")]) as server:
            worker = Worker(server.client())
            await worker.run("Hello")
            server.requests[0].json()   # the body the real client sent
        ```
    """

    def __init__(
        self,
        provider: str,
        responses: Iterable[ScriptStep] = (),
        *,
        model: str = "scripted-model",
        chunking: Chunking | None = None,
        chunk_delay: float = 0.0,
    ) -> None:
        super().__init__(handler=self._play)
        self.provider = provider
        self.model = model
        self.script: list[ScriptStep] = list(responses)
        self.chunking = chunking or Chunking.whole()
        self.chunk_delay = chunk_delay
        self._encode = _encoder(provider)
        self._next = 0
        self._calls = 0

    def add(self, *responses: ScriptStep) -> None:
        """Append answers to the script."""
        self.script.extend(responses)

    def client(self, **options: Any) -> Any:
        """A real client of this provider pointed at this server (any API key works)."""
        from llm_worker import providers

        class_name, suffix = WIRE_PROVIDERS[self.provider]
        cls = getattr(providers, class_name)
        options.setdefault("api_key", "test-key")
        return cls(model=self.model, base_url=self.base_url + suffix, **options)

    def _play(self, request: RecordedRequest) -> WireResponse:
        if self._next >= len(self.script):
            error = ScriptExhaustedError(
                f"request {self._next + 1} made, but the script has {len(self.script)} answer(s)"
            )
            return WireResponse(
                {"error": {"type": "script_exhausted", "message": str(error)}},
                status=500,
                content_type="application/json",
            )
        step = self.script[self._next]
        self._next += 1
        response = step if isinstance(step, ScriptedResponse) else step(request)
        # Number id-less calls across the whole conversation, as a provider would: a call id
        # that repeats in a later answer is rejected by some providers.
        unnamed = sum(1 for p in response.parts if isinstance(p, ToolUsePart) and not p.id)
        response = dataclasses.replace(response, parts=response.with_ids(self._calls))
        self._calls += unnamed
        body = self._encode(response, model=self.model)
        if response.delay and not self.chunk_delay:
            # A slow model: one write per SSE event, `delay` seconds apart.
            ends = [m.end() for m in _EVENT_END.finditer(body)]
            sizes = tuple(b - a for a, b in zip([0, *ends], ends, strict=False)) or (len(body),)
            chunking = Chunking("sizes", sizes=sizes)
            return WireResponse(body, chunking=chunking, chunk_delay=response.delay)
        return WireResponse(body, chunking=self.chunking, chunk_delay=self.chunk_delay)
