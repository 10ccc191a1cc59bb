"""`ContextPolicy` at work: the compacted view of a history that each request sends.

One `Compactor` per Worker configuration (forks share it); one `_View` per history list it
has seen (a fork's conversation is another list). A view remembers its messages' characters
(prefix sums, so a request's estimate is O(1) after the new messages are counted), the
messages it sends in place of old ones, and the replaced span: that is what keeps requests
identical between two compactions. Nothing is committed before a compaction has finished:
a cancelled or failed summary leaves the view as it was.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from llm_worker._log import logger
from llm_worker._tokens import DEFAULT_CHARS_PER_TOKEN as _RATIO
from llm_worker._tokens import TokenEstimator, media_provider, message_chars, request_chars
from llm_worker.errors import ConfigurationError, LLMWorkerError
from llm_worker.messages import Message, Request
from llm_worker.models import catalog_generation
from llm_worker.providers._base import deep_merge
from llm_worker.providers._media import inline_size
from llm_worker.state import ContextCompacted
from llm_worker.worker._context_media import fit_media, keep_from, media_limit
from llm_worker.worker._context_policy import ContextPolicy
from llm_worker.worker._context_stages import (
    marked,
    stored_results,
    summary,
    transcript,
    without_thinking,
)
from llm_worker.worker._context_state import restore, saved

if TYPE_CHECKING:
    from collections.abc import Callable

    from llm_worker.events import UsageEvent
    from llm_worker.providers._base import LLMClient
    from llm_worker.worker._config import WorkerConfig

__all__ = ("Compactor", "ContextPolicy", "answered", "compacted", "compactor")

_log = logger("llm_worker.context")

# Views kept per configuration: a server's forks run many conversations on one Compactor.
_MAX_VIEWS: Final = 256
# The note's size when turns are left out without a summary (an estimate, in characters).
_NOTE_CHARS: Final = 200
_SERVER: Final = ("anthropic", "openai_responses")


@dataclass(slots=True)
class _View:
    """What one history's requests send (see the module docstring)."""

    history: list[Message]
    provider: str | None = None  # whose figures count images and PDFs (None: the largest)
    seen: list[Message] = field(default_factory=lambda: [])
    prefix: list[int] = field(default_factory=lambda: [0])
    sent: dict[int, Message] = field(default_factory=lambda: {})
    sent_chars: dict[int, int] = field(default_factory=lambda: {})
    boundary: int = 0  # messages before it are sent as `sent` has them (or as they are)
    cut: int = 0  # messages before it are replaced by `lead`
    lead: Message | None = None
    summary: str | None = None
    lead_chars: int = 0
    old_chars: int = 0  # of the messages from `cut` to `boundary`, as sent
    last_chars: int = 0  # the last request's characters, for calibration
    media: int = 0  # the history's inline media bytes: a bound on any request's
    # Tokens past which the next compaction runs, when the last one could not get under
    # `target` (0: the policy's trigger): compacting again at the trigger would ask for a
    # summary on nearly every request and take out next to nothing each time.
    rearm: int = 0

    def sync(self) -> None:
        """Count the new messages; start over when the history was edited before them."""
        history, seen = self.history, self.seen
        # One list comparison in C: identical objects short-cut, equal copies compare equal.
        if len(history) < len(seen) or seen != history[: len(seen)]:
            self.reset()
        for message in history[len(self.seen) :]:
            self.prefix.append(self.prefix[-1] + message_chars(message, self.provider))
        self.media += inline_size(history[len(self.seen) :])
        self.seen = list(history)  # equal messages: keep the newest objects

    def reset(self) -> None:
        self.seen, self.prefix, self.sent, self.sent_chars = [], [0], {}, {}
        self.boundary = self.cut = self.lead_chars = self.old_chars = self.rearm = self.media = 0
        self.lead = self.summary = None

    def own_chars(self, i: int) -> int:
        """Message `i`'s characters as it is in the history."""
        return self.prefix[i + 1] - self.prefix[i]

    def chars(self) -> int:
        """The characters of the messages a request sends now."""
        return self.lead_chars + self.old_chars + self.prefix[-1] - self.prefix[self.boundary]

    def messages(self) -> list[Message]:
        """The messages a request sends now."""
        history, sent = self.history, self.sent
        out: list[Message] = [self.lead] if self.lead is not None else []
        out += [sent.get(i, history[i]) for i in range(self.cut, self.boundary)]
        out += history[self.boundary :]
        return out


