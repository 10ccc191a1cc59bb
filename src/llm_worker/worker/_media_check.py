"""A tool result's images and documents, checked against the Worker's provider.

A tool may return media its Worker's provider refuses (Gemini takes no GIF; every provider has
size limits). The provider's client would refuse the whole next request, after the tool ran,
losing the run; so before a result enters the history, the parts the provider would refuse are
taken out of it and the model reads why, in an error result, and the run goes on. The check
comes after the after_tool_call hooks, so a hook may still convert or shrink an image.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from llm_worker.providers._media import MediaRules, inline_size, media_size, rules_for, sendable
from llm_worker.worker._context_media import kept_media

if TYPE_CHECKING:
    from collections.abc import Sequence

    from llm_worker.messages import MediaPart, Message
    from llm_worker.tools import ToolResult
    from llm_worker.worker._config import WorkerConfig

__all__ = ("media_keep", "sendable_result", "sendable_results")


def media_keep(cfg: WorkerConfig) -> int | None:
    """The turns whose media a Worker's `ContextPolicy` keeps in a request (None: no policy).

    With a policy (compacting on this side), the media of older turns leave a request that
    would pass the provider's limit per request (the media stage): only the kept turns'
    media can refuse a new result's.
    """
    context = cfg.context
    if context is None or context.policy.server:
        return None
    return context.policy.keep_recent_turns


def sendable_results(
    results: Sequence[ToolResult | None],
    provider: str | Sequence[str],
    history: Sequence[Message],
    keep_turns: int | None = None,
) -> list[ToolResult | None]:
    """Each of a batch's `results` as `sendable_result` leaves it, in one request with `history`.

    `history`: the messages the results will be sent with (the last request's, which a
    `ContextPolicy` may have cut, else the Worker's history). The next request carries their
    media and every result's: the provider's limit per request holds for all of them
    together, not for each result alone. A batch without media needs no look at them (a
    long run's turns stay flat in cost). `keep_turns` (a `ContextPolicy`'s, `media_keep`):
    only the opening message's and the kept turns' media count, the older ones leave the
    request as notes when it would not fit.
    """
    if not any(result is not None and result.media for result in results):
        return list(results)
    used = inline_size(history) if keep_turns is None else kept_media(history, keep_turns)
    checked: list[ToolResult | None] = []
    for result in results:
        fit = None if result is None else sendable_result(result, provider, used)
        used += 0 if fit is None else media_size(fit.media)
        checked.append(fit)
    return checked


def sendable_result(result: ToolResult, provider: str | Sequence[str], used: int = 0) -> ToolResult:
    """`result` as `provider` accepts it: refused media taken out, the model told which and why.

    `provider`: one provider's name, or several (a fallback's, `_tokens.leaf_providers`): a part is
    kept only when every one of them accepts it. `used`: the base64 bytes of media the
    request carries besides this result's. A result whose media all fit (or providers whose
    limits are not known here) is returned as it is; otherwise a copy marked as an error
    keeps the tool's text and the parts that fit.
    """
    names = (provider,) if isinstance(provider, str) else provider
    every = [rules for name in names if (rules := rules_for(name)) is not None]
    if not every or not result.media:
        return result
    kept, refused = _sendable_to_all(result, every, used)
    if not refused:
        return result
    reasons = "\n".join(f"- {why}" for why in refused)
    note = (
        f"{len(refused)} of the {len(result.media)} images or documents this tool returned "
        f"could not be sent to you:\n{reasons}"
    )
    content = f"{result.content}\n\n{note}" if result.content else note
    return dataclasses.replace(result, content=content, is_error=True, media=kept)


def _sendable_to_all(
    result: ToolResult, every: list[MediaRules], used: int
) -> tuple[list[MediaPart], list[str]]:
    """The parts each of `every` provider's rules accept, and why the others were refused."""
    kept, refused = list(result.media), list[str]()
    for rules in every:
        kept, why = sendable(kept, rules, used)
        refused += why
    return kept, refused
