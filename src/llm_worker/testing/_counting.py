"""A scripted model's answers to the providers' token-counting endpoints.

The count is `prompt_tokens` of the decoded request: the same rough count an answer without
`usage` reports, so what a client counts before a request and what the answer reports agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from llm_worker._json import as_dict
from llm_worker.testing._decode import decode_request
from llm_worker.testing._script import prompt_tokens
from llm_worker.testing._server import RecordedRequest, WireResponse

__all__ = ("count_answer",)


def _anthropic(body: dict[str, Any], count: int) -> dict[str, Any]:
    return {"input_tokens": count}


def _gemini(body: dict[str, Any], count: int) -> dict[str, Any]:
    return {"totalTokens": count}


def _responses(body: dict[str, Any], count: int) -> dict[str, Any]:
    return {"object": "response.input_tokens", "input_tokens": count}


# provider: (the counting path's ending, the request body's own body, the answer)
_ENDPOINTS: Final[
    dict[
        str,
        tuple[str, Callable[[dict[str, Any]], object], Callable[[dict[str, Any], int], Any]],
    ]
] = {
    "anthropic": ("/v1/messages/count_tokens", lambda b: b, _anthropic),
    "gemini": (":countTokens", lambda b: b.get("generateContentRequest", b), _gemini),
    "openai_responses": ("/responses/input_tokens", lambda b: b, _responses),
}


def count_answer(provider: str, http: RecordedRequest, model: str) -> WireResponse | None:
    """The answer to a counting request of `provider`'s wire; None for any other request."""
    endpoint = _ENDPOINTS.get(provider)
    if endpoint is None or not http.path.endswith(endpoint[0]):
        return None
    _, inner, answer = endpoint
    try:
        body = as_dict(http.json())
        request = decode_request(provider, inner(body), model=model)
    except Exception as exc:  # a body the scripted model cannot read: the client's 400
        error = {"type": "invalid_request_error", "message": f"unreadable count request: {exc}"}
        return WireResponse({"error": error}, status=400, content_type="application/json")
    count = prompt_tokens(request, provider)
    return WireResponse(answer(body, count), content_type="application/json")
