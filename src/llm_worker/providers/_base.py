"""What every provider client shares: the constructor, the key handling and `stream()`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, Self, cast, runtime_checkable

import orjson

from llm_worker._json import as_dict
from llm_worker._tokens import TokenCount, TokenEstimator
from llm_worker.errors import ConfigurationError, InvalidMessagesError, MalformedStreamError
from llm_worker.events import Event
from llm_worker.messages import Request, SpecificTool, ToolChoice
from llm_worker.providers._blocks import StreamMapper, drive
from llm_worker.providers._body import encoded_request
from llm_worker.providers._counting import count_request, read_count
from llm_worker.providers._http import RetryPolicy, Transport, TransportChoice
from llm_worker.providers._settings import (
    DEFAULT_MAX_ANSWER_CHARS,
    DEFAULT_MAX_CONCURRENCY,
    checked_answer_chars,
)
from llm_worker.providers._sse import DEFAULT_MAX_EVENT_BYTES

if TYPE_CHECKING:
    import aiohttp
    import httpx

__all__ = ("HttpClient", "LLMClient", "checked_tool_choice", "deep_merge", "unsupported_part")


@runtime_checkable
class LLMClient(Protocol):
    """Anything that streams a neutral request as normalized events.

    The four provider clients implement it, and so does `llm_worker.testing.ScriptedClient`.
    """

    @property
    def provider(self) -> str:
        """The wire protocol's name (`"anthropic"`, `"openai_chat"`, …)."""
        ...

    @property
    def model(self) -> str:
        """The model name sent in requests."""
        ...

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Send the request and yield the answer's events as they arrive."""
        ...


