"""The Anthropic Messages client (`POST /v1/messages`, streamed).

The request is built in `_anthropic_request` (history with thinking, signatures, tool calls
and results, citations, the code-execution container; prompt-cache markers; beta headers).
This module maps the stream:

| Anthropic event | normalized events |
|---|---|
| `message_start` | `UsageEvent` (input tokens with cached ones added back); blocks (below) |
| `content_block_start` text / thinking / redacted_thinking / tool_use | `BlockStart` |
| `content_block_delta` text / thinking / signature / input_json / citations | `BlockDelta` |
| `content_block_stop` | `BlockStop` (the last one held for the stop reason) |
| `message_delta` | `UsageEvent` (output tokens, …); the stop reason is kept |
| `message_stop` | the last `BlockStop` with the stop reason; the answer is complete |
| `ping` | `PingEvent` |
| `error` (in a 200 stream) | abort, `ErrorEvent`, FAILED, then the typed error |

`message_start` also gives the message id, model and service tier (the closing
`StatusEvent`); `message_delta` the matched stop sequence and a refusal's `stop_details` (on
the last `BlockStop`) and the code-execution container. A text block's `citations` (at its
start, or as `citations_delta`) become `CitationDelta`s.

Blocks this library has no kind for (server tools and their results, MCP calls, compaction,
…) are rebuilt whole — the `content_block_start` block with its deltas merged in
(`input_json_delta` into `input`, `compaction_delta` into `content` and `encrypted_content`,
`signature_delta` into `signature`, `citations_delta` into `citations`) — and emitted at their
`content_block_stop` as one `BlockType.PROVIDER` block (`ProviderMetadata`), which the Worker
keeps as a `ProviderPart` and `_anthropic_request` sends back in place: a `pause_turn` or
`compaction` answer must go back as it came. Deltas are matched to their block by the
provider's index, so none reaches another block. A `message_start` whose `content` already
holds blocks (a turn resumed by programmatic tool calling arrives whole: a `tool_use`,
`stop_reason: tool_use`, then only `message_stop`) gives those blocks exactly as if they had
streamed, and keeps its stop reason. A tool call whose arguments never arrive (a tool without
parameters gives only an empty `input_json_delta`) gets the fragment `{}`, so that its input
parses to `{}`; a call made from code keeps its `caller`.

The code-execution container of `message_delta` becomes a `ProviderPart` of type
`container` after the content (`_anthropic_request.CONTAINER`): the next request names it.

Usage: a compaction's own sampling (its `usage.iterations` entry) is not in the top-level
counts; it is added, so that the usage is what the answer cost. The 5-minute / 1-hour
cache-write split and the web search / fetch request counts are kept; an advisor's
iterations (another model's tokens) are not counted.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

import orjson
from orjson import loads as _loads

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker._wide_json import exact_loads
from llm_worker.errors import APIStatusError
from llm_worker.events import (
    BlockType,
    PingEvent,
    StopReason,
    TextMetadata,
    ThinkingMetadata,
    UsageEvent,
)
from llm_worker.messages import Citation, Origin, Request
from llm_worker.providers._anthropic_request import (
    CONTAINER,
    PROVIDER,
    CacheBreakpoint,
    beta_headers,
    build_body,
    cache_settings,
    interleaved_thinking,
)
from llm_worker.providers._anthropic_usage import INPUT_KEYS, cache_split, compaction_usage
from llm_worker.providers._base import HttpClient
from llm_worker.providers._blocks import BlockEmitter, StreamMapper, wrong_type
from llm_worker.providers._http import RetryPolicy, TransportChoice, error_class
from llm_worker.providers._settings import DEFAULT_MAX_ANSWER_CHARS, DEFAULT_MAX_CONCURRENCY
from llm_worker.providers._sse import DEFAULT_MAX_EVENT_BYTES, json_of

if TYPE_CHECKING:
    import aiohttp
    import httpx

__all__ = ("AnthropicClient",)

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": StopReason.END_TURN,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "tool_use": StopReason.TOOL_USE,
    "pause_turn": StopReason.PAUSE_TURN,
    "refusal": StopReason.REFUSAL,
    "compaction": StopReason.COMPACTION,
    # The context window, not max_tokens, cut the answer: the same remedy (a shorter ask).
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
}

_TEXT_META: Final = TextMetadata()
_START: Final = "content_block_start"
_DELTA: Final = "content_block_delta"


class AnthropicClient(HttpClient):
    """Streams Anthropic Messages answers as normalized events.

    Example:
        ```python
        client = AnthropicClient(model="claude-sonnet-4-5")
        request = Request([Message.user("Hi")], thinking=ThinkingConfig(budget_tokens=2048))
        async for event in client.stream(request):
            ...
        ```

    The key comes from `ANTHROPIC_API_KEY` and is sent as `x-api-key`, with
    `anthropic-version: 2023-06-01`. `base_url` is the API root without `/v1`, as in
    Anthropic's own SDK (`https://api.anthropic.com`).

    Beta features are switched on per client, with `betas=[...]` (sent as one
    `anthropic-beta` header) or any header through `headers`; their request fields go through
    `Request.options`.

    Prompt caching: `prompt_cache=("system", "tools", "messages")` puts a `cache_control`
    breakpoint on the system prompt, the last tool and the last block of the last message of
    every request (`prompt_cache_ttl="1h"` for the longer cache). Automatic caching needs no
    setting here: `options={"cache_control": {"type": "ephemeral"}}`.

    Thinking: `ThinkingConfig(budget_tokens=n)` gives extended thinking with that budget;
    `ThinkingConfig(effort=...)` gives adaptive thinking with `output_config.effort`
    (`minimal` maps to `low`). Thinking blocks are sent back, signature included, only to the
    provider and model that produced them; see `_anthropic_request` for every rule the
    history is made to follow.
    """

    provider = PROVIDER
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    api_key_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)

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
        betas: Collection[str] = (),
        prompt_cache: Collection[CacheBreakpoint] = (),
        prompt_cache_ttl: Literal["5m", "1h"] | None = None,
        transport: TransportChoice | None = None,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
    ) -> None:
        """Create a client.

        Args:
            model: The model name (`"claude-sonnet-4-5"`, …).
            api_key: The API key; `ANTHROPIC_API_KEY` by default.
            base_url: The API root, without `/v1`.
            http_client: A shared `httpx.AsyncClient` or `aiohttp.ClientSession`, not
                closed by this client.
            timeout: Seconds, or an `httpx.Timeout` / `aiohttp.ClientTimeout`.
            retry: The retry policy for failures before the answer begins.
            headers: Extra headers for every request (they win over the ones set here).
            max_concurrency: Requests in flight at once through this client (see
                `HttpClient`); `None` removes the cap.
            max_event_bytes: The most bytes one unfinished event may hold (see
                `HttpClient`).
            betas: Beta feature names, sent as the `anthropic-beta` header.
            prompt_cache: Where to put prompt-cache breakpoints in every request.
            prompt_cache_ttl: Their cache lifetime (`"5m"` or `"1h"`).
            transport: `"auto"` (the default), `"httpx"` or `"aiohttp"` (see `HttpClient`).
            max_answer_chars: The most characters one answer may hold (see `HttpClient`).

        Raises:
            ConfigurationError: No API key, or an unknown prompt-cache breakpoint.
        """
        self._cache = cache_settings(prompt_cache, prompt_cache_ttl)
        all_headers = beta_headers(betas, headers)
        self._interleaved = interleaved_thinking(all_headers)
        super().__init__(
            model=model,
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            headers=all_headers,
            max_concurrency=max_concurrency,
            max_event_bytes=max_event_bytes,
            transport=transport,
            max_answer_chars=max_answer_chars,
        )

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """`x-api-key`, as Anthropic wants it."""
        return {"x-api-key": api_key} if api_key else {}

    def build_body(self, request: Request) -> dict[str, Any]:
        """The `/v1/messages` body (`request.options` deep-merged last)."""
        return build_body(
            request, model=self.model, cache=self._cache, interleaved=self._interleaved
        )

    def path(self, request: Request) -> str:
        """`/v1/messages`."""
        return "/v1/messages"

    def mapper(self, request: Request) -> StreamMapper:
        """A fresh mapper for one answer."""
        return _MessagesStream(Origin(PROVIDER, self.model))


class _MessagesStream:
    """Maps one Messages stream onto the emitter."""

    __slots__ = (
        "_complete",
        "_container",
        "_input",
        "_json_seen",
        "_open",
        "_origin",
        "_raw",
        "_raw_index",
        "_raw_json",
        "_stop_info",
        "_stop_reason",
    )

    def __init__(self, origin: Origin) -> None:
        self._origin = origin
        self._complete = False
        # The provider's index of the block we opened; None while none is (or a skipped one).
        self._open: int | None = None
        self._json_seen = False
        # A block of no kind of ours, rebuilt until its stop: the block, its index, and the
        # fragments of its `input` JSON.
        self._raw: dict[str, Any] | None = None
        self._raw_index: int | None = None
        self._raw_json: list[str] = []
        self._stop_reason: str | None = None
        # The matched stop sequence and the refusal's explanation (`message_delta`).
        self._stop_info: tuple[str | None, str | None] = (None, None)
        # The code-execution container (`message_delta.delta.container`), kept for the history.
        self._container: dict[str, Any] | None = None
        # Raw usage: uncached input, cache read, cache creation (summed into input_tokens).
        self._input: list[int | None] = [None, None, None]

    @property
    def complete(self) -> bool:
        """Whether `message_stop` arrived."""
        return self._complete

    def on_end(self, emitter: BlockEmitter) -> None:
        """Nothing is held: the answer was finished at `message_stop`."""

    def on_event(self, event: str, raw: bytes, emitter: BlockEmitter) -> str | None:
        """Map one SSE event (dispatched on the JSON `type`, which every event carries).

        A text delta of the open block is returned (see `StreamMapper`).
        """
        if self._complete:
            return None
        if event == "ping":
            emitter.out.append(PingEvent(time.time()))
            return None
        try:
            data = _loads(raw)  # inline: `json_of`'s first try, a call less per event
        except orjson.JSONDecodeError:
            data = json_of(raw)
        kind = data["type"]
        if kind == "content_block_delta":
            # The hot path, inline: a text delta of the open block (`_delta` for the rest).
            delta = data["delta"] if data["index"] == self._open else None
            if delta is not None and delta["type"] == "text_delta":
                text = delta["text"]
                if text.__class__ is not str:
                    raise wrong_type(_DELTA, "delta.text", text)
                return text or None
            self._delta(data, emitter)
        else:
            self._other(kind, data, emitter)
        return None

    def _other(self, kind: Any, data: Any, emitter: BlockEmitter) -> None:
        # Every event but a block's delta.
        if kind == "content_block_start":
            self._start(data, emitter)
        elif kind == "content_block_stop":
            self._stop(data, emitter)
        elif kind == "message_start":
            self._message_start(data["message"], emitter)
        elif kind == "message_delta":
            self._message_delta(data, emitter)
        elif kind == "message_stop":
            self._message_stop(emitter)
        elif kind == "ping":
            emitter.out.append(PingEvent(time.time()))
        elif kind == "error":
            raise _stream_error(data)
        # Any other event type is a newer protocol addition: passed over.

    def _delta(self, data: Any, emitter: BlockEmitter) -> None:
        if data["index"] != self._open:
            self._raw_delta(data)
            return
        delta = data["delta"]
        kind = delta["type"]
        # The hot path: `__class__ is str` inline (no helper call per delta) rejects a
        # non-string before it could reach the answer, as a MalformedStreamError naming it.
        if kind == "text_delta":
            text = delta["text"]
            if text.__class__ is not str:
                raise wrong_type(_DELTA, "delta.text", text)
            if text:
                emitter.text(text)
        elif kind == "input_json_delta":
            fragment = delta["partial_json"]
            if fragment:
                self._json_seen = True
                emitter.input_json(_checked(fragment, _DELTA, "delta.partial_json"))
        elif kind == "thinking_delta":
            text = delta["thinking"]
            if text.__class__ is not str:
                raise wrong_type(_DELTA, "delta.thinking", text)
            if text:
                emitter.thinking(text)
        else:
            self._other_delta(kind, delta, emitter)

    def _other_delta(self, kind: Any, delta: Any, emitter: BlockEmitter) -> None:
        if kind == "signature_delta":
            signature = delta["signature"]
            if signature:
                emitter.signature(_checked(signature, _DELTA, "delta.signature"))
        elif kind == "citations_delta":
            emitter.citation(_citation(delta["citation"], self._origin))
        # Newer delta kinds: passed over.

    def _start(self, data: Any, emitter: BlockEmitter) -> None:
        block = data["content_block"]
        kind = block["type"]
        if kind == "text":
            emitter.start(BlockType.TEXT, _TEXT_META)
            if block.get("text"):
                emitter.text(_checked(block["text"], _START, "content_block.text"))
            for citation in as_list(block.get("citations")):
                emitter.citation(_citation(citation, self._origin))
        elif kind == "thinking":
            emitter.start(BlockType.THINKING, ThinkingMetadata())
            if block.get("thinking"):
                emitter.thinking(_checked(block["thinking"], _START, "content_block.thinking"))
            if block.get("signature"):
                emitter.signature(_checked(block["signature"], _START, "content_block.signature"))
        elif kind == "redacted_thinking":
            redacted = _checked(block["data"], _START, "content_block.data")
            emitter.start(BlockType.THINKING, ThinkingMetadata(redacted=redacted))
        elif kind == "tool_use":
            # A direct call (the default) needs no caller; one made from code does.
            caller = as_dict(block.get("caller"))
            caller = caller if caller and caller.get("type") != "direct" else None
            emitter.tool_use(
                _checked(block["id"], _START, "content_block.id"),
                _checked(block["name"], _START, "content_block.name"),
                caller=caller,
            )
            arguments = block.get("input")
            if arguments is not None and arguments.__class__ is not dict:
                raise wrong_type(_START, "content_block.input", arguments, "an object")
            self._json_seen = bool(arguments)
            if arguments:
                emitter.input_json(orjson.dumps(arguments).decode())
        else:
            # Server tools, MCP, compaction, …: no kind of ours, kept whole for the history.
            self._open = None
            self._raw = as_dict(block)
            self._raw_index = data["index"]
            self._raw_json = []
            return
        self._open = data["index"]

    def _message_start(self, message: Any, emitter: BlockEmitter) -> None:
        usage = as_dict(message.get("usage"))
        emitter.response_info(
            response_id=as_str(message.get("id")),
            model=as_str(message.get("model")),
            service_tier=as_str(usage.get("service_tier")),
        )
        self._usage(usage, emitter)
        # A turn resumed by programmatic tool calling may arrive whole here: the blocks in
        # `content` (a tool_use, …), the stop reason, then only `message_stop`. They are
        # emitted as if they had streamed, under indexes no streamed block uses.
        content = message.get("content")
        if content is not None and content.__class__ is not list:
            raise wrong_type("message_start", "message.content", content, "an array")
        for n, block in enumerate(content or ()):
            index = -1 - n
            self._start({"index": index, "content_block": block}, emitter)
            self._stop({"index": index}, emitter)
        reason = message.get("stop_reason")
        if reason is not None:
            self._stop_reason = _checked(reason, "message_start", "message.stop_reason")

    def _raw_delta(self, data: Any) -> None:
        # A delta of the block being kept whole, or of no open block (passed over).
        raw = self._raw
        if raw is None or data["index"] != self._raw_index:
            return
        delta = data["delta"]
        kind = delta["type"]
        if kind == "input_json_delta":
            self._raw_json.append(_checked(delta["partial_json"], _DELTA, "delta.partial_json"))
        elif kind == "compaction_delta":
            # `content` is null when the compaction produced no summary; the encrypted
            # content must go back verbatim with the block.
            _append(raw, "content", delta.get("content"))
            _append(raw, "encrypted_content", delta.get("encrypted_content"))
        elif kind == "signature_delta":
            _append(raw, "signature", delta["signature"])
        elif kind == "citations_delta":
            raw["citations"] = [*as_list(raw.get("citations")), delta["citation"]]
        # Newer delta kinds: passed over.

    def _raw_stop(self, emitter: BlockEmitter) -> None:
        raw = self._raw
        self._raw = self._raw_index = None
        if raw is None:
            return
        arguments = "".join(self._raw_json)
        if arguments:  # sent back as it came: an integer past 64 bits keeps its digits
            raw["input"] = exact_loads(arguments)
        emitter.provider_block(raw)

    def _stop(self, data: Any, emitter: BlockEmitter) -> None:
        if data["index"] != self._open:
            if data["index"] == self._raw_index:
                self._raw_stop(emitter)
            return
        self._open = None
        if emitter.open_type is BlockType.TOOL_USE and not self._json_seen:
            emitter.input_json("{}")
        emitter.stop()

    def _message_delta(self, data: Any, emitter: BlockEmitter) -> None:
        delta = data["delta"]
        self._stop_reason = as_str(delta.get("stop_reason")) or self._stop_reason
        sequence, message = self._stop_info
        self._stop_info = (
            as_str(delta.get("stop_sequence")) or sequence,
            _stop_message(as_dict(delta.get("stop_details"))) or message,
        )
        container = as_dict(delta.get("container"))
        if as_str(container.get("id")):
            self._container = container
        self._usage(data.get("usage"), emitter)

    def _message_stop(self, emitter: BlockEmitter) -> None:
        self._complete = True
        if self._container is not None:
            # Not content: the next request names the container (`container`), so that code
            # execution goes on with its files; see `_anthropic_request`.
            emitter.provider_block({**self._container, "type": CONTAINER})
        raw = self._stop_reason
        sequence, message = self._stop_info
        emitter.finish(_stop_reason(raw), raw, stop_sequence=sequence, stop_message=message)

    def _usage(self, usage: Any, emitter: BlockEmitter) -> None:
        fields = as_dict(usage)
        if not fields:
            return
        raw = self._input
        for n, key in enumerate(INPUT_KEYS):
            value = as_int(fields.get(key))
            if value is not None:
                raw[n] = value
        totals: list[int | None] = [*raw, as_int(fields.get("output_tokens"))]
        iterations = as_list(fields.get("iterations"))
        # A compaction's own sampling is left out of the top-level counts (the API's usage
        # docs): added here, so that the usage is what the answer cost.
        for n, extra in enumerate(compaction_usage(iterations)):
            if extra:
                totals[n] = (totals[n] or 0) + extra
        uncached, read, created, output = totals
        known = uncached is not None or read is not None or created is not None
        input_tokens = (uncached or 0) + (read or 0) + (created or 0) if known else None
        five_minutes, one_hour = cache_split(fields, iterations)
        details = as_dict(fields.get("output_tokens_details"))
        tools = as_dict(fields.get("server_tool_use"))
        emitter.out.append(
            UsageEvent(
                input_tokens=input_tokens,
                output_tokens=output,
                total_tokens=(
                    input_tokens + output
                    if input_tokens is not None and output is not None
                    else None
                ),
                cache_read_input_tokens=read,
                cache_creation_input_tokens=created,
                reasoning_tokens=as_int(details.get("thinking_tokens")),
                cache_creation_5m_input_tokens=five_minutes,
                cache_creation_1h_input_tokens=one_hour,
                web_search_requests=as_int(tools.get("web_search_requests")),
                web_fetch_requests=as_int(tools.get("web_fetch_requests")),
            )
        )


def _stop_message(details: dict[str, Any]) -> str | None:
    """A refusal's `stop_details` as one line: its explanation and policy category."""
    explanation = as_str(details.get("explanation"))
    category = as_str(details.get("category"))
    if explanation and category:
        return f"{explanation} (category: {category})"
    return explanation or category


