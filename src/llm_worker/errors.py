"""Every exception llm-worker raises, in one tree.

```
LLMWorkerError
├── ProviderError                 a provider request failed
│   ├── APIStatusError            the provider answered with an error (status, error_type)
│   │   ├── InvalidRequestError       400 / 413 / 422: fix the request
│   │   ├── AuthenticationError       401: the API key is missing or wrong
│   │   ├── PermissionDeniedError     403
│   │   ├── NotFoundError             404: unknown model or endpoint
│   │   ├── RateLimitError            429, with `retry_after`
│   │   ├── OverloadedError           529 / 503 / `overloaded_error`, also mid-stream
│   │   ├── ServerError               other 5xx
│   │   └── ContentFilterError        the provider blocked the prompt or the answer
│   ├── APITimeoutError           no answer in time
│   ├── APIConnectionError        could not reach the provider
│   └── StreamError               the stream broke after it had begun
│       ├── StreamInterruptedError    ended early, connection reset
│       ├── MalformedStreamError      data that does not parse
│       └── AnswerTooLargeError       the answer passed the client's `max_answer_chars`
├── ConfigurationError            a caller mistake: unknown model string, missing key, …
│   ├── MissingExtraError         a feature's optional extra is not installed (names it)
│   └── UnknownModelError         the model catalog does not know a model a feature needs
├── InvalidMessagesError          a message or history that is not valid
│   └── MediaError                an image or document that is not what it says, or that a
│                                 provider does not take (type, size)
├── ToolError                     raised by a tool: becomes an error result for the model
├── MCPConnectionError            an MCP server could not be started, reached or initialized
├── HookError                     a hook raised or timed out (names the hook)
├── Aborted                       a hook aborted the run
│   └── GuardrailTripped          a guardrail's tripwire stopped the run
├── LimitExceededError            a loop bound or a `Limits` budget was reached
├── OutputValidationError         the final answer never fit the output type (retries spent)
├── NoOutputError                 `RunResult.output` read on a run that has none (paused, …)
├── PauseStateError               a pause state that cannot be resumed
├── SessionError                  a session store that cannot be read or written
│   └── SessionBusyError          another run holds the session (or changed it meanwhile)
└── BlobError                     a blob that cannot be stored or loaded
    ├── BlobNotFoundError
    ├── InvalidBlobIdError
    ├── BlobAccessDeniedError     the object store refused the credentials
    ├── BlobContainerNotFoundError    the bucket or container does not exist
    └── BlobStoreUnavailableError     the object store failed or throttled past its retries
```

Foreign exceptions (httpx, JSON decoders) are translated at one seam each and chained with
`raise … from exc`. No message or `repr` ever contains an API key.
"""

from __future__ import annotations

from typing import Any

__all__ = (
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Aborted",
    "AnswerTooLargeError",
    "AuthenticationError",
    "BlobAccessDeniedError",
    "BlobContainerNotFoundError",
    "BlobError",
    "BlobNotFoundError",
    "BlobStoreUnavailableError",
    "ConfigurationError",
    "ContentFilterError",
    "GuardrailTripped",
    "HookError",
    "InvalidBlobIdError",
    "InvalidMessagesError",
    "InvalidRequestError",
    "LLMWorkerError",
    "LimitExceededError",
    "MCPConnectionError",
    "MalformedStreamError",
    "MediaError",
    "MissingExtraError",
    "NoOutputError",
    "NotFoundError",
    "OutputValidationError",
    "OverloadedError",
    "PauseStateError",
    "PermissionDeniedError",
    "ProviderError",
    "RateLimitError",
    "ServerError",
    "SessionBusyError",
    "SessionError",
    "StreamError",
    "StreamInterruptedError",
    "ToolError",
    "UnknownModelError",
)


class LLMWorkerError(Exception):
    """Base of every exception raised by llm-worker."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled without calling __init__ again (whose keyword-only arguments `args` does not
        # hold): a durable run's error is stored and raised again in any process.
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(cls: type[LLMWorkerError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ProviderError(LLMWorkerError):
    """A request to an LLM provider failed.

    Attributes:
        message: What went wrong, for a person.
        provider: The wire protocol (`"openai_chat"`, `"anthropic"`, …), if known.
        status_code: The HTTP status, if an HTTP answer was received.
        error_type: The provider's error type or code (`overloaded_error`, …), if given.
        request_id: The provider's request id, if given (useful in a support ticket).
        streamed: True when the failure came after the answer had begun streaming; such a
            request is never retried silently.
        retry_after: Seconds the provider asked to wait before trying again, if it said.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status_code: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        streamed: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.error_type = error_type
        self.request_id = request_id
        self.streamed = streamed
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f"{self.provider}: " if self.provider else ""
        status = f" (HTTP {self.status_code})" if self.status_code is not None else ""
        kind = f" [{self.error_type}]" if self.error_type else ""
        return f"{where}{self.message}{status}{kind}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again may succeed."""
        return False


