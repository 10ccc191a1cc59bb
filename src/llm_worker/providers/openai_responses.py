"""OpenAI Responses API client (`POST /v1/responses`, streamed).

The request body is built in `_openai_responses_request` (its docstring says what is sent back
and what is dropped). This module maps the stream:

- `response.output_item.added` of a `reasoning` item → a thinking block with
  `ThinkingMetadata(item_id="rs_…")`; its `response.reasoning_summary_text.delta` → thinking
  deltas, each summary part in a block of its own (so the parts go back as they came);
  `response.reasoning_text.delta` (raw reasoning of open-weight models) → thinking deltas; the
  `encrypted_content` of its `response.output_item.done` → a `SignatureDelta`;
- `response.output_text.delta` and `response.refusal.delta` → a text block with
  `TextMetadata(item_id="msg_…", phase=…)` (the message's `commentary` / `final_answer`
  phase), the delta's `logprobs` (when the request included them) as `TextDelta.logprobs`;
  the content parts of one message join into one block;
- `response.output_text.annotation.added` (or, from a server that sends no such events, the
  `annotations` of the finished message) → citations of that block (`Citation`: url / file
  citations, their indexes moved to count from the start of the joined text);
- a `function_call` item → a tool-use block (`id` = `call_id`, `item_id` = `fc_…`) fed by
  `response.function_call_arguments.delta` (or by `.done` when no delta came); the item's
  `caller` (`direct`, or the `program` item of programmatic tool calling that made the
  call) and `namespace` (of a function in a `namespace` tool) go on `ToolUseMetadata.caller`
  (the caller's fields, and `namespace`), sent back on the call;
- `response.created` and the terminal event → the response's `id`, `model` and
  `service_tier` (the tier that served it is known only at the end) on the closing status;
- `response.completed` → usage, then the stop: `TOOL_USE` with calls, `REFUSAL` after a refusal,
  else `END_TURN`; `response.incomplete` → usage and `MAX_TOKENS` / `CONTENT_FILTER` / `OTHER`
  by its reason; `response.failed` and `error` → usage if any, then the typed error (after the
  abort of the open block); an organization OpenAI has not verified for reasoning summaries
  gets a `ConfigurationError` saying what to change instead (after the same failure events);
- items that arrive whole (no deltas) still give their text, summaries and arguments.

- an item of any other kind (hosted tools: `web_search_call`, `file_search_call`,
  `code_interpreter_call`, `mcp_list_tools`, `mcp_call`, `tool_search_call`, …, and the
  `compaction` item of a server-side compaction, the `program` / `program_output` items of
  programmatic tool calling) → one `BlockType.PROVIDER` block
  (`ProviderMetadata`) holding the whole item of its `response.output_item.done`, in output
  order; the Worker keeps it as a `ProviderPart`, and `_openai_responses_request` sends it
  back in place to the same model (it says which kinds).

Other events (the hosted tools' progress events, `response.queued`, a trailing `data: [DONE]`
from OpenRouter) pass without a trace.

Items may interleave (OpenRouter streams a whole message while its reasoning item is still
open): one item streams at a time, the events of the others are held in arrival order and
played when it is done, so no block is open twice and no byte is lost or reordered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Final

import orjson

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker.errors import (
    APIStatusError,
    ContentFilterError,
    InvalidRequestError,
    MalformedStreamError,
    ServerError,
)
from llm_worker.events import (
    BlockType,
    StopReason,
    TextMetadata,
    ThinkingMetadata,
    UsageEvent,
)
from llm_worker.messages import Citation, Origin, Request
from llm_worker.providers._base import HttpClient
from llm_worker.providers._blocks import BlockEmitter, StreamMapper, wrong_type
from llm_worker.providers._http import error_class
from llm_worker.providers._openai_errors import unverified_organization
from llm_worker.providers._openai_logprobs import token_logprobs
from llm_worker.providers._openai_responses_request import PROVIDER, build_body
from llm_worker.providers._sse import json_of

__all__ = ("OpenAIResponsesClient",)


class OpenAIResponsesClient(HttpClient):
    """Streams the OpenAI Responses API (`/v1/responses`) as normalized events.

    Reasoning summaries become thinking blocks, function calls tool-use blocks (the `call_id`
    is the id a tool result answers; the `fc_…` item id rides along), and reasoning items keep
    their id and encrypted content so that the next request can send them back.

    Example:
        ```python
        client = OpenAIResponsesClient(model="gpt-5")
        request = Request([Message.user("Hi")], thinking=ThinkingConfig(effort="low"))
        async for event in client.stream(request):
            ...
        ```

    The key comes from `OPENAI_API_KEY` unless given; `base_url` points it at a compatible
    server (OpenRouter, Azure, a local one). Stateless use: pass `options={"store": False}`
    with `thinking` set, and reasoning is replayed from its encrypted content. Stored use: pass
    `options={"previous_response_id": id}` with the `response_id` of the closing
    `StatusEvent` of the last answer, and the whole history as usual: only what follows that
    answer is sent. Reasoning summaries are asked for only with
    `ThinkingConfig(include_thoughts=True)` (they need a verified OpenAI organization).
    """

    provider = PROVIDER
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def build_body(self, request: Request) -> dict[str, Any]:
        """The Responses body for a neutral request (see `_openai_responses_request`).

        Raises:
            ConfigurationError: The request has stop sequences, which Responses lacks.
            InvalidMessagesError: A part sits in a message of the wrong role.
        """
        return build_body(request, model=self.model)

    def path(self, request: Request) -> str:
        """`/responses`."""
        return "/responses"

    def mapper(self, request: Request) -> StreamMapper:
        """A fresh mapper for one streamed response."""
        return _ResponsesMapper(Origin(PROVIDER, self.model))


_Handler = Callable[["_ResponsesMapper", dict[str, Any], BlockEmitter], None]

_TEXT_DELTA: Final = "response.output_text.delta"

_INCOMPLETE: Final[dict[str | None, StopReason]] = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}

# Codes of `response.error` that the shared table does not know (Responses' own spellings).
_ERROR_CODES: Final[dict[str, type[APIStatusError]]] = {
    "invalid_prompt": ContentFilterError,  # "your prompt was flagged as potentially violating…"
    "image_content_policy_violation": ContentFilterError,
    "vector_store_timeout": ServerError,
}


class _ResponsesMapper:
    """Maps one Responses stream onto a `BlockEmitter` (the `StreamMapper` protocol)."""

    __slots__ = (
        "_active",
        "_calls",
        "_cited",
        "_complete",
        "_item_id",
        "_kind",
        "_origin",
        "_pending",
        "_phase",
        "_refusal",
        "_starts",
        "_streamed",
        "_summary",
    )

    def __init__(self, origin: Origin | None = None) -> None:
        self._origin = origin  # the producer of the citations' data
        self._active: int | None = None  # output_index of the item that is streaming
        self._pending: dict[int, list[dict[str, Any]]] = {}  # events of the other items
        self._kind: str | None = None
        self._item_id: str | None = None
        self._phase: str | None = None  # the active message's phase
        self._streamed = False  # the active item's content arrived as deltas
        self._cited = False  # the active message's annotations arrived as events
        # Where each content part of the active message starts in its joined text: the
        # parts become one text block, annotation indexes count from their own part.
        self._starts = [0]
        self._summary = 0  # the active reasoning item's summary part
        self._calls = 0
        self._refusal = False
        self._complete = False

    @property
    def complete(self) -> bool:
        """Whether `response.completed` or `response.incomplete` arrived."""
        return self._complete

    def on_event(self, kind: str, data: bytes, emitter: BlockEmitter) -> str | None:
        """Map one SSE event (a JSON object with a `type`).

        A text delta of the streaming item is returned (see `StreamMapper`).
        """
        # After the terminal event nothing belongs to the answer (OpenRouter adds [DONE]).
        if self._complete:
            return None
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            # The rare paths: an empty event or `[DONE]` (nothing), bytes that are not UTF-8
            # or a lone surrogate (`json_of` reads them).
            if not data or data == b"[DONE]":
                return None
            event = json_of(data)
        kind = event["type"]
        if kind == _TEXT_DELTA and not self._pending:
            # The hot path, inline (`text_delta`): a text delta of the streaming item.
            index = event.get("output_index")
            if index is None or index == self._active:
                delta = event["delta"]
                if delta.__class__ is str and not event.get("logprobs"):
                    # Handed to `drive`, which makes its event: it continues the block
                    # `item_added` opened (an empty delta too, as `emitter.text` did).
                    self._streamed = True
                    return delta
        handler = _HANDLERS.get(kind)
        if handler is None:
            return None
        # Inline `_route` for the hot path: one dict read and one compare per delta.
        index = event.get("output_index")
        if index is not None and index != self._active and not self._claim(index, event):
            return None
        handler(self, event, emitter)
        while self._pending and self._active is None:
            # The streaming item is done: play the next held item, in arrival order.
            held = self._pending.pop(next(iter(self._pending)))
            for event in held:
                self._route(event, emitter)
        return None

    def on_end(self, emitter: BlockEmitter) -> None:
        """Nothing is held at the end: the terminal event already finished the answer."""

    def _route(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        index = event.get("output_index")
        if index is not None and index != self._active and not self._claim(index, event):
            return
        _HANDLERS[event["type"]](self, event, emitter)

    def _claim(self, index: int, event: dict[str, Any]) -> bool:
        """Whether an event of item `index` streams now; if another item does, hold it."""
        if self._active is not None:
            self._pending.setdefault(index, []).append(event)
            return False
        self._activate(index)
        return True

    def _activate(self, index: int) -> None:
        self._active = index
        self._kind = None
        self._item_id = None
        self._phase = None
        self._streamed = False
        self._cited = False
        self._starts = [0]
        self._summary = 0

    def _flush(self, emitter: BlockEmitter) -> None:
        """The response ended: play every held item, closing the unfinished ones."""
        while self._pending:
            index = next(iter(self._pending))
            events = self._pending.pop(index)
            emitter.stop()
            self._active = None
            for event in events:
                self._route(event, emitter)

    # -- items -------------------------------------------------------------------------------

    def item_added(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        item = as_dict(event.get("item"))
        kind = as_str(item.get("type"))
        item_id = as_str(item.get("id"))
        self._kind = kind
        self._item_id = item_id
        if kind == "reasoning":
            # Started at once: an item with no summary still carries its id and encrypted
            # content, which the next request needs.
            emitter.start(BlockType.THINKING, ThinkingMetadata(item_id=item_id))
        elif kind == "message":
            # Started at once with its id, so each text delta is a plain append.
            self._phase = as_str(item.get("phase"))
            emitter.start(BlockType.TEXT, TextMetadata(item_id=item_id, phase=self._phase))
        elif kind == "function_call":
            name = as_str(item.get("name"))
            if name is None:
                raise MalformedStreamError(
                    "a function_call item without a name", provider=PROVIDER, streamed=True
                )
            call_id = item.get("call_id")
            if call_id is not None and call_id.__class__ is not str:
                raise wrong_type(event["type"], "item.call_id", call_id)
            call_id = call_id or item_id or ""
            emitter.tool_use(call_id, name, item_id=item_id, caller=_call_context(item))
            self._calls += 1

    def item_done(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        item = as_dict(event.get("item"))
        kind = self._kind or as_str(item.get("type"))
        if kind == "message":
            if not self._streamed:
                self._message_fallback(item, emitter)
            if not self._cited:
                # A server that sent no annotation events may still list them on the item.
                self._item_citations(item, emitter)
        elif kind == "reasoning":
            if not self._streamed:
                self._reasoning_fallback(item, emitter)
            encrypted = as_str(item.get("encrypted_content"))
            if encrypted:
                self._open_thinking(emitter)
                emitter.signature(encrypted)
        elif kind == "function_call":
            arguments = item.get("arguments")
            if arguments and not self._streamed:
                if arguments.__class__ is not str:
                    raise wrong_type(event["type"], "item.arguments", arguments)
                emitter.input_json(arguments)
        elif item:
            # A hosted tool's item (no kind of ours): kept whole, as it is done.
            emitter.provider_block(item)
        emitter.stop()
        self._active = None

    def _message_fallback(self, item: dict[str, Any], emitter: BlockEmitter) -> None:
        # A server that sent the message whole, without deltas: its text is still the answer.
        for part in as_list(item.get("content")):
            content = as_dict(part)
            text = as_str(content.get("text"))
            if text is None:
                text = as_str(content.get("refusal"))
                self._refusal = self._refusal or text is not None
            if text:
                self._open_text(emitter)
                logprobs = token_logprobs(as_list(content.get("logprobs")))
                emitter.text(text, logprobs or None)

    def _item_citations(self, item: dict[str, Any], emitter: BlockEmitter) -> None:
        offset = 0
        for part in as_list(item.get("content")):
            content = as_dict(part)
            for annotation in as_list(content.get("annotations")):
                self._open_text(emitter)
                emitter.citation(_citation(as_dict(annotation), offset, self._origin))
            offset += len(as_str(content.get("text")) or as_str(content.get("refusal")) or "")

    def _reasoning_fallback(self, item: dict[str, Any], emitter: BlockEmitter) -> None:
        summaries = [as_str(as_dict(s).get("text")) for s in as_list(item.get("summary"))]
        for n, text in enumerate(t for t in summaries if t):
            if n:
                emitter.start(BlockType.THINKING, ThinkingMetadata(item_id=self._item_id))
            self._open_thinking(emitter)
            emitter.thinking(text)
        for part in as_list(item.get("content")):
            text = as_str(as_dict(part).get("text"))
            if text:
                self._open_thinking(emitter)
                emitter.thinking(text)

    def _open_text(self, emitter: BlockEmitter) -> None:
        if emitter.open_type is not BlockType.TEXT:
            emitter.start(BlockType.TEXT, TextMetadata(item_id=self._item_id, phase=self._phase))

    def _open_thinking(self, emitter: BlockEmitter) -> None:
        if emitter.open_type is not BlockType.THINKING:
            emitter.start(BlockType.THINKING, ThinkingMetadata(item_id=self._item_id))

    # -- deltas ------------------------------------------------------------------------------

    def text_delta(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        delta = event["delta"]
        if delta.__class__ is not str:  # inline: the hot path
            raise wrong_type(event["type"], "delta", delta)
        logprobs = event.get("logprobs")  # `[]` unless the request included them
        if logprobs:
            emitter.text(delta, token_logprobs(as_list(logprobs)) or None)
        else:
            emitter.text(delta)  # continues the block `item_added` opened
        self._streamed = True

    def part_done(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        # `output_text.done` / `refusal.done`: the next content part starts after this one.
        starts = self._starts
        text = as_str(event.get("text"))
        if text is None:
            text = as_str(event.get("refusal")) or ""
        if as_int(event.get("content_index")) in (None, len(starts) - 1):
            starts.append(starts[-1] + len(text))

    def annotation(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        index, starts = as_int(event.get("content_index")) or 0, self._starts
        offset = starts[index] if 0 <= index < len(starts) else starts[-1]
        self._open_text(emitter)
        emitter.citation(_citation(as_dict(event.get("annotation")), offset, self._origin))
        self._cited = True

    def refusal_delta(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        # A refusal is kept as the answer's text; the stop reason says it was a refusal.
        self._refusal = True
        self.text_delta(event, emitter)

    def summary_delta(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        part = event.get("summary_index", 0)
        if part != self._summary:
            # One block per summary part, so the parts go back as they came.
            self._summary = part
            emitter.start(BlockType.THINKING, ThinkingMetadata(item_id=self._item_id))
        else:
            self._open_thinking(emitter)
        emitter.thinking(_delta(event))
        self._streamed = True

    def reasoning_text_delta(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        self._open_thinking(emitter)
        emitter.thinking(_delta(event))
        self._streamed = True

    def arguments_delta(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        emitter.input_json(_delta(event))
        self._streamed = True

    def arguments_done(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        if not self._streamed:
            arguments = event.get("arguments")
            if arguments is not None and arguments.__class__ is not str:
                raise wrong_type(event["type"], "arguments", arguments)
            if arguments:
                emitter.input_json(arguments)
            self._streamed = True

    # -- the response ------------------------------------------------------------------------

    def created(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        _response_info(as_dict(event.get("response")), emitter)

    def completed(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        response = as_dict(event.get("response"))
        _response_info(response, emitter)  # the tier that served it is known only now
        self._flush(emitter)
        _append_usage(response, emitter)
        reason = as_str(as_dict(response.get("incomplete_details")).get("reason"))
        status = as_str(response.get("status")) or "completed"
        if reason is not None or status == "incomplete":
            stop, raw = _INCOMPLETE.get(reason, StopReason.OTHER), reason or status
        elif self._calls:
            stop, raw = StopReason.TOOL_USE, status
        elif self._refusal:
            stop, raw = StopReason.REFUSAL, "refusal"
        else:
            stop, raw = StopReason.END_TURN, status
        emitter.finish(stop, raw)
        self._complete = True

    def failed(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        response = as_dict(event.get("response"))
        _response_info(response, emitter)
        self._flush(emitter)
        _append_usage(response, emitter)
        error = as_dict(response.get("error"))
        raise _stream_error(
            as_str(error.get("code")),
            as_str(error.get("message")) or "the response failed",
        )

    def error(self, event: dict[str, Any], emitter: BlockEmitter) -> None:
        # Documented shape: {"type": "error", "code", "message", "param"}; some servers nest
        # the same fields in an "error" object.
        error = as_dict(event.get("error")) or event
        code = as_str(error.get("code")) or as_str(error.get("type"))
        if code == "error":
            code = None
        raise _stream_error(code, as_str(error.get("message")) or "the provider reported an error")

    caller_error = staticmethod(unverified_organization)  # drive()'s optional hook


def _response_info(response: dict[str, Any], emitter: BlockEmitter) -> None:
    emitter.response_info(
        response_id=as_str(response.get("id")),
        model=as_str(response.get("model")),
        service_tier=as_str(response.get("service_tier")),
    )


def _call_context(item: dict[str, Any]) -> dict[str, Any] | None:
    """A function call's `caller` fields and its `namespace`, if it has either."""
    context = dict(as_dict(item.get("caller")))
    namespace = as_str(item.get("namespace"))
    if namespace:
        context["namespace"] = namespace
    return context or None


