"""OpenAI's token log probabilities, as Chat Completions and Responses both send them."""

from __future__ import annotations

from typing import Any

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.events import TokenLogprob

__all__ = ("token_logprobs",)


def token_logprobs(tokens: list[Any]) -> list[TokenLogprob]:
    """`[{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]` as `TokenLogprob`s.

    An entry without a token or a numeric log probability is passed over.
    """
    out: list[TokenLogprob] = []
    for raw in tokens:
        entry = as_dict(raw)
        pair = _pair(entry)
        if pair is not None:
            alternatives = (_pair(as_dict(alt)) for alt in as_list(entry.get("top_logprobs")))
            out.append(TokenLogprob(*pair, [alt for alt in alternatives if alt is not None]))
    return out


def _pair(entry: dict[str, Any]) -> tuple[str, float] | None:
    token, logprob = as_str(entry.get("token")), entry.get("logprob")
    if token is None or isinstance(logprob, bool) or not isinstance(logprob, int | float):
        return None
    return token, float(logprob)