class APIStatusError(ProviderError):
    """The provider answered with an error status or an error object."""


class InvalidRequestError(APIStatusError):
    """The provider rejected the request as malformed (400, 413, 422): fix the request."""


class AuthenticationError(APIStatusError):
    """The API key is missing, wrong or revoked (401)."""


class PermissionDeniedError(APIStatusError):
    """The key may not use this model or endpoint (403)."""


class NotFoundError(APIStatusError):
    """Unknown model or endpoint (404)."""


class RateLimitError(APIStatusError):
    """Too many requests (429); `retry_after` says how long to wait, if the provider did."""

    @property
    def retryable(self) -> bool:
        """Rate limits pass."""
        return True


class OverloadedError(APIStatusError):
    """The provider is overloaded (Anthropic 529 / `overloaded_error`, 503), maybe mid-stream."""

    @property
    def retryable(self) -> bool:
        """Overload passes."""
        return True


class ServerError(APIStatusError):
    """The provider failed (5xx)."""

    @property
    def retryable(self) -> bool:
        """Server errors are usually transient."""
        return True


class ContentFilterError(APIStatusError):
    """The provider's safety filters blocked the prompt or the answer."""


class APITimeoutError(ProviderError):
    """The provider did not answer in time."""

    @property
    def retryable(self) -> bool:
        """A timeout before the first byte may pass."""
        return not self.streamed


class APIConnectionError(ProviderError):
    """The provider could not be reached (DNS, refused, TLS, reset before the answer)."""

    @property
    def retryable(self) -> bool:
        """A connection failure before the first byte may pass."""
        return not self.streamed


class StreamError(ProviderError):
    """The answer's stream broke after it had begun: what arrived before was delivered."""


class StreamInterruptedError(StreamError):
    """The stream ended before the provider said it was complete, or the connection reset."""


class MalformedStreamError(StreamError):
    """The stream carried data that does not parse as the protocol says."""


class AnswerTooLargeError(StreamError):
    """The answer grew past the client's `max_answer_chars`; nothing more of it was read.

    Attributes:
        limit: The bound, in characters of text, thinking, tool arguments and signatures.
    """

    def __init__(self, message: str, *, limit: int, **details: Any) -> None:
        super().__init__(message, **details)
        self.limit = limit


class ConfigurationError(LLMWorkerError):
    """A caller mistake in setting things up.

    An unknown model string, a missing API key, a tool registered twice, an invalid option.
    """


class MissingExtraError(ConfigurationError, ImportError):
    """A feature needs an optional extra that is not installed.

    Attributes:
        extra: The extra to install, e.g. `"mcp"` for `pip install 'llm-worker[mcp]'`.
        feature: What needed it.
    """

    def __init__(self, extra: str, feature: str, detail: str = "") -> None:
        self.extra = extra
        self.feature = feature
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"{feature} needs the '{extra}' extra, which is not installed{why}. Install it with: "
            f"pip install 'llm-worker[{extra}]'   (or: uv add 'llm-worker[{extra}]')"
        )


class UnknownModelError(ConfigurationError, LookupError):
    """The model catalog (`llm_worker.models`) has no entry for a model a feature needs.

    Attributes:
        model: The model string looked up (`"provider:model"`).
    """

    def __init__(self, message: str, *, model: str) -> None:
        super().__init__(message)
        self.model = model


class InvalidMessagesError(LLMWorkerError, ValueError):
    """A message, a history or its JSON form is not valid."""


class MediaError(InvalidMessagesError):
    """An image or document that cannot be sent as it is.

    Its content is not what its media type says, or a provider does not accept its media type
    or its size; raised before anything is sent, naming the provider and what it accepts.
    """


class ToolError(LLMWorkerError):
    """Raise from a tool to report a failure the model should read and act on.

    The message becomes the text of an `is_error` tool result; the run goes on.
    """