def _citation(annotation: dict[str, Any], offset: int, origin: Origin | None) -> Citation:
    """A Responses annotation as a `Citation`, its indexes counted from the joined text.

    The kinds: `url_citation`, `file_citation`, `container_file_citation`, `file_path`.
    """
    start = as_int(annotation.get("start_index"))
    if start is None:
        start = as_int(annotation.get("index"))  # a file citation marks one position
    end = as_int(annotation.get("end_index"))
    return Citation(
        annotation,
        url=as_str(annotation.get("url")),
        title=as_str(annotation.get("title")) or as_str(annotation.get("filename")),
        start_index=None if start is None else start + offset,
        end_index=None if end is None else end + offset,
        origin=origin,
    )


def _delta(event: dict[str, Any]) -> str:
    delta = event["delta"]
    if delta.__class__ is not str:
        raise wrong_type(event["type"], "delta", delta)
    return delta


def _append_usage(response: dict[str, Any], emitter: BlockEmitter) -> None:
    usage = as_dict(response.get("usage"))
    if not usage:
        return
    inputs = as_dict(usage.get("input_tokens_details"))
    outputs = as_dict(usage.get("output_tokens_details"))
    emitter.out.append(
        UsageEvent(
            input_tokens=as_int(usage.get("input_tokens")),
            output_tokens=as_int(usage.get("output_tokens")),
            total_tokens=as_int(usage.get("total_tokens")),
            cache_read_input_tokens=as_int(inputs.get("cached_tokens")),
            cache_creation_input_tokens=as_int(inputs.get("cache_write_tokens")),
            reasoning_tokens=as_int(outputs.get("reasoning_tokens")),
        )
    )