class HttpClient:
    """Base of the HTTP provider clients: keys, base URL, transport, `stream()`.

    Subclasses set the class attributes and implement `build_body`, `path` and `mapper`.

    Args:
        model: The model name, as the provider spells it.
        api_key: The API key; by default the provider's usual environment variable.
            Optional when a base URL (given or from the environment) needs none.
        base_url: The API root (OpenAI-compatible servers, proxies, local servers); by
            default as each official SDK reads it: `OPENAI_BASE_URL` (with `/v1`),
            `ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL` (without the API version).
        http_client: A shared `httpx.AsyncClient` or `aiohttp.ClientSession` (proxies,
            custom auth, TLS settings); not closed by this client.
        timeout: Seconds, or an `httpx.Timeout` / `aiohttp.ClientTimeout`; the read
            timeout bounds the silence between two chunks of a stream.
        retry: The retry policy for failures before the answer begins
            (`RetryPolicy.disabled()` turns retries off).
        headers: Extra headers sent with every request (beta flags, organization).
        max_concurrency: Requests in flight at once through this client; more wait their
            turn (an own HTTP client gets a pool of this size). Counted per thread: event
            loops running at once in threads each get their own pool and count. 1,000 by
            default, as the official SDKs' pools: a stream holds its connection for the whole
            answer, and a lower cap makes the streams past it wait for whole answers to end.
            `None` removes the cap, and an own HTTP client's pool bound with it — set it to
            your pool size when you pass an `http_client` with more connections.
        max_event_bytes: The most bytes one unfinished event (an SSE line or event, a JSON
            answer) may hold; past it the stream fails (16 MiB; `docs/guarantees.md`).
        transport: The HTTP library: `"auto"` (the default: aiohttp under asyncio, about
            half the CPU per event of httpx; httpx under trio, where aiohttp does not
            run; resolved at each request by the running loop), `"httpx"` or `"aiohttp"`
            (asyncio only). Left out: `http_client`'s library, else the
            `LLM_WORKER_TRANSPORT` environment variable, else `"auto"`.
        max_answer_chars: The most characters one answer may hold (text, thinking, tool
            arguments and signatures together); past it the stream fails with
            `AnswerTooLargeError` and nothing more is read (64 Mi; `docs/guarantees.md`).

    Raises:
        ConfigurationError: No API key for the provider's own API, a base URL that is not
            http(s), a bad `max_event_bytes` or `max_answer_chars`, or transport settings
            that do not fit.
        MissingExtraError: `transport="aiohttp"` with aiohttp not installed.
    """

    provider: str  # set by each subclass (a class attribute)
    default_base_url: ClassVar[str]
    api_key_env: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | aiohttp.ClientSession | None = None,
        timeout: float | httpx.Timeout | aiohttp.ClientTimeout | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        transport: TransportChoice | None = None,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
    ) -> None:
        """Create a client; the class docstring describes the arguments and errors."""
        self._model = model
        self.estimator = TokenEstimator(self.provider)
        """`count_tokens`' estimate where the provider has no counting endpoint; a Worker
        calibrates it with each answer's usage (`estimator.observe_request(request, tokens)`
        does it by hand)."""
        self.max_answer_chars = checked_answer_chars(max_answer_chars)
        key, variable, base_url = _key_and_base(self, api_key, base_url)
        all_headers = {**_STREAM_HEADERS, **self.auth_headers(key), **(headers or {})}
        with _naming(variable):
            self.transport = Transport(
                provider=self.provider,
                base_url=base_url or self.default_base_url,
                headers=all_headers,
                secret=key,
                http_client=http_client,
                timeout=timeout,
                retry=retry,
                max_concurrency=max_concurrency,
                max_event_bytes=max_event_bytes,
                transport=transport,
            )

    @property
    def model(self) -> str:
        """The model name sent in requests."""
        return self._model

    def __repr__(self) -> str:
        base_url = self.transport.scrub(self.transport.base_url)
        return f"{type(self).__name__}(model={self._model!r}, base_url={base_url!r})"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The headers that carry the key (`Authorization: Bearer` unless overridden)."""
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def build_body(self, request: Request) -> dict[str, Any]:
        """The provider's JSON body for a neutral request."""
        raise NotImplementedError

    def path(self, request: Request) -> str:
        """The path (below `base_url`) to POST to."""
        raise NotImplementedError

    def params(self, request: Request) -> dict[str, str] | None:
        """Query parameters, if the provider needs any."""
        return None

    def mapper(self, request: Request) -> StreamMapper:
        """A fresh chunk mapper for one response."""
        raise NotImplementedError

    def count_request(self, request: Request) -> tuple[str, dict[str, Any]] | None:
        """`(path, body)` of the provider's token-counting endpoint; None where it has none."""
        return count_request(self, request)

    async def count_tokens(self, request: Request) -> TokenCount:
        """The input tokens `request` would use.

        The provider's counting endpoint where it has one (Anthropic `count_tokens`, Gemini
        `countTokens`, OpenAI Responses `input_tokens`; free, not billed as a request),
        else an estimate from the request's characters at the ratio the usage of this
        client's earlier answers showed (`TokenCount.source` says which). An endpoint's
        answer also calibrates the estimate.

        Raises:
            ProviderError: A typed subclass when the counting request fails.
            MalformedStreamError: The endpoint's answer holds no count.
        """
        counting = self.count_request(request)
        if counting is None:
            return self.estimator.estimate(request)
        path, body = counting
        raw = b"".join([chunk async for chunk in self.transport.stream(path, body)])
        try:
            tokens = read_count(self.provider, as_dict(orjson.loads(raw)))
        except orjson.JSONDecodeError:
            tokens = None
        if tokens is None:
            raise MalformedStreamError(
                f"the token-counting answer of {self.provider} holds no count",
                provider=self.provider,
            )
        self.estimator.observe_request(request, tokens)
        return TokenCount(tokens, "provider")

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Send the request and yield the answer's normalized events as they arrive.

        Raises:
            ProviderError: A typed subclass for every failure, after the abort, error and
                FAILED status events.
        """
        body = encoded_request(self.build_body, request)  # the JSON; no dict alive past it
        chunks = self.transport.stream(self.path(request), body, params=self.params(request))
        return drive(
            chunks,
            partial(self.mapper, request),  # made at the first bytes (see `drive`)
            provider=self.provider,
            scrub=self.transport.scrub,
            max_event_bytes=self.transport.max_event_bytes,
            max_answer_chars=self.max_answer_chars,
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pool if this client created it.

        A pool you passed in (`http_client=`) is left open. The client stays usable: its next
        request opens a new pool.
        """
        await self.transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# The variable each provider's official SDK reads its base URL from, and the path this
