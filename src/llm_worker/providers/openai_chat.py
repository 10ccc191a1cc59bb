"""The OpenAI Chat Completions client (`/chat/completions`), for OpenAI and compatible servers.

The request body is built in `_openai_chat_request`; this module maps the stream. Chat
Completions sends no block starts or stops, only deltas, so blocks are synthesized:

- `content` deltas are text (with `choice.logprobs.content` as `TextDelta.logprobs` when the
  request asked for them), and so is an audio answer's `audio.transcript` (the audio itself is
  not kept); `reasoning_content` (DeepSeek, Z.ai, Kimi) deltas are thinking marked
  `ThinkingMetadata(replay=True)`, which `_openai_chat_request` sends back to the same model;
  `reasoning` (OpenRouter, Groq) deltas are thinking that is not sent back. Content given as
  a list of parts is read part by part: `text` parts are text, and Mistral's (Magistral)
  `{"type": "thinking", "thinking": [{"type": "text", …}]}` parts are thinking marked
  `ThinkingMetadata(replay=True, item_id="thinking")`, sent back to the same model as a
  thinking content part. OpenRouter's
  `reasoning_details` repeats `reasoning` and is not read (its signatures could only be sent
  back through an OpenRouter-only request field).
- `annotations` (`url_citation`: OpenAI's search models, OpenRouter's web plugin) become
  citations of the text block (`Citation`, `origin` this client's); indexes count in the
  message's content.
- `refusal` deltas (structured outputs) and `refusal` content parts are kept visibly as
  text, and an answer that refused stops with `StopReason.REFUSAL` (the raw `finish_reason`,
  usually `stop`, stays on the stop). Content parts without text (`image_url`, Mistral's
  `reference`) add nothing to the text.
- the legacy `function_call` delta (the `functions` API) is read as tool call 0 (an id is
  made up; it goes back as a `tool_calls` entry), unless its delta has `tool_calls` too.
- tool calls arrive by `index`, several per response and several in one chunk, with `id` and
  `name` only in the first fragment. At most one block may be open, so the first call streams
  live and calls of other indexes are buffered; a buffered call is emitted as a whole block
  (start, one delta, stop) once the live one is finished, in the order the calls began. The
  live call is closed early when another call arrives and its arguments already parse as a
  complete JSON object (a complete object cannot grow), so sequential calls each stop as
  soon as they are done. Ollama, LiteLLM's `ollama_chat` and some proxies send every parallel
  call at `index` 0, each with its own `id`: a new id that names its function opens a new
  call even at a used index, and a fragment without one (or, as Poolside sends, with a fresh
  id but no name) continues the last call of its index (`_openai_chat_tools`).
- `finish_reason` gives the stop reason (`stop` → END_TURN, `length` → MAX_TOKENS,
  `tool_calls` / `function_call` → TOOL_USE, `content_filter` → CONTENT_FILTER, others OTHER;
  `stop` with vLLM's `stop_reason` naming a stop string → STOP_SEQUENCE), the raw value kept.
- usage comes from the final chunk (`choices: []`), from any chunk carrying `usage`, or from
  Groq's `x_groq.usage`; `prompt_tokens_details.cached_tokens` (DeepSeek:
  `prompt_cache_hit_tokens`) is the cache read, OpenRouter's `cache_write_tokens` the cache
  write, `completion_tokens_details.reasoning_tokens` the reasoning part, and the
  `audio_tokens` (prompt and completion) and `accepted_` / `rejected_prediction_tokens` (of a
  predicted output) are kept as they are.
- the chunks' `id`, `model`, `service_tier` and `system_fingerprint` (the backend
  configuration, for reproducibility with `seed`) — read until a chunk names the response:
  Azure's first one does not — go on the closing `StatusEvent`.
- an `{"error": …}` object in a `data:` line (OpenRouter) or an `event: error` (Groq) raises
  the typed `ProviderError` (an unverified organization's refusal: `ConfigurationError`).

A response is complete when `data: [DONE]` arrived, or when the answer's `finish_reason` did:
the finish reason closes the one choice read (there is no other block to wait for), and
several local servers and proxies end the stream right after it, with neither a usage chunk
nor `[DONE]`. A stream cut between OpenAI's finish chunk and its usage chunk therefore gives
the whole answer without its usage. A stream that ends before a `finish_reason` (after text,
in a tool call) is interrupted.

A server ignoring `stream: true` that answers with one JSON `chat.completion` is read too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import urlsplit

import orjson
from orjson import loads as _loads

from llm_worker._json import as_dict, as_int, as_list, as_str, json_type
from llm_worker.errors import APIStatusError, MalformedStreamError
from llm_worker.events import (
    BlockType,
    Event,
    StopReason,
    ThinkingMetadata,
    TokenLogprob,
)
from llm_worker.messages import Citation, Origin, Request
from llm_worker.providers._base import HttpClient
from llm_worker.providers._blocks import BlockEmitter, drive, wrong_type
from llm_worker.providers._body import encoded_request
from llm_worker.providers._http import error_class
from llm_worker.providers._openai_chat_request import PROVIDER, THINKING_PART, build_chat_body
from llm_worker.providers._openai_chat_tools import ToolCalls
from llm_worker.providers._openai_chat_usage import usage_event
from llm_worker.providers._openai_errors import unverified_organization
from llm_worker.providers._openai_logprobs import token_logprobs
from llm_worker.providers._sse import json_of, text_of

if TYPE_CHECKING:
    from llm_worker.providers._template import ByteTemplate

__all__ = ("OpenAIChatClient",)

_PROVIDER: Final = PROVIDER

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.CONTENT_FILTER,
}


# Thinking from `reasoning_content` goes back to its model; from `reasoning` it does not.
_OPENAI_HOST: Final = "api.openai.com"
_REPLAYED: Final = ThinkingMetadata(replay=True)
_SHOWN: Final = ThinkingMetadata()
# Mistral's thinking content parts go back to their model as content parts: the item id
# names that form (Mistral refuses an unknown `reasoning_content` field).
_CHUNKED: Final = ThinkingMetadata(replay=True, item_id=THINKING_PART)


class OpenAIChatClient(HttpClient):
    """Streams OpenAI Chat Completions answers as normalized events.

    Works with OpenAI and with compatible servers (vLLM, Ollama, llama.cpp, OpenRouter, Groq,
    DeepSeek, …) through `base_url`. The key defaults to `OPENAI_API_KEY`; a `base_url` may be
    given without a key for local servers.

    Example:
        ```python
        client = OpenAIChatClient(model="gpt-4o")
        async for event in client.stream(Request([Message.user("Hello")])):
            ...
        ```
    """

    provider = _PROVIDER
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def build_body(self, request: Request) -> dict[str, Any]:
        """The Chat Completions body; see `_openai_chat_request.build_chat_body`.

        `Request.prompt_cache` is sent as `prompt_cache_key` to OpenAI's own host
        (`api.openai.com`) only: compatible servers may refuse a field they do not know.
        """
        return build_chat_body(request, self.model, cache_key=_is_openai(self.transport.base_url))

    def path(self, request: Request) -> str:
        """`/chat/completions`, below the base URL."""
        return "/chat/completions"

    def mapper(self, request: Request) -> ChatStreamMapper:
        """A fresh chunk mapper for one response."""
        return ChatStreamMapper(scrub=self.transport.scrub, origin=Origin(_PROVIDER, self.model))

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Send the request and yield the answer's normalized events as they arrive.

        Raises:
            ProviderError: A typed subclass for every failure, after the abort, error and
                FAILED status events.
        """
        # An SSE stream never begins with `{`: a body that does is a server that ignored
        # `stream: true` (one `chat.completion` object, or an error object), handed on as one
        # SSE event. (An HTML page is refused by the transport, for every client.)
        chunks = self.transport.stream(
            self.path(request),
            encoded_request(self.build_body, request),
            params=self.params(request),
            whole=_whole_body,
        )
        return drive(
            chunks,
            partial(self.mapper, request),  # made at the first bytes (see `drive`)
            provider=self.provider,
            scrub=self.transport.scrub,
            max_event_bytes=self.transport.max_event_bytes,
            max_answer_chars=self.max_answer_chars,
        )