def _stream_error(code: str | None, message: str) -> APIStatusError:
    cls = error_class(None, code)
    if cls is APIStatusError and code is not None:
        cls = _ERROR_CODES.get(code, InvalidRequestError if code.startswith("invalid") else cls)
    return cls(message, provider=PROVIDER, error_type=code, streamed=True)


_HANDLERS: Final[dict[str, _Handler]] = {
    "response.output_item.added": _ResponsesMapper.item_added,
    "response.output_item.done": _ResponsesMapper.item_done,
    "response.created": _ResponsesMapper.created,
    "response.output_text.delta": _ResponsesMapper.text_delta,
    "response.output_text.done": _ResponsesMapper.part_done,
    "response.refusal.done": _ResponsesMapper.part_done,
    "response.output_text.annotation.added": _ResponsesMapper.annotation,
    "response.refusal.delta": _ResponsesMapper.refusal_delta,
    "response.reasoning_summary_text.delta": _ResponsesMapper.summary_delta,
    "response.reasoning_text.delta": _ResponsesMapper.reasoning_text_delta,
    "response.function_call_arguments.delta": _ResponsesMapper.arguments_delta,
    "response.function_call_arguments.done": _ResponsesMapper.arguments_done,
    "response.completed": _ResponsesMapper.completed,
    "response.incomplete": _ResponsesMapper.completed,
    "response.failed": _ResponsesMapper.failed,
    "error": _ResponsesMapper.error,
}