class MCPConnectionError(LLMWorkerError):
    """An MCP server could not be started, reached or initialized in time.

    Attributes:
        server: The server's name (its command, or its URL).
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class HookError(LLMWorkerError):
    """A hook raised an exception or ran past its timeout.

    Attributes:
        hook: A name for the hook (its qualified name).
        kind: Which hook point (`before_tool_call`, …).
    """

    # Defaults keep the exception picklable (unpickling calls cls(message), then restores
    # the attributes).
    def __init__(self, message: str, *, hook: str = "", kind: str = "") -> None:
        super().__init__(message)
        self.hook = hook
        self.kind = kind


class Aborted(LLMWorkerError):
    """A hook aborted the run (`Abort(reason)`), after the on_abort hooks ran.

    Attributes:
        reason: The reason the hook gave.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GuardrailTripped(Aborted):
    """A guardrail tripped: the run was stopped (after the on_abort hooks), its history valid.

    An `Aborted`: whatever handles a hook's abort (a web adapter showing it) handles it too.

    Attributes:
        reason: The `Trip`'s reason.
        guardrail: The guardrail's name.
        kind: `"input"` or `"output"`.
        info: The `Trip`'s `info` (never shown anywhere by the library).
    """

    def __init__(
        self, reason: str, *, guardrail: str = "", kind: str = "", info: Any = None
    ) -> None:
        super().__init__(reason)
        self.guardrail = guardrail
        self.kind = kind
        self.info = info


class LimitExceededError(LLMWorkerError):
    """A loop bound or a budget was reached (`max_requests`, `max_continuations`, `Limits`).

    Attributes:
        limit: Which limit (`max_requests`, `max_continuations`, or a `Limits` field:
            `requests`, `input_tokens`, `output_tokens`, `total_tokens`, `tool_calls`,
            `cost_usd`, `wall_s`).
        value: Its value.
        used: What was (or, with the refused request or call, would have been) spent
            against it; None where there is no figure (a model with no price).
    """

    def __init__(
        self, message: str, *, limit: str = "", value: float = 0, used: float | None = None
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.used = used


class OutputValidationError(LLMWorkerError):
    """The model's final answer did not fit the output type, after every retry.

    Attributes:
        raw: The last answer as the model sent it (JSON text, or a tool call's arguments).
        errors: What was wrong with it, one line per error (`path: message`).
        attempts: How many answers were checked.
    """

    def __init__(self, message: str, *, raw: str, errors: list[str], attempts: int) -> None:
        super().__init__(message)
        self.raw = raw
        self.errors = errors
        self.attempts = attempts


class NoOutputError(LLMWorkerError, LookupError):
    """`RunResult.output` was read, but the run has no output.

    It was paused or cancelled, or the model refused; `RunResult.output_or_none` reads
    `None` instead.

    Attributes:
        status: How the run ended (`"paused"`, `"cancelled"`, or `"finished"` for a refusal).
        refused: The model refused to answer (`RunResult.refusal`).
    """

    def __init__(self, message: str, *, status: str, refused: bool) -> None:
        super().__init__(message)
        self.status = status
        self.refused = refused


class PauseStateError(LLMWorkerError, ValueError):
    """A pause state that cannot be loaded or resumed (bad JSON, unknown version, tools missing)."""


class SessionError(LLMWorkerError):
    """A session could not be read or written (the store failed, or holds what it cannot read).

    The driver's exception, if any, is the `__cause__`; the message never holds a password
    of the connection string.
    """


class SessionBusyError(SessionError):
    """Another run holds the session, or changed it while this run went on.

    Two runs on one session never interleave their histories: the second is refused at its
    start (or waits, with `wait=`), and a run whose session was taken over meanwhile (its
    claim expired) appends nothing.

    Attributes:
        session_id: The session.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class BlobError(LLMWorkerError):
    """A blob could not be stored or loaded."""


class BlobNotFoundError(BlobError, LookupError):
    """No blob has this id."""


class InvalidBlobIdError(BlobError, ValueError):
    """The text is not a blob id (a UUID); it never names a file."""


class BlobAccessDeniedError(BlobError, PermissionError):
    """The object store refused the credentials (unknown key, bad signature, no permission)."""


class BlobContainerNotFoundError(BlobError):
    """The object store's bucket or container does not exist."""


class BlobStoreUnavailableError(BlobError):
    """The object store failed, throttled or dropped the connection after its client's retries."""
