"""`ContextPolicy`: how a Worker keeps each request inside the model's context window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llm_worker.errors import ConfigurationError
from llm_worker.providers import PROVIDER_PREFIXES

if TYPE_CHECKING:
    from llm_worker.providers._base import LLMClient

__all__ = ("ContextPolicy",)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPolicy:
    """Keep what a Worker sends inside the context window, cheapest means first.

    Applied to each request on the send path, before the `on_message_send` hooks. The
    Worker's `history` is never rewritten: only what is sent changes, and deterministically
    (the same history and the same last compaction give the same request, byte for byte, so
    prompt caches hold). Between two compactions each request is the last one plus the new
    messages; a compaction happens when a request's estimated tokens pass `trigger` of the
    window, and takes them down to `target`, in stages:

    1. *reversible*: tool results older than the last `keep_recent_turns` turns leave the
       request as the blob summaries the library makes for large outputs (stored in the
       Worker's blob store first, so the model can still `inspect` them by id); needs
       `Worker(blob_store=...)`, else the stage is skipped;
    2. thinking of those older turns is dropped (never the last assistant message's, whose
       signed thinking a provider requires back during a tool loop; the OpenAI item ids that
       pair with dropped reasoning go too, as the Responses API requires);
    3. if still over `target`: the oldest turns are replaced by one marked user message —
       the conversation's opening user message and an LLM summary (`summarizer`), which
       later requests reuse until the next compaction extends it; without a summarizer
       (or when it fails) they are left out, the message saying how many.

    Inline images and documents have a limit of their own: a request whose media would pass
    the provider's megabytes per request (Anthropic 32 MB, Gemini 20 MB, OpenAI 50 MB) is
    compacted too — the media of turns older than `keep_recent_turns` leave it, oldest
    first, as short text notes, down to `target` of the limit (the history keeps them), so
    a screenshot run goes on rather than the newest screenshot being refused.

    A turn here is one answer of the model with the tool results or user messages that
    follow it. Tool calls and their results are never separated. Each compaction is a
    `ContextCompacted` event (`Worker.stream()`, `Worker.on_context_compacted`, and a span
    event when tracing is on). Tokens are estimated from characters at the ratio the
    answers' usage shows (`llm_worker.models.TokenEstimator`), images and PDFs as the
    client's provider bills them (from their pixels and pages: `docs/models.md`); the
    provider's count is asked once (`client.count_tokens`) when the first estimate comes
    near the trigger.

    Attributes:
        trigger: The share of the window past which a request is compacted (0 < trigger <= 1).
        target: The share a compaction brings it down to (0 < target < trigger).
        keep_recent_turns: The last turns sent as they are (at least 0).
        summarizer: The client (or a model string: `"anthropic:claude-haiku-4-5"`) that writes
            the summary of the oldest turns; None leaves them out instead.
        window_tokens: The context window in tokens; by default the model catalog's
            (`llm_worker.models.model_info`) for the Worker's client (the smallest of a
            `FallbackClient`'s models), an error when it has none (register the model, or
            give the window here).
        server: Let the provider compact instead (Anthropic `context_management` with the
            `compact_20260112` edit — the client needs `betas=["compact-2026-01-12"]` —,
            OpenAI Responses `context_management` compaction), at `trigger` of the window;
            the library then compacts nothing itself. Other providers: `ConfigurationError`.
        summary_max_tokens: The longest summary asked of the summarizer (a longer answer is
            cut to it).

    Raises:
        ConfigurationError: A share, count or window out of range.
    """

    trigger: float = 0.8
    target: float = 0.6
    keep_recent_turns: int = 4
    summarizer: LLMClient | str | None = None
    window_tokens: int | None = None
    server: bool = False
    summary_max_tokens: int = 2_000

    def __post_init__(self) -> None:
        if not 0 < self.target < self.trigger <= 1:
            raise ConfigurationError(
                f"ContextPolicy needs 0 < target < trigger <= 1, not target={self.target!r}, "
                f"trigger={self.trigger!r}"
            )
        for name, least in (("keep_recent_turns", 0), ("summary_max_tokens", 1)):
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ConfigurationError(f"ContextPolicy({name}=...) must be an int >= {least}")
        summarizer = self.summarizer
        if isinstance(summarizer, str):
            prefix, colon, name = summarizer.partition(":")
            if not (colon and name and prefix.lower() in PROVIDER_PREFIXES):
                raise ConfigurationError(
                    f"ContextPolicy(summarizer={summarizer!r}): a model string is "
                    "'provider:model', e.g. 'anthropic:claude-haiku-4-5'"
                )
        elif not (summarizer is None or hasattr(summarizer, "stream")):
            raise ConfigurationError(
                "ContextPolicy(summarizer=...) takes a client or a model string "
                f"('anthropic:claude-haiku-4-5'), not {type(summarizer).__name__}"
            )
        window = self.window_tokens
        if window is not None and (type(window) is not int or window < 1):
            raise ConfigurationError(
                f"ContextPolicy(window_tokens=...) must be a positive int, not {window!r}"
            )