@dataclass(slots=True)
class _Plan:
    """A compaction being worked out; committed to its view only once it is complete."""

    boundary: int
    sent: dict[int, Message]
    sent_chars: dict[int, int]
    cut: int
    lead: Message | None
    summary: str | None
    stages: list[str] = field(default_factory=lambda: [])
    results: int = 0
    thinking: int = 0


class Compactor:
    """A Worker's `ContextPolicy` applied: `apply` before each request, `observe` after."""

    __slots__ = (
        "_estimator",
        "_floor_told",
        "_probed",
        "_views",
        "_window",
        "handlers",
        "policy",
        "provider",
    )

    def __init__(self, policy: ContextPolicy) -> None:
        self.policy = policy
        self.handlers: list[Callable[[ContextCompacted], object]] = []
        self._views: OrderedDict[int, _View] = OrderedDict()
        self._estimator = TokenEstimator()
        self._probed = False
        self._floor_told = False
        self._window: tuple[LLMClient, int, int] | None = None  # (client, generation, window)
        # Whose figures count images and PDFs: the client's, set by `check` (None: the largest).
        self.provider: str | None = None

    # -- configuration ---------------------------------------------------------------------

    def window(self, client: LLMClient) -> int:
        """The window the policy keeps to.

        The catalog's for the client's model; the smallest of a `FallbackClient`'s models,
        any of which may get the request.

        Raises:
            UnknownModelError: No window given and the catalog does not know a model.
        """
        if self.policy.window_tokens is not None:
            return self.policy.window_tokens
        generation = catalog_generation()
        cached = self._window
        # Looked up again after a `register_model` (or for another client): a model
        # registered once the Worker was built is held to its registered window.
        if cached is not None and cached[0] is client and cached[1] == generation:
            return cached[2]
        # A FallbackClient may send any request to any of its clients: the smallest window.
        clients: tuple[LLMClient, ...] = getattr(client, "clients", None) or (client,)
        window = min(_catalog_window(one) for one in clients)
        self._window = (client, generation, window)
        return window

    def check(self, client: LLMClient) -> None:
        """Refuse at construction what could never work.

        Raises:
            UnknownModelError: The window is unknown.
            ConfigurationError: `server=True` on a provider other than Anthropic or
                OpenAI Responses.
        """
        self.window(client)
        self.provider = media_provider(client)
        if self.policy.server and client.provider not in _SERVER:
            raise ConfigurationError(
                f"ContextPolicy(server=True) needs a provider with server-side compaction "
                f"(Anthropic, OpenAI Responses), not {client.provider!r}"
            )

    # -- the send path ---------------------------------------------------------------------

    async def apply(
        self, cfg: WorkerConfig, history: list[Message], request: Request
    ) -> ContextCompacted | None:
        """Set `request.messages` to the history's compacted view; the compaction, if one ran."""
        window = self.window(cfg.client)
        if self.policy.server:
            request.options = deep_merge(request.options, _server_options(cfg, window, self))
            return None
        view = self._view(history)
        view.sync()
        fixed = _fixed_chars(request)
        tokens = await self._tokens(cfg.client, request, view, fixed + view.chars())
        event = None
        limit = media_limit(cfg.client)
        # A compaction at its floor waits for the window: today's, should it have shrunk since
        # (a model registered again, a state resumed under a smaller model). Media over the
        # provider's limit per request compact too (the media stage), not the tokens.
        # (the history's media bound any request's: a run without many skips the count)
        heavy = limit is not None and view.media > limit and inline_size(view.messages()) > limit
        over = tokens > max(self.policy.trigger * window, min(view.rearm, window))
        if heavy or over:
            media = round(limit * self.policy.target) if heavy and limit else None
            event = await self._compact(cfg, view, (fixed, tokens, window), media, over=over)
            left = self._estimator.tokens(fixed + view.chars())
            if over:  # (a compaction for media alone leaves the tokens' schedule as it was)
                self._hold(view, left, window)
            if left > window:
                # What is left cannot be compacted (the system prompt, tools, the newest
                # messages): the provider will likely refuse the request. Said, not hidden.
                _log.warning(
                    "the request is still over the context window after compaction: about "
                    "%d tokens of %d (what is left is the system prompt, tools and the "
                    "newest messages)",
                    left,
                    window,
                )
        request.messages = view.messages()
        view.last_chars = fixed + view.chars()
        return event

    def _hold(self, view: _View, left: int, window: int) -> None:
        """After a compaction that could not get under `target`, wait for the window.

        What is left is what cannot be compacted (the system prompt, tools, the newest
        turns): compacting again at the trigger would do so on nearly every request, each
        time with a new summary. The compaction is reused until a request would pass the
        window; said once per policy.
        """
        target = self.policy.target * window
        if left <= target:
            view.rearm = 0
            return
        view.rearm = window
        if self._floor_told:
            return
        self._floor_told = True
        _log.warning(
            "what cannot be compacted (the system prompt, tools, the newest %d turns) is "
            "about %d tokens, over the target of %d: the next compaction waits until a "
            "request would pass the window of %d",
            self.policy.keep_recent_turns,
            left,
            round(target),
            window,
        )

    def saved(self, history: list[Message]) -> dict[str, Any] | None:
        """What this history's requests send in place of it, for `PauseState.context`."""
        view = self._views.get(id(history))
        if view is None or view.history is not history:
            return None
        return saved(view)

    def restore(self, history: list[Message], data: dict[str, Any] | None) -> None:
        """Seed the view of a resumed history from `PauseState.context` (else compact afresh)."""
        if data is None:
            return
        view = self._view(history)
        if not restore(view, data):
            _log.info("the pause state's compaction does not fit its history: compacted afresh")

    def observe(self, history: list[Message], usage: UsageEvent) -> None:
        """Calibrate the estimate on the input tokens the answer reported."""
        view = self._views.get(id(history))
        if view is None or view.history is not history:
            return
        chars = view.last_chars
        if view.provider is None and usage.input_tokens:
            # Media counted by the largest provider's figure (a FallbackClient of several
            # providers) over-count on the one that answered (a 100 px image: 258 tokens,
            # Anthropic bills 14): a ratio learned above the default under-counts text.
            chars = min(chars, round(usage.input_tokens * _RATIO))
        self._estimator.observe(chars, usage.input_tokens)

    def _view(self, history: list[Message]) -> _View:
        key = id(history)
        view = self._views.get(key)
        if view is None or view.history is not history:
            view = self._views[key] = _View(history, self.provider)
            while len(self._views) > _MAX_VIEWS:
                self._views.popitem(last=False)
        self._views.move_to_end(key)
        return view

    async def _tokens(self, client: LLMClient, request: Request, view: _View, chars: int) -> int:
        """The estimate; the provider's count once, when an uncalibrated one nears the trigger."""
        estimate = self._estimator.tokens(chars)
        window = self.window(client)
        if (
            self._estimator.calibrated
            or self._probed
            or estimate < self.policy.trigger * window / 2
        ):
            return estimate
        count = getattr(client, "count_tokens", None)
        if count is None:
            return estimate
        self._probed = True
        probe = Request(
            view.messages(),
            system=request.system,
            tools=request.tools,
            output_schema=request.output_schema,
        )
        try:
            counted = (await count(probe)).input_tokens
        except LLMWorkerError as exc:  # the estimate stands: counting is a refinement
            _log.info("count_tokens failed (%s); the policy estimates", type(exc).__name__)
            return estimate
        self._estimator.observe(chars, counted)
        return counted

    # -- a compaction ----------------------------------------------------------------------

    async def _compact(
        self,
        cfg: WorkerConfig,
        view: _View,
        sizes: tuple[int, int, int],
        media: int | None,
        *,
        over: bool = True,
    ) -> ContextCompacted | None:
        """The stages in order, as far as needed; None when none could take anything out.

        `sizes`: the request's characters besides its messages, its tokens, the window;
        `media`: the inline media bytes to bring the request down to (None: media fit);
        `over`: the tokens passed the trigger (else only media and the reversible stages).
        """
        fixed, tokens, window = sizes
        plan = _Plan(
            view.boundary, dict(view.sent), dict(view.sent_chars), view.cut, view.lead, view.summary
        )
        n = len(view.history)
        keep = keep_from(view.history, self.policy.keep_recent_turns)
        await self._reversible(cfg, view, plan, keep)
        if media is not None and fit_media(view, plan, keep, media):
            plan.stages.append("media")
        target = self.policy.target * window
        # Past a compaction that could not get under target, a summary (a request to the
        # summarizer, a new lead) is worth it only when storing results did not get back
        # under the trigger: else each compaction would ask for one.
        goal = self.policy.trigger * window if view.rearm or not over else target
        if over and self._estimate(view, plan, fixed) > goal:
            await self._replace(view, plan, fixed, target, keep)
        if self._estimate(view, plan, fixed) > self.policy.trigger * window and keep < n:
            await self._reversible(cfg, view, plan, n)  # the recent turns are too large
        self._commit(view, plan)
        if not plan.stages:
            return None  # nothing old enough to compact: the request goes as it is
        event = ContextCompacted(
            tokens_before=tokens,
            tokens_after=self._estimate(view, plan, fixed),
            window_tokens=window,
            stages=tuple(dict.fromkeys(plan.stages)),
            tool_results=plan.results,
            thinking_parts=plan.thinking,
            messages_replaced=plan.cut,
            summary=plan.summary if "summary" in plan.stages else None,
        )
        _log.info(
            "context compacted: %d -> %d tokens (%s)",
            event.tokens_before,
            event.tokens_after,
            ", ".join(event.stages),
        )
        return event

    def _estimate(self, view: _View, plan: _Plan, fixed: int) -> int:
        return self._estimator.tokens(fixed + _plan_chars(view, plan))

    async def _reversible(self, cfg: WorkerConfig, view: _View, plan: _Plan, upto: int) -> None:
        """Stages 1 and 2 on the messages from the plan's boundary to `upto`."""
        last_assistant = _last_assistant(view.history)
        for i in range(plan.boundary, upto):
            message = view.history[i]
            if cfg.blob_store is not None and cfg.policy is not None:
                message, stored = await stored_results(
                    message, cfg.blob_store, cfg.policy, cfg.inspect_name
                )
                plan.results += stored
                if stored:
                    plan.stages.append("tool_results")
            if i != last_assistant:
                message, dropped = without_thinking(message)
                plan.thinking += dropped
                if dropped:
                    plan.stages.append("thinking")
            if message is not view.history[i]:
                plan.sent[i] = message
                plan.sent_chars[i] = message_chars(message, view.provider)
        plan.boundary = max(plan.boundary, upto)

    async def _replace(
        self, view: _View, plan: _Plan, fixed: int, target: float, keep: int
    ) -> None:
        """Stage 3: the oldest turns replaced by the summary (or the omission note)."""
        head = _first_assistant(view.history)
        start = max(plan.cut, head)
        cut = self._cut_for(view, plan, fixed + self._lead_budget(view), target, (start, keep))
        if cut <= start:
            return
        span = [plan.sent.get(i, view.history[i]) for i in range(start, cut)]
        text, stage = await self._summary_or_note(plan.summary, span, cut - head)
        plan.cut = cut
        if stage == "summary":
            plan.summary = text
        plan.lead = marked(view.history[:head], text)
        plan.stages.append(stage)

    def _cut_for(
        self, view: _View, plan: _Plan, base: int, target: float, span: tuple[int, int]
    ) -> int:
        """The earliest turn start in `span` from which the rest fits `target` (else the last).

        `base`: the characters besides the messages (the request's own, the lead's budget).
        """
        start, keep = span
        rest = base + _span_chars(view, plan, start, len(view.history))
        best = start
        for i in range(start, min(keep, len(view.history) - 1) + 1):
            if i > start and view.history[i].role == "assistant":
                best = i
                if self._estimator.tokens(rest) <= target:
                    break
            rest -= plan.sent_chars.get(i, view.own_chars(i))
        return best

    def _lead_budget(self, view: _View) -> int:
        head = view.prefix[_first_assistant(view.history)]
        if self.policy.summarizer is None:
            return head + _NOTE_CHARS
        return head + round(self.policy.summary_max_tokens * self._estimator.chars_per_token)

    async def _summary_or_note(
        self, previous: str | None, span: list[Message], replaced: int
    ) -> tuple[str, str]:
        if self.policy.summarizer is not None:
            try:
                text = await self._summary(transcript(previous, span))
            # Any failure of the summarizer (a typed provider error, no text, or a bug in a
            # client of the user's own) only costs the summary: the turns are left out.
            except Exception as exc:  # (cancellation is no Exception: it goes through)
                _log.warning(
                    "the context summarizer failed (%s): the oldest turns are left out instead",
                    type(exc).__name__,
                )
            else:
                return self._bounded(text), "summary"
        note = (
            f"{replaced} earlier messages of this conversation are left out of this request "
            "to fit the context window."
        )
        if previous:
            note += f" Summary of the earlier part:\n{previous}"
        return note, "dropped"

    def _bounded(self, text: str) -> str:
        """The summary within the budget `_lead_budget` planned for it, as valid Unicode.

        A summarizer may ignore `max_tokens` (or answer a lone surrogate, which no wire can
        send): the lead must still fit the room the cut left it.
        """
        limit = round(self.policy.summary_max_tokens * self._estimator.chars_per_token)
        if len(text) > limit:
            text = f"{text[: max(limit - 1, 0)]}…"
        return text.encode("utf-8", "replace").decode("utf-8")

    async def _summary(self, text: str) -> str:
        chosen, limit = self.policy.summarizer, self.policy.summary_max_tokens
        if not isinstance(chosen, str):
            assert chosen is not None  # (asked only with a summarizer)
            return await summary(chosen, text, limit)
        from llm_worker.providers import from_string

        # Made for each summary (they are rare) and closed after: nothing stays open.
        async with from_string(chosen) as client:
            return await summary(client, text, limit)

    def _commit(self, view: _View, plan: _Plan) -> None:
        # What the lead replaced is no longer sent: its replacements are forgotten.
        for i in [i for i in plan.sent if i < plan.cut]:
            del plan.sent[i], plan.sent_chars[i]
        view.boundary, view.sent, view.sent_chars = plan.boundary, plan.sent, plan.sent_chars
        view.cut, view.lead, view.summary = plan.cut, plan.lead, plan.summary
        view.lead_chars = message_chars(plan.lead, view.provider) if plan.lead else 0
        view.old_chars = _span_chars(view, plan, plan.cut, plan.boundary)