def _citation(raw: Any, origin: Origin) -> Citation:
    """An Anthropic citation (it cites the whole text block it arrives in)."""
    data = as_dict(raw)
    if not data:
        raise wrong_type(_DELTA, "delta.citation", raw, "an object")
    return Citation(
        data,
        url=as_str(data.get("url")),
        title=as_str(data.get("title")) or as_str(data.get("document_title")),
        cited_text=as_str(data.get("cited_text")),
        origin=origin,
    )


def _append(block: dict[str, Any], key: str, piece: Any) -> None:
    # A streamed string field of a kept block: the pieces concatenated, null left as it is
    # (an empty piece too: the API refuses a compaction's `content: ""`, null is "none").
    if piece is not None and piece != "":
        block[key] = (as_str(block.get(key)) or "") + _checked(piece, _DELTA, f"delta.{key}")


def _checked(value: Any, event: str, field: str) -> str:
    # A non-string where the protocol has a string is malformed data; a bare str() would
    # hide it in the answer.
    if value.__class__ is not str:
        raise wrong_type(event, field, value)
    return value


def _stop_reason(raw: str | None) -> StopReason | None:
    if raw is None:
        return None
    return _STOP_REASONS.get(raw, StopReason.OTHER)


def _stream_error(data: Any) -> APIStatusError:
    """The typed error for an `error` event inside a 200 stream."""
    error = as_dict(data.get("error"))
    error_type = as_str(error.get("type"))
    message = as_str(error.get("message")) or "the provider reported an error mid-stream"
    cls = error_class(None, error_type)
    return cls(
        message,
        provider=PROVIDER,
        error_type=error_type,
        request_id=as_str(data.get("request_id")),
        streamed=True,
    )