# client's base URL has beyond it: google-genai appends the API version to
# GOOGLE_GEMINI_BASE_URL; OPENAI_BASE_URL ends in `/v1`, as this client's base URL does.
_BASE_URL_ENV: Final[dict[str, tuple[str, str]]] = {
    "openai_chat": ("OPENAI_BASE_URL", ""),
    "openai_responses": ("OPENAI_BASE_URL", ""),
    "anthropic": ("ANTHROPIC_BASE_URL", ""),
    "gemini": ("GOOGLE_GEMINI_BASE_URL", "/v1beta"),
}


def _key_and_base(
    client: HttpClient, api_key: str | None, base_url: str | None
) -> tuple[str | None, str | None, str | None]:
    """`(key, variable, base URL)`; without a key, a base URL is needed (a local server)."""
    key = api_key if api_key is not None else _env_key(client.api_key_env)
    variable, base_url = _base_url(client.provider, base_url)
    if key is None and base_url is None:
        raise _no_key(client.provider, client.api_key_env)
    return key, variable, base_url


def _base_url(provider: str, given: str | None) -> tuple[str | None, str | None]:
    """`(variable, base URL)`: the given one, else the provider's variable's, else `None`s."""
    variable, suffix = _BASE_URL_ENV.get(provider, ("", ""))
    value = os.environ.get(variable, "").strip() if variable and given is None else None
    if not value:  # unset or blank; surrounding whitespace is a pasted newline, not a URL
        return None, given
    return variable, value.rstrip("/") + suffix


@contextmanager
def _naming(variable: str | None) -> Generator[None]:
    """Name the environment variable a base URL came from in the error it causes."""
    try:
        yield
    except ConfigurationError as exc:
        if variable is None:
            raise
        raise ConfigurationError(f"{variable} is not a usable base URL: {exc}") from exc


_STREAM_HEADERS: Final = {"content-type": "application/json", "accept": "text/event-stream"}


def _no_key(provider: str, variables: tuple[str, ...]) -> ConfigurationError:
    names = " or ".join(variables)
    return ConfigurationError(f"no API key for {provider}: set {names} or pass api_key=...")


def _env_key(names: tuple[str, ...]) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `extra` (a request's `options`) into `base` (the body the client built).

    The rule, the same on every provider:

    - objects are merged key by key, recursively;
    - lists are merged as a union: the body's entries first, then each entry of the option's
      list that the merged list does not hold yet, in the option's order, once (so
      `{"include": [...]}` adds to what the client asked for itself, such as Responses'
      `reasoning.encrypted_content`, and hosted tools in `{"tools": [...]}` join the function
      tools instead of replacing them);
    - anything else (and a value where the body has none, or a different type) replaces.
    """
    for key, value in extra.items():
        current = base.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            deep_merge(current, value)  # type: ignore[arg-type]
        elif isinstance(current, list) and isinstance(value, list):
            # cast: JSON arrays (the body's and the option's); their items stay Any.
            merged = list(cast("list[Any]", current))
            # A new list: the option's own list is never shared with (or changed by) the body.
            for item in cast("list[Any]", value):
                if item not in merged:  # also once when the option lists it twice
                    merged.append(item)
            base[key] = merged
        else:
            base[key] = value
    return base


def unsupported_part(part: object) -> InvalidMessagesError:
    """The error for a message part of no known kind (a raw dict, a bare string).

    Request builders raise it rather than drop the part or fail on a missing attribute.
    """
    kind = as_dict(part).get("type")
    name = repr(kind) if isinstance(kind, str) else type(part).__name__
    return InvalidMessagesError(
        f"a message part of type {name} is not supported: parts are TextPart, ImagePart, "
        "DocumentPart, ThinkingPart, ToolUsePart, ToolResultPart and ProviderPart"
    )


def checked_tool_choice(choice: ToolChoice) -> ToolChoice:
    """`choice` if it is one the request model knows.

    Raises:
        ConfigurationError: A string other than `"auto"`, `"none"`, `"required"` (a tool's
            name, another provider's spelling such as `"any"`).
    """
    if isinstance(choice, SpecificTool) or choice in ("auto", "none", "required"):
        return choice
    raise ConfigurationError(
        f"unknown tool_choice {choice!r}: use 'auto', 'none', 'required' or "
        "SpecificTool(name) to force one tool"
    )