def _whole_body(body: bytes) -> bytes:
    # One SSE event whose data lines are the JSON's lines (rejoined with LF by the decoder).
    return b"".join(b"data: " + line + b"\n" for line in body.splitlines()) + b"\n"


class ChatStreamMapper:
    """Maps one Chat Completions stream onto a `BlockEmitter` (the `StreamMapper` protocol)."""

    __slots__ = (
        "_done",
        "_finish",
        "_identified",
        "_keyed",
        "_origin",
        "_plain",
        "_refused",
        "_scrub",
        "_stop_string",
        "_template",
        "_tools",
        "_tries",
    )
    caller_error = staticmethod(unverified_organization)  # drive()'s optional hook

    def __init__(
        self, *, scrub: Callable[[str], str] = lambda s: s, origin: Origin | None = None
    ) -> None:
        self._scrub = scrub
        self._origin = origin  # the producer of the citations' data
        self._identified = False
        self._done = False
        self._finish: str | None = None
        self._stop_string = False
        self._refused = False
        self._tools = ToolCalls()
        # OpenAI's choice carries `index`, `delta` and `finish_reason` in every chunk (and
        # `logprobs`, which others leave out): read by subscript until one lacks a key (then
        # `.get`, for the stream).
        self._keyed = True
        # The three states the hot path needs, in one test per chunk: the response is
        # identified, its choices are read by subscript, no tool call is live. Set again after
        # each chunk the full path reads (the only place they change).
        self._plain = False
        # The stream's text chunk as bytes (see `_template`): learnt from a chunk the hot
        # path read, at most `_tries` times a stream (a server whose chunks keep changing
        # elsewhere than in the text costs a few proofs, not one per chunk).
        self._template: ByteTemplate | None = None
        self._tries = 4

    @property
    def complete(self) -> bool:
        """`[DONE]` arrived, or the answer's finish reason did (see the module docstring)."""
        return self._done or self._finish is not None

    def on_event(self, event: str, data: bytes, emitter: BlockEmitter) -> str | None:  # noqa: C901
        """Map one SSE event; a delta of only text is returned (see `StreamMapper`)."""
        if event != "message":
            return self._named(event, data)
        if self._plain and self._template is not None:
            text = self._template.text(data)  # the stream's text chunk but for its strings
            if text is not None:
                return text or None
        # Parsed JSON is Any, read directly: a chunk of another shape raises AttributeError /
        # TypeError, which drive() reports as a MalformedStreamError.
        try:
            chunk: Any = _loads(data)  # inline: `json_of`'s first try, a call less per event
        except orjson.JSONDecodeError:
            chunk = self._unparsed(data)
            if chunk is None:
                return None
        if self._plain:
            # The hot path, inline: one choice whose delta is only text, nothing else to read
            # (`_chunk` reads everything else, a present `error` or `x_groq` included). The
            # checks by subscript (no method call per read, ~100 instructions each); `x_groq`
            # and `usage` are tested for presence first, as they are absent from nearly every
            # chunk. `logprobs` by `.get`: many third-party servers leave it out (cheaper than
            # `in` and a subscript, measured). A chunk that is no JSON object fails the first
            # subscript (TypeError: orjson gives a dict, list, str, number, bool or None), so
            # its type is tested only where the hot path does not take it.
            try:
                # One choice, unpacked: a list of another length (the usage chunk's, n > 1)
                # raises ValueError; anything else but a list of objects fails a subscript.
                (choice,) = chunk["choices"]
                delta = choice["delta"]
                if (
                    delta
                    and (len(delta) == 1 or _only_text(delta))
                    and not choice["index"]  # 0; others come from n > 1
                    and choice["finish_reason"] is None
                    and not choice.get("logprobs")
                    and "error" not in chunk
                    and ("usage" not in chunk or not chunk["usage"])
                    and "x_groq" not in chunk
                    and chunk["object"] != "chat.completion"
                ):
                    text = delta.get("content")
                    if text.__class__ is str:
                        if text and self._tries:
                            self._learn(data)
                        return text or None
            except ValueError:
                pass  # not one choice: the full path reads them
            except (KeyError, TypeError):
                # A provider leaving a key of the choice out: `.get` from now on. (A chunk
                # without choices is read by the full path; choices that are not objects
                # fail there, with its own message.)
                if chunk.__class__ is dict:
                    self._keyed = "choices" not in chunk
        elif not self._keyed and chunk.__class__ is dict:
            text = self._text_by_get(chunk)
            if text is not None:
                return text or None
        self._chunk(_object_of(chunk), emitter)
        return None

    def _learn(self, data: bytes) -> None:
        # A text chunk the template (if any) did not match: its own template, if provable.
        # (Imported here, at a stream's first text: not part of importing or building.)
        from llm_worker.providers._openai_chat_template import chat_text_template

        self._tries -= 1
        self._template = chat_text_template(data) or self._template

    def _named(self, event: str, data: bytes) -> None:
        # An event with an `event:` name, which Chat does not send but Groq's errors.
        if event == "error":  # Groq: `event: error` with an error object
            raise self._error(_loads_error(data))
        # Any other: not part of the Chat protocol.

    def _unparsed(self, data: bytes) -> Any:
        # Data orjson refused: `[DONE]` or a keep-alive (None), else `json_of`'s reading.
        if data == b"[DONE]":
            self._done = True
            return None
        if not data:
            return None  # an empty `data:` line: a keep-alive
        return json_of(data)

    def _text_by_get(self, chunk: Any) -> str | None:
        # The hot path's checks by `.get`, for a provider that leaves a key out: the text of
        # a choice whose delta is only text, nothing else to read; None for anything else.
        if not self._identified or "error" in chunk:
            return None
        choices = chunk.get("choices")
        if choices.__class__ is not list or len(choices) != 1:
            return None
        choice = choices[0]
        delta = choice.get("delta")
        if (
            delta.__class__ is dict  # another is the general path's (a number has no len())
            and len(delta) == 1
            and not choice.get("index")  # 0 or absent; others come from n > 1
            and choice.get("finish_reason") is None
            and not choice.get("logprobs")
            and self._tools.live is None
            and not chunk.get("usage")
            and "x_groq" not in chunk
            and chunk.get("object") != "chat.completion"
        ):
            text = delta.get("content")
            if text.__class__ is str:
                return text
        return None

    def _chunk(self, chunk: Any, emitter: BlockEmitter) -> None:
        if not self._identified:
            self._identify(chunk, emitter)
        error = chunk.get("error")
        if error:
            self._usage_of(chunk, emitter)  # OpenRouter sends usage with its error: keep it
            raise self._error(error)
        choices = chunk.get("choices")
        if choices:
            for choice in choices:
                index = choice.get("index")
                if not index:  # 0 or absent; other choices come from n > 1
                    self._choice(choice, emitter)
                elif index.__class__ is not int:  # ("0", 1.5, true): its text was dropped
                    raise wrong_type("a chunk's choice", "index", index, "an integer")
        if chunk.get("usage") or chunk.get("x_groq"):
            self._usage_of(chunk, emitter)
        if chunk.get("object") == "chat.completion":
            self._done = True  # a whole (non-streamed) answer
        self._plain = self._identified and self._keyed and self._tools.live is None

    def _identify(self, chunk: Any, emitter: BlockEmitter) -> None:
        # Every chunk repeats the id, model and tier: read until a chunk names the response
        # (Azure's first chunk, with the prompt filter results, has an empty id).
        emitter.response_info(
            response_id=as_str(chunk.get("id")),
            model=as_str(chunk.get("model")),
            service_tier=as_str(chunk.get("service_tier")),
            system_fingerprint=as_str(chunk.get("system_fingerprint")),
        )
        self._identified = emitter.info.response_id is not None

    def _choice(self, choice: Any, emitter: BlockEmitter) -> None:
        delta = choice.get("delta") or choice.get("message")
        if delta:
            self._delta(delta, choice, emitter)
        finish = choice.get("finish_reason")
        if finish:
            if type(finish) is not str:
                raise wrong_type("a chunk's choice", "finish_reason", finish)
            self._finish = finish
            # vLLM names the stop string that ended the answer in `stop_reason`.
            if type(choice.get("stop_reason")) is str:
                self._stop_string = True

    def _delta(self, delta: Any, choice: Any, emitter: BlockEmitter) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning:
            if type(reasoning) is not str:
                raise wrong_type("a chunk's delta", "reasoning_content", reasoning)
            self._thinking(reasoning, _REPLAYED, emitter)
        else:
            reasoning = delta.get("reasoning")  # OpenRouter, Groq: not accepted back
            if reasoning:
                if type(reasoning) is not str:
                    raise wrong_type("a chunk's delta", "reasoning", reasoning)
                self._thinking(reasoning, _SHOWN, emitter)
        content = delta.get("content")
        if content:
            if content.__class__ is not str:
                self._parts(content, emitter)
            else:
                logprobs = choice.get("logprobs")  # null unless the request asked for them
                self._text(content, emitter, _logprobs(logprobs, "content") if logprobs else None)
        refusal = delta.get("refusal")
        if refusal:
            if type(refusal) is not str:
                raise wrong_type("a chunk's delta", "refusal", refusal)
            self._refused = True
            self._text(refusal, emitter, _logprobs(choice.get("logprobs"), "refusal"))
        calls = delta.get("tool_calls")
        if calls:
            self._tools.feed(calls, emitter)
        if "annotations" in delta or "audio" in delta or "function_call" in delta:
            self._rare(delta, emitter)

    def _rare(self, delta: Any, emitter: BlockEmitter) -> None:
        audio = delta.get("audio")
        if audio:
            # Audio answers: the transcript is the answer's text (the audio bytes are not kept).
            transcript = as_str(as_dict(audio).get("transcript"))
            if transcript:
                self._text(transcript, emitter, None)
        call = delta.get("function_call")
        if call and not delta.get("tool_calls"):  # some servers fill both with one call
            # The legacy `functions` API: one call per answer, streamed like tool call 0.
            self._tools.feed([{"index": 0, "function": call}], emitter)
        annotations = delta.get("annotations")
        if annotations:
            for annotation in as_list(annotations):
                self._cite(as_dict(annotation), emitter)

    def _parts(self, content: object, emitter: BlockEmitter) -> None:
        # Content as a list of parts: `{"type": "text", "text": …}`, and Mistral's reasoning
        # (Magistral) as `{"type": "thinking", "thinking": [{"type": "text", "text": …}]}`.
        # A `refusal` part is `delta.refusal` spelled as a part: visible text and a refusal
        # stop (was passed over: the refusal lost). Parts without text (`image_url`,
        # Mistral's `reference`) have nothing to add to the answer's text.
        for part in _content_parts(content):
            kind = part.get("type")
            if kind == "thinking":
                text = _thinking_text(part.get("thinking"))
                if text:
                    self._thinking(text, _CHUNKED, emitter)
            elif kind == "refusal":
                refusal = part.get("refusal")
                if refusal is not None and refusal.__class__ is not str:
                    raise wrong_type("a content part", "refusal", refusal)
                if refusal:
                    self._refused = True
                    self._text(refusal, emitter, None)
            else:
                text = as_str(part.get("text"))
                if text:
                    self._text(text, emitter, None)

    def _thinking(self, text: str, meta: ThinkingMetadata, emitter: BlockEmitter) -> None:
        if self._tools.live is not None:
            self._tools.interrupt(emitter)
        if emitter.open_type is not BlockType.THINKING:
            emitter.start(BlockType.THINKING, meta)
        emitter.thinking(text)

    def _text(
        self, content: str, emitter: BlockEmitter, logprobs: list[TokenLogprob] | None
    ) -> None:
        if self._tools.live is not None:
            self._tools.interrupt(emitter)
        emitter.text(content, logprobs)

    def _cite(self, annotation: dict[str, Any], emitter: BlockEmitter) -> None:
        # `{"type": "url_citation", "url_citation": {url, title, start_index, end_index}}`
        # (OpenAI search models; OpenRouter adds the page's `content`).
        cited = as_dict(annotation.get(as_str(annotation.get("type")) or "url_citation"))
        if self._tools.live is not None:
            self._tools.interrupt(emitter)
        emitter.citation(
            Citation(
                annotation,
                url=as_str(cited.get("url")),
                title=as_str(cited.get("title")) or None,
                cited_text=as_str(cited.get("content")),
                start_index=as_int(cited.get("start_index")),
                end_index=as_int(cited.get("end_index")),
                origin=self._origin,
            )
        )

    def _usage_of(self, chunk: Any, emitter: BlockEmitter) -> None:
        usage = as_dict(chunk.get("usage")) or as_dict(as_dict(chunk.get("x_groq")).get("usage"))
        if usage:
            emitter.out.append(usage_event(usage))

    def _error(self, error: object) -> APIStatusError:
        body = as_dict(error)
        status = _first_int(body, "status_code", "code", "status")
        kind = as_str(body.get("type")) or as_str(body.get("code")) or as_str(body.get("status"))
        message = as_str(body.get("message")) or as_str(error) or "no error message"
        return error_class(status, kind)(
            self._scrub(message),
            provider=_PROVIDER,
            status_code=status,
            error_type=kind,
            streamed=True,
        )

    def on_end(self, emitter: BlockEmitter) -> None:
        """The answer is complete: emit the buffered tool calls, then the stop reason."""
        self._tools.finish(emitter)
        emitter.finish(self._stop_reason(), self._finish)

    def _stop_reason(self) -> StopReason | None:
        if self._refused:
            return StopReason.REFUSAL
        if self._finish is None:
            return None  # [DONE] without a finish_reason (Snowflake Cortex): unknown
        if self._stop_string and self._finish == "stop":
            return StopReason.STOP_SEQUENCE
        return _STOP_REASONS.get(self._finish, StopReason.OTHER)


