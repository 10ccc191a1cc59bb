"""llm-worker: put LLMs to work.

One provider-neutral API streams OpenAI (Chat Completions and Responses), Anthropic and Gemini
answers as one flat event model (`llm_worker.events`); a `Timeline` dispatches those events to
typed handlers with per-block scopes; a `Worker` runs the agent loop with tools, hooks,
pause/resume and large-output handling.

Public names are loaded on first use, so `import llm_worker` stays light: provider modules,
httpx and pydantic are imported only when something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_worker.errors import (
        Aborted,
        APIConnectionError,
        APIStatusError,
        APITimeoutError,
        AuthenticationError,
        BlobError,
        BlobNotFoundError,
        ConfigurationError,
        ContentFilterError,
        HookError,
        InvalidBlobIdError,
        InvalidMessagesError,
        InvalidRequestError,
        LimitExceededError,
        LLMWorkerError,
        MalformedStreamError,
        NotFoundError,
        OverloadedError,
        PauseStateError,
        PermissionDeniedError,
        ProviderError,
        RateLimitError,
        ServerError,
        StreamError,
        StreamInterruptedError,
        ToolError,
    )
    from llm_worker.events import (
        BlockAbort,
        BlockDelta,
        BlockStart,
        BlockStop,
        BlockType,
        ErrorEvent,
        Event,
        InputJsonDelta,
        PingEvent,
        ResponseStatus,
        SignatureDelta,
        StatusEvent,
        StopReason,
        TextDelta,
        TextMetadata,
        ThinkingDelta,
        ThinkingMetadata,
        ToolResultMetadata,
        ToolUseMetadata,
        UsageEvent,
    )
    from llm_worker.messages import (
        Message,
        Origin,
        Request,
        SpecificTool,
        TextPart,
        ThinkingConfig,
        ThinkingPart,
        ToolResultPart,
        ToolSpec,
        ToolUsePart,
        messages_from_json,
        messages_to_json,
    )

# name -> module that defines it; imported on first attribute access.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "APIConnectionError",
            "APIStatusError",
            "APITimeoutError",
            "Aborted",
            "AuthenticationError",
            "BlobError",
            "BlobNotFoundError",
            "ConfigurationError",
            "ContentFilterError",
            "HookError",
            "InvalidBlobIdError",
            "InvalidMessagesError",
            "InvalidRequestError",
            "LLMWorkerError",
            "LimitExceededError",
            "MalformedStreamError",
            "NotFoundError",
            "OverloadedError",
            "PauseStateError",
            "PermissionDeniedError",
            "ProviderError",
            "RateLimitError",
            "ServerError",
            "StreamError",
            "StreamInterruptedError",
            "ToolError",
        ),
        "llm_worker.errors",
    ),
    **dict.fromkeys(
        (
            "BlockAbort",
            "BlockDelta",
            "BlockStart",
            "BlockStop",
            "BlockType",
            "ErrorEvent",
            "Event",
            "InputJsonDelta",
            "PingEvent",
            "ResponseStatus",
            "SignatureDelta",
            "StatusEvent",
            "StopReason",
            "TextDelta",
            "TextMetadata",
            "ThinkingDelta",
            "ThinkingMetadata",
            "ToolResultMetadata",
            "ToolUseMetadata",
            "UsageEvent",
        ),
        "llm_worker.events",
    ),
    **dict.fromkeys(
        (
            "Message",
            "Origin",
            "Request",
            "SpecificTool",
            "TextPart",
            "ThinkingConfig",
            "ThinkingPart",
            "ToolResultPart",
            "ToolSpec",
            "ToolUsePart",
            "messages_from_json",
            "messages_to_json",
        ),
        "llm_worker.messages",
    ),
}

__all__ = (
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Aborted",
    "AuthenticationError",
    "BlobError",
    "BlobNotFoundError",
    "BlockAbort",
    "BlockDelta",
    "BlockStart",
    "BlockStop",
    "BlockType",
    "ConfigurationError",
    "ContentFilterError",
    "ErrorEvent",
    "Event",
    "HookError",
    "InputJsonDelta",
    "InvalidBlobIdError",
    "InvalidMessagesError",
    "InvalidRequestError",
    "LLMWorkerError",
    "LimitExceededError",
    "MalformedStreamError",
    "Message",
    "NotFoundError",
    "Origin",
    "OverloadedError",
    "PauseStateError",
    "PermissionDeniedError",
    "PingEvent",
    "ProviderError",
    "RateLimitError",
    "Request",
    "ResponseStatus",
    "ServerError",
    "SignatureDelta",
    "SpecificTool",
    "StatusEvent",
    "StopReason",
    "StreamError",
    "StreamInterruptedError",
    "TextDelta",
    "TextMetadata",
    "TextPart",
    "ThinkingConfig",
    "ThinkingDelta",
    "ThinkingMetadata",
    "ThinkingPart",
    "ToolError",
    "ToolResultMetadata",
    "ToolResultPart",
    "ToolSpec",
    "ToolUseMetadata",
    "ToolUsePart",
    "UsageEvent",
    "messages_from_json",
    "messages_to_json",
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_worker' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
