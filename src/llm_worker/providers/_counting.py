"""The providers' token-counting endpoints: the request each takes and the count it answers.

- Anthropic: `POST /v1/messages/count_tokens`, the Messages body without the fields that
  shape the answer (`max_tokens`, `stream`, sampling), answered `{"input_tokens": n}`.
- Gemini: `POST /models/{model}:countTokens` with the whole request as
  `generateContentRequest` (so the system instruction and tools count), answered
  `{"totalTokens": n}`.
- OpenAI Responses: `POST /responses/input_tokens`, the Responses body's input fields,
  answered `{"object": "response.input_tokens", "input_tokens": n}`.
- OpenAI Chat Completions has no counting endpoint: the client estimates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from llm_worker._json import as_int
from llm_worker.messages import Request

if TYPE_CHECKING:
    from llm_worker.providers._base import HttpClient

__all__ = ("count_request", "read_count")

# The Messages fields the count_tokens endpoint takes (it refuses the others with a 400).
_ANTHROPIC_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "context_management",
        "mcp_servers",
        "output_format",
        "output_config",
    }
)
# The Responses fields the input_tokens endpoint takes.
_RESPONSES_FIELDS: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "text",
        "truncation",
        "conversation",
        "previous_response_id",
    }
)

# Past any context window (the largest are a few million tokens), with room to spare.
_MOST_TOKENS: Final = 1 << 30

_Builder = Callable[["HttpClient", Request], tuple[str, dict[str, Any]]]


def _anthropic(client: HttpClient, request: Request) -> tuple[str, dict[str, Any]]:
    body = client.build_body(request)
    return "/v1/messages/count_tokens", {k: v for k, v in body.items() if k in _ANTHROPIC_FIELDS}


def _gemini(client: HttpClient, request: Request) -> tuple[str, dict[str, Any]]:
    name = client.model if "/" in client.model else f"models/{client.model}"
    inner = {"model": name, **client.build_body(request)}
    return f"/{quote(name, safe='/-._~')}:countTokens", {"generateContentRequest": inner}


def _responses(client: HttpClient, request: Request) -> tuple[str, dict[str, Any]]:
    body = client.build_body(request)
    return "/responses/input_tokens", {k: v for k, v in body.items() if k in _RESPONSES_FIELDS}


_BUILDERS: Final[dict[str, _Builder]] = {
    "anthropic": _anthropic,
    "gemini": _gemini,
    "openai_responses": _responses,
}


def count_request(client: HttpClient, request: Request) -> tuple[str, dict[str, Any]] | None:
    """`(path, body)` of the client's counting endpoint for `request`; None without one."""
    build = _BUILDERS.get(client.provider)
    return build(client, request) if build is not None else None


def read_count(provider: str, answer: dict[str, Any]) -> int | None:
    """The count in a counting endpoint's answer (Gemini's `totalTokens`, else `input_tokens`).

    None for a count no request can have (negative, or past `_MOST_TOKENS`): taken as given,
    it would calibrate every later estimate of the client and of a `ContextPolicy` on it.
    """
    count = as_int(answer.get("totalTokens" if provider == "gemini" else "input_tokens"))
    return count if count is not None and 0 <= count <= _MOST_TOKENS else None
