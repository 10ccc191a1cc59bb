"""A scripted model behind a real provider wire format, on 127.0.0.1.

`ScriptedModelServer` answers each request with the next step of its script, encoded as the
chosen provider really streams it (OpenAI Chat Completions, OpenAI Responses, Anthropic
Messages or Gemini). The real provider client talks to it over HTTP, so tests and the offline
demo exercise the actual code path, request building and stream parsing included.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, overload

from typing_extensions import TypeVar

from llm_worker.errors import ConfigurationError
from llm_worker.messages import Request, ToolUsePart
from llm_worker.testing._counting import count_answer
from llm_worker.testing._decode import decode_request
from llm_worker.testing._script import (
    ScriptedRequest,
    ScriptedResponse,
    ScriptExhaustedError,
    ScriptStep,
    ScriptStepError,
    play,
    refuse_add,
    split_script,
)
from llm_worker.testing._server import Chunking, RecordedRequest, WireResponse, WireServer

if TYPE_CHECKING:
    from llm_worker.providers._base import HttpClient
    from llm_worker.providers.anthropic import AnthropicClient
    from llm_worker.providers.gemini import GeminiClient
    from llm_worker.providers.openai_chat import OpenAIChatClient
    from llm_worker.providers.openai_responses import OpenAIResponsesClient

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n")
_GEMINI_MODEL = re.compile(r"/models/(.+):(?:streamGenerateContent|countTokens)$")
# A failed script is answered with a status no client retries: a retry would only repeat the
# failure (or, before a failed step stayed current, play the next step in its place).
_FAILED_STATUS: Final = 424

__all__ = ("WIRE_PROVIDERS", "ScriptStep", "ScriptedModelServer")

WIRE_PROVIDERS: dict[str, tuple[str, str]] = {
    # provider: (client class in llm_worker.providers, the base-URL suffix its paths hang from)
    "openai_chat": ("OpenAIChatClient", "/v1"),
    "openai_responses": ("OpenAIResponsesClient", "/v1"),
    "anthropic": ("AnthropicClient", ""),
    "gemini": ("GeminiClient", "/v1beta"),
}
"""The wire formats a `ScriptedModelServer` can speak."""

ClientT = TypeVar("ClientT", bound="HttpClient", default="HttpClient")
"""The client class `ScriptedModelServer.client()` makes (by the wire format's name)."""


def _encoder(provider: str) -> Callable[..., bytes]:
    if provider not in WIRE_PROVIDERS:
        raise ConfigurationError(
            f"unknown wire format {provider!r}; one of {', '.join(sorted(WIRE_PROVIDERS))}"
        )
    module = importlib.import_module(f"llm_worker.testing._wire_{provider}")
    encode: Callable[..., bytes] = module.encode
    return encode


class ScriptedModelServer(WireServer, Generic[ClientT]):
    """A `WireServer` that plays a scripted model in a real provider's wire format.

    Each request gets the next step of the script: a `ScriptedResponse`, or a callable given
    the `ScriptedRequest` (the request decoded into a neutral `Request`, and the HTTP request)
    that returns one; a single step in place of the script answers every request. An answer
    without `usage` reports a rough count (4 characters a token) of the request it answers
    as its input tokens (`prompt_tokens`), as `ScriptedClient` does, so offline cost and
    budget tests see usage grow with the conversation. The counting endpoints (Anthropic
    `count_tokens`, Gemini `countTokens`, Responses `input_tokens`) answer that same count
    and play no step (they are kept in `requests` like every request).

    A step that fails — its callable raises, or its answer cannot be streamed in this
    format — stays current: it and every later request are answered with
    HTTP 424 and an error (type `script_step_failed`) naming the step, which no client
    retries, and leaving `async with` raises `ScriptStepError` chained to the step's
    exception. A request with no step left is answered the same way (type
    `script_exhausted`) and leaving raises `ScriptExhaustedError`.

    Example:
        ```python
        async with ScriptedModelServer("anthropic", [ScriptedResponse.text("Hi!")]) as server:
            worker = Worker(server.client())
            await worker.run("Hello")
            server.requests[0].json()   # the body the real client sent
        ```
    """

    @overload
    def __init__(
        self: ScriptedModelServer[AnthropicClient],
        provider: Literal["anthropic"],
        responses: Iterable[ScriptStep] | ScriptStep = (),
        *,
        model: str = ...,
        chunking: Chunking | None = ...,
        chunk_delay: float = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ScriptedModelServer[OpenAIChatClient],
        provider: Literal["openai_chat"],
        responses: Iterable[ScriptStep] | ScriptStep = (),
        *,
        model: str = ...,
        chunking: Chunking | None = ...,
        chunk_delay: float = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ScriptedModelServer[OpenAIResponsesClient],
        provider: Literal["openai_responses"],
        responses: Iterable[ScriptStep] | ScriptStep = (),
        *,
        model: str = ...,
        chunking: Chunking | None = ...,
        chunk_delay: float = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ScriptedModelServer[GeminiClient],
        provider: Literal["gemini"],
        responses: Iterable[ScriptStep] | ScriptStep = (),
        *,
        model: str = ...,
        chunking: Chunking | None = ...,
        chunk_delay: float = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ScriptedModelServer[HttpClient],
        provider: str,
        responses: Iterable[ScriptStep] | ScriptStep = (),
        *,
        model: str = ...,
        chunking: Chunking | None = ...,
        chunk_delay: float = ...,
    ) -> None: ...
    def __init__(
        self,
        provider: str,
        responses: Iterable[ScriptStep] | ScriptStep = (),
        *,
        model: str = "scripted-model",
        chunking: Chunking | None = None,
        chunk_delay: float = 0.0,
    ) -> None:
        """Create a server; it listens once started (`async with`).

        Args:
            provider: The wire format: `"anthropic"`, `"gemini"`, `"openai_chat"` or
                `"openai_responses"`.
            responses: The script: one step per request, in order; or one step (a
                `ScriptedResponse` or a callable) that answers every request.
            model: The model name the answers report (and `client()` sends).
            chunking: How each answer's body is split into writes.
            chunk_delay: Seconds between two writes.

        Raises:
            ConfigurationError: An unknown wire format.
        """
        super().__init__(handler=self._play)
        self.provider = provider
        self.model = model
        self._every, self.script = split_script(responses)
        self.chunking = chunking or Chunking.whole()
        self.chunk_delay = chunk_delay
        self._encode = _encoder(provider)
        self._next = 0
        self._calls = 0
        self._failure: ScriptStepError | ScriptExhaustedError | None = None

    def add(self, *responses: ScriptStep) -> None:
        """Append steps to the script.

        Raises:
            ConfigurationError: One step answers every request: nothing would come after it.
        """
        refuse_add(self._every)
        self.script.extend(responses)

    @property
    def remaining(self) -> int:
        """Steps not played yet (a step that answers every request: 1 until its first)."""
        if self._every is not None:
            return 0 if self._next else 1
        return len(self.script) - self._next

    def assert_all_used(self) -> None:
        """Raise `ScriptExhaustedError` if some steps were never requested."""
        if self.remaining:
            raise ScriptExhaustedError(f"{self.remaining} script step(s) were never requested")

    def check(self) -> None:
        """Raise the script's failure, if it had one (leaving `async with` does this).

        Raises:
            ScriptStepError: A step failed; chained to its exception.
            ScriptExhaustedError: A request came with no step left.
        """
        if self._failure is not None:
            raise self._failure

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
        # A cancellation or KeyboardInterrupt goes on as it is. Any other exception of the
        # block is most likely the script's failure as the client saw it: the failure is
        # raised in its place, with a note that keeps what the block raised.
        error = exc_info[1] if len(exc_info) > 1 else None
        if error is not None and not isinstance(error, Exception):
            return
        if error is not None and self._failure is not None:
            self._failure.add_note(f"the `async with` block raised {error!r}")
        self.check()

    def client(self, **options: Any) -> ClientT:
        """A real client of this provider pointed at this server (any API key works).

        Args:
            **options: More arguments for the client's constructor (`retry`, `timeout`,
                `headers`, …); `api_key` defaults to `"test-key"`.

        Raises:
            ConfigurationError: The server is not running (start it first: `async with`).
        """
        from llm_worker import providers

        base_url = self.base_url  # raises when the server is not running
        class_name, suffix = WIRE_PROVIDERS[self.provider]
        cls = getattr(providers, class_name)
        options.setdefault("api_key", "test-key")
        client: ClientT = cls(model=self.model, base_url=base_url + suffix, **options)
        return client

    def _play(self, http: RecordedRequest) -> WireResponse:
        counted = count_answer(self.provider, http, self._model_of(http))
        if counted is not None:
            return counted
        if isinstance(self._failure, ScriptStepError):
            return _failed(self._failure, "script_step_failed")
        step = self._step()
        if step is None:
            exhausted = ScriptExhaustedError(
                f"request {self._next + 1} made, but the script has {len(self.script)} answer(s)"
            )
            self._failure = self._failure or exhausted
            return _failed(exhausted, "script_exhausted")
        try:
            response = self._response(step, http)
            body = self._encoded(response)
        except ScriptStepError as failure:
            self._failure = failure
            return _failed(failure, "script_step_failed")
        self._next += 1
        # Number id-less calls across the whole conversation, as a provider would: a call id
        # that repeats in a later answer is rejected by some providers.
        self._calls += sum(1 for p in response.parts if isinstance(p, ToolUsePart) and not p.id)
        return self._wire(body, response)

    def _step(self) -> ScriptStep | None:
        """The step that answers the next request: the script's next, or the repeated one."""
        if self._every is not None:
            return self._every
        return self.script[self._next] if self._next < len(self.script) else None

    def _response(self, step: ScriptStep, http: RecordedRequest) -> ScriptedResponse:
        """The step's answer to a request, its usage counted from the request if not given.

        Raises:
            ScriptStepError: The request could not be decoded for a callable step, or the
                step raised.
        """
        try:
            request: Request | None = decode_request(
                self.provider, http.json(), model=self._model_of(http)
            )
        except Exception as exc:
            if not isinstance(step, ScriptedResponse):
                raise ScriptStepError(
                    f"{self._where()}: the request could not be decoded: {exc}"
                ) from exc
            request = None  # a fixed answer needs no request: its usage counts the body
        if isinstance(step, ScriptedResponse):
            response = step
        else:
            assert request is not None  # (decoded, or raised above)
            response = play(step, ScriptedRequest(request, self._next, http), self._count())
        if response.usage is not None:
            return response
        usage = response.resolved_usage(
            request, prompt_chars=len(http.body), provider=self.provider
        )
        return dataclasses.replace(response, usage=usage)

    def _encoded(self, response: ScriptedResponse) -> bytes:
        """The answer's body, its id-less calls numbered on from the earlier answers.

        Raises:
            ScriptStepError: The answer cannot be streamed in this wire format.
        """
        numbered = dataclasses.replace(response, parts=response.with_ids(self._calls))
        try:
            return self._encode(numbered, model=self.model)
        except Exception as exc:
            raise ScriptStepError(
                f"{self._where()}: its answer cannot be streamed as {self.provider}: {exc}"
            ) from exc

    def _count(self) -> int:
        # The script's length, for messages; a repeated step counts as the requests so far.
        return len(self.script) if self._every is None else self._next + 1

    def _where(self) -> str:
        return f"script step {self._next + 1} (of {self._count()})"

    def _model_of(self, http: RecordedRequest) -> str:
        # Gemini names the model in the URL only; the others in the body.
        found = _GEMINI_MODEL.search(http.path)
        return found.group(1) if found else self.model

    def _wire(self, body: bytes, response: ScriptedResponse) -> WireResponse:
        if response.delay and not self.chunk_delay:
            # A slow model: one write per SSE event, `delay` seconds apart.
            ends = [m.end() for m in _EVENT_END.finditer(body)]
            sizes = tuple(b - a for a, b in zip([0, *ends], ends, strict=False)) or (len(body),)
            chunking = Chunking("sizes", sizes=sizes)
            return WireResponse(body, chunking=chunking, chunk_delay=response.delay)
        return WireResponse(body, chunking=self.chunking, chunk_delay=self.chunk_delay)


def _failed(failure: Exception, error_type: str) -> WireResponse:
    message = f"{failure} (raised again when the ScriptedModelServer's `async with` exits)"
    return WireResponse(
        {"error": {"type": error_type, "message": message}},
        status=_FAILED_STATUS,
        content_type="application/json",
    )