def _content_parts(content: object, field: str = "content") -> list[dict[str, Any]]:
    """Content given as a list of parts, each a JSON object whose `text`, if any, is text."""
    if content.__class__ is not list:
        raise wrong_type("a chunk's delta", field, content, "text or a list of parts")
    parts = as_list(content)
    for part in parts:
        if part.__class__ is not dict:
            raise wrong_type("a content part", "part", part, "an object")
        text = part.get("text")
        if text is not None and text.__class__ is not str:
            raise wrong_type("a content part", "text", text)
    return parts


def _thinking_text(thinking: object) -> str:
    """The text of a Mistral thinking part: its `text` chunks (`reference` chunks have none)."""
    if type(thinking) is str:
        return thinking  # lenient: a server that flattened the chunks
    texts = [as_str(part.get("text")) for part in _content_parts(thinking, "thinking")]
    return "".join(t for t in texts if t)


# The keys a text delta may carry beside its content that the general path (`_delta`) reads
# as absent when falsy (DeepSeek's `reasoning_content: null` in every chunk) or never reads
# (`role`, which OpenRouter repeats in every chunk).
_ANY: Final = frozenset({"content", "role"})
_QUIET: Final = frozenset({"reasoning_content", "reasoning", "refusal", "tool_calls"})


def _only_text(delta: Any) -> bool:
    """Whether a delta of several keys holds nothing but its content for the general path."""
    if delta.__class__ is not dict:
        return False  # a list or string: the general path's error (`.get`), not `.items`'s
    return all(key in _ANY or (key in _QUIET and not value) for key, value in delta.items())


def _object_of(chunk: Any) -> dict[str, Any]:
    """The parsed chunk, which must be a JSON object."""
    if chunk.__class__ is not dict:
        # Its type, not its bytes: a chunk may hold the answer's words (content stays out of
        # errors unless captured).
        raise MalformedStreamError(
            f"a stream chunk is {json_type(chunk)}, not a JSON object", provider=_PROVIDER
        )
    return chunk


def _loads_error(data: bytes) -> object:
    try:
        return json_of(data).get("error") or text_of(data)
    except (orjson.JSONDecodeError, AttributeError):
        return text_of(data)  # a plain-text error message


def _first_int(body: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = as_int(body.get(key))
        if value is not None:
            return value
    return None


def _logprobs(logprobs: Any, kind: str) -> list[TokenLogprob] | None:
    """The `choice.logprobs.<kind>` tokens (`content` or `refusal`), if the request asked."""
    tokens = as_list(as_dict(logprobs).get(kind))
    return token_logprobs(tokens) or None


@lru_cache(maxsize=64)
def _is_openai(base_url: str) -> bool:
    """Whether `base_url` is OpenAI's own host (asked at every request: parsed once)."""
    return urlsplit(base_url).hostname == _OPENAI_HOST