def _span_chars(view: _View, plan: _Plan, start: int, end: int) -> int:
    """The characters messages `start` to `end` are sent with under `plan`."""
    return sum(plan.sent_chars.get(i, view.own_chars(i)) for i in range(start, end))


def _plan_chars(view: _View, plan: _Plan) -> int:
    lead = message_chars(plan.lead, view.provider) if plan.lead is not None else 0
    return lead + _span_chars(view, plan, plan.cut, len(view.history))


def _catalog_window(client: LLMClient) -> int:
    """The catalog's context window of a client's model.

    Raises:
        UnknownModelError: The catalog has none.
    """
    from llm_worker.models import model_info

    info = model_info(client.model, provider=client.provider)
    if info.context_window is None:
        from llm_worker.errors import UnknownModelError

        raise UnknownModelError(
            f"the model catalog has no context window for {client.provider}:"
            f"{client.model}: register it (llm_worker.models.register_model) or give "
            "ContextPolicy(window_tokens=...)",
            model=f"{client.provider}:{client.model}",
        )
    return info.context_window


def compactor(policy: ContextPolicy | None, client: LLMClient) -> Compactor | None:
    """The Compactor of a Worker's policy, checked against its client; None without one.

    Raises:
        ConfigurationError: Not a `ContextPolicy`, or one that cannot work with the client.
    """
    if policy is None:
        return None
    if not isinstance(policy, ContextPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError(f"Worker(context=...) takes a ContextPolicy, not {policy!r}")
    made = Compactor(policy)
    made.check(client)
    return made


async def compacted(cfg: WorkerConfig, history: list[Message], request: Request) -> None:
    """The policy applied to a request about to be sent; its compaction told to every reader."""
    compactor = cfg.context
    assert compactor is not None  # (called only with a policy)
    # A conversation the server holds (`previous_response_id`, `conversation`) sends only the
    # newest messages: there is nothing to compact on this side.
    if "previous_response_id" in request.options or "conversation" in request.options:
        return
    event = await compactor.apply(cfg, history, request)
    if event is None:
        return
    for sink in cfg.sinks:
        sink(event)
    for handler in compactor.handlers:
        handler(event)


def answered(
    cfg: WorkerConfig, history: list[Message], request: Request, usage: UsageEvent
) -> None:
    """Calibrate the token estimates (the policy's, the client's) on an answer's usage."""
    if usage.input_tokens is None:
        return
    if cfg.context is not None:
        cfg.context.observe(history, usage)
    estimator = getattr(cfg.client, "estimator", None)
    if isinstance(estimator, TokenEstimator):
        estimator.observe_request(request, usage.input_tokens)


def _fixed_chars(request: Request) -> int:
    """The characters of what every request carries besides its messages."""
    return request_chars(
        Request([], system=request.system, tools=request.tools, output_schema=request.output_schema)
    )


def _first_assistant(history: list[Message]) -> int:
    return next((i for i, m in enumerate(history) if m.role == "assistant"), len(history))


def _last_assistant(history: list[Message]) -> int:
    return next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "assistant"), -1)


def _server_options(cfg: WorkerConfig, window: int, compactor: Compactor) -> dict[str, Any]:
    threshold = int(compactor.policy.trigger * window)
    if cfg.client.provider == "anthropic":
        edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": threshold}}
        return {"context_management": {"edits": [edit]}}
    return {"context_management": [{"type": "compaction", "compact_threshold": threshold}]}
