"""The Google Gemini client: `models/{model}:streamGenerateContent?alt=sse`.

Request building lives in `_gemini_request.py` (and the schema conversion in
`_gemini_schema.py`); this module maps the stream. Each SSE event is one
`GenerateContentResponse` chunk: `candidates[0].content.parts`, maybe a `finishReason`, and
`usageMetadata` (repeated in every chunk).

- Text parts and `thought: true` parts become text and thinking blocks; consecutive parts of
  one kind continue one block across chunks. Empty text parts without a signature (Gemini
  closes tool-call answers with one) carry nothing and are passed over.
- `thoughtSignature` becomes a `SignatureDelta` on the block of the part that carried it; a
  signature on an empty text part (Gemini 3 puts one on the last chunk) is kept on the open
  block of that kind, or on a new one. A block carries at most one signature: a second one
  starts a new block, so each goes back on its own part.
- `functionCall` parts arrive whole and without ids: each becomes a tool-use block with one
  input delta. Its id is `gemini_call_<n>`, `n` being the call's position among all tool
  calls of the conversation (those in the request's history first), skipping ids the history
  already uses: unique in the conversation, and the same when the same history is sent
  again. The id is this library's only (Gemini matches results by name and order); an id
  the provider does send is used as it is, and kept as the call's `item_id` so that the
  `functionResponse` echoes it.
- A call whose arguments stream in pieces (`partialArgs` / `willContinue`, sent when a
  request opts in with `streamFunctionCallArguments` through `Request.options`) is rebuilt
  by `_gemini_partial` into the same block: its one input delta, the whole arguments
  object, comes when the call's last piece arrives.
- Parts of kinds the event model has no block for (`executableCode`, `codeExecutionResult`,
  `inlineData`, …) are kept whole, `thoughtSignature` included, each as one
  `BlockType.PROVIDER` block (`ProviderMetadata`) in its place: the Worker keeps it as a
  `ProviderPart` and `_gemini_request` sends it back verbatim to the same model (a Gemini 3
  model checks the signature on a replayed `executableCode`). A part holding nothing but
  `thought` / `thoughtSignature` keys carries no content and is passed over.
- Citation sources, grounding and URL-context metadata (candidate fields, not parts) become
  citations on the last text block and one `ProviderPart` after the content; a chunk's
  `logprobsResult` rides on its text (`_gemini_metadata`).
- `finishReason`: `STOP` is END_TURN, or TOOL_USE when the answer called a function;
  `MAX_TOKENS`; `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, the image
  filters, `MODEL_ARMOR` and `ESCALATION` are CONTENT_FILTER; `MALFORMED_FUNCTION_CALL`,
  `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS` are MALFORMED_TOOL_CALL; anything else OTHER;
  the raw value is kept, and `finishMessage` is the stop message. The answer is complete once
  a finish reason was seen. `responseId` and `modelVersion` go on the closing status.
- `CONTINUATION` (the answer reached the per-request token limit but is not done) with a
  `continuationToken` is no finish: the client sends the request again with the token and
  the next response continues the same answer (`_gemini_continuation`); usage is summed.
  Without a usable token the answer ends as MAX_TOKENS.
- `modelStatus` (the model's stage: `LEGACY`, `DEPRECATED`, `RETIRED`, a `retirementTime`)
  is logged as a warning on the `llm_worker` logger, once per model and stage in a process;
  a `STABLE` model's, or a preview's without a retirement date, at debug level.
- A part's `partMetadata` (the API's field for a client's own bookkeeping) stays on the
  parts kept whole (`ProviderPart`s) and is dropped from text, thought and `functionCall`
  parts, which the neutral parts hold no field for (docs/guarantees.md).
- `usageMetadata` becomes a `UsageEvent` when it changed, at most one per network read
  (Gemini repeats its growing counts in every chunk; of chunks that arrive together only the
  latest counts are news): input = `promptTokenCount` (cached tokens included) +
  `toolUsePromptTokenCount` (tool results read, e.g. search), so that input + output is
  `totalTokenCount`; output = `candidatesTokenCount` + `thoughtsTokenCount`;
  `cachedContentTokenCount` is the cache read; thoughts are the reasoning tokens.
- A prompt blocked (`promptFeedback.blockReason`), or a filter finish before any content,
  gives a `ContentFilterError` (after the abort, error event and FAILED status); an `error`
  object in the stream gives the typed error of its code and status.
- Only the first candidate is read (`candidateCount` > 1 is not supported by the event model).

The JSON-array stream format (`streamGenerateContent` without `alt=sse`, one JSON array
written incrementally) is not what this client asks for, but a proxy that drops the query
string answers with it; it is recognized by its first byte and read the same way, as is a
single `GenerateContentResponse` object (a non-streaming answer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import quote

import orjson

from llm_worker._json import as_dict, as_str
from llm_worker.errors import MalformedStreamError
from llm_worker.events import (
    BlockType,
    Event,
    StopReason,
    TextMetadata,
    ThinkingMetadata,
    TokenLogprob,
    UsageEvent,
)
from llm_worker.messages import Origin, Request
from llm_worker.providers._base import HttpClient
from llm_worker.providers._blocks import BlockEmitter, StreamMapper, drive, wrong_type
from llm_worker.providers._body import encoded_request
from llm_worker.providers._gemini_continuation import CONTINUATION, MAX_HOPS, Hops
from llm_worker.providers._gemini_errors import check_prompt, filtered, stream_error
from llm_worker.providers._gemini_ids import CallIds
from llm_worker.providers._gemini_metadata import (
    CandidateMetadata,
    log_model_status,
    token_logprobs,
)
from llm_worker.providers._gemini_partial import PartialCall, starts_partial_call
from llm_worker.providers._gemini_request import build_body
from llm_worker.providers._gemini_usage import Counts, counts_of, snapshot
from llm_worker.providers._sse import json_of

if TYPE_CHECKING:
    from llm_worker.providers._template import ByteTemplate

__all__ = ("GeminiClient",)

_PROVIDER: Final = "gemini"
_TEXT_META: Final = TextMetadata()
_PART: Final = "a candidate's content part"
_ABSENT: Final = object()  # a field the chunk does not have
# Keys of a part that say something about its content but are not content themselves.
_NO_CONTENT: Final = frozenset({"thought", "thoughtSignature"})
_FILTERED: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
        "ESCALATION",
    }
)
# The model's tool call could not be taken: not an answer (the Worker tells the model).
_MALFORMED_CALL: Final = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}
)


class GeminiClient(HttpClient):
    """Streams Google Gemini answers (`streamGenerateContent` with `alt=sse`).

    The API key comes from `api_key`, else `GEMINI_API_KEY`, else `GOOGLE_API_KEY`, and is
    sent in the `x-goog-api-key` header. `base_url` defaults to the Gemini API's `v1beta`
    root; a Vertex AI publisher root works too, with its bearer token in `headers`.

    Example:
        ```python
        client = GeminiClient(model="gemini-2.5-flash")
        async for event in client.stream(Request([Message.user("Hi")])):
            ...
        ```
    """

    provider = _PROVIDER
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com/v1beta"
    api_key_env: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The `x-goog-api-key` header."""
        return {"x-goog-api-key": api_key} if api_key else {}

    def build_body(self, request: Request) -> dict[str, Any]:
        """The Gemini JSON body for a neutral request (see `_gemini_request`)."""
        return build_body(request, self.model)

    def path(self, request: Request) -> str:
        """`/models/{model}:streamGenerateContent` (a `tunedModels/…` name is kept)."""
        name = self.model if "/" in self.model else f"models/{self.model}"
        return f"/{quote(name, safe='/-._~')}:streamGenerateContent"

    def params(self, request: Request) -> dict[str, str] | None:
        """`alt=sse`: Server-Sent Events instead of one incrementally written JSON array."""
        return {"alt": "sse"}

    def mapper(self, request: Request) -> StreamMapper:
        """A fresh chunk mapper; its call ids continue those of the request's history."""
        return self._mapper(request)

    def _mapper(self, request: Request) -> _GeminiMapper:
        return _GeminiMapper(CallIds(request.messages), Origin(_PROVIDER, self.model))

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Send the request and yield the answer's normalized events as they arrive.

        Raises:
            ProviderError: A typed subclass for every failure, after the abort, error and
                FAILED status events.
        """
        path, params = self.path(request), self.params(request)

        def send(body: Mapping[str, Any] | bytes) -> AsyncIterator[bytes]:
            return self.transport.stream(path, body, params=params)

        mapper = self._mapper(request)
        limit = self.transport.max_event_bytes
        return drive(
            Hops(encoded_request(self.build_body, request), send, mapper, limit),
            mapper,
            provider=self.provider,
            scrub=self.transport.scrub,
            max_event_bytes=limit,
            max_answer_chars=self.max_answer_chars,
        )


class _GeminiMapper:
    """Maps Gemini `GenerateContentResponse` chunks to emitter calls (see the module doc)."""

    __slots__ = (
        "_calls",
        "_carried",
        "_counts",
        "_emitted",
        "_finish",
        "_finish_message",
        "_identified",
        "_ids",
        "_logprobs",
        "_metadata",
        "_model",
        "_partial",
        "_resume",
        "_seen",
        "_signed",
        "_template",
        "_texts",
        "_tokens",
        "_tries",
        "_usage",
    )

    def __init__(self, ids: CallIds, origin: Origin) -> None:
        self._ids = ids
        self._partial: PartialCall | None = None  # a call whose arguments stream in pieces
        self._finish: str | None = None
        self._finish_message: str | None = None
        self._identified = False  # the response id and model version were read
        self._metadata = CandidateMetadata(origin)
        # The answer's text pieces (for the spans of citations), `None` where a text block
        # ended: the hot path appends without asking which block it is in.
        self._texts: list[str | None] = []
        # The log probabilities of the chunk being read, for its answer text.
        self._logprobs: list[TokenLogprob] | None = None
        self._calls = 0
        self._signed = -1  # index of the last block that got a signature
        self._usage: Any = None  # the latest usageMetadata
        self._seen: Any = None  # the usageMetadata last read by `end_of_read`
        self._counts: Counts | None = None  # its counts, those of the last snapshot
        self._emitted: UsageEvent | None = None
        self._model = origin.model
        self._resume: str | None = None  # the continuation token of a CONTINUATION finish
        self._tokens: set[str] = set()  # those already taken: each may be used once
        self._carried: UsageEvent | None = None  # the usage of the earlier requests, summed
        # The stream's text chunk as bytes but for its text and usage (`_gemini_template`):
        # learnt from a chunk the hot path read, at most `_tries` times a stream.
        self._template: ByteTemplate | None = None
        self._tries = 4

    @property
    def complete(self) -> bool:
        """A finish reason was seen."""
        return self._finish is not None

    def on_event(self, event: str, data: bytes, emitter: BlockEmitter) -> str | None:
        """Map one chunk; a chunk of one piece of answer text returns it (see `StreamMapper`)."""
        template = self._template
        if template is not None:
            found = template.text_and_value(data)  # the hot path's chunk but for its values
            if found is not None and found[0]:
                text, usage = found
                self._texts.append(text)
                if usage is not None:
                    self._usage = usage
                return text
        return self._parsed(data, emitter)

    def _parsed(self, data: bytes, emitter: BlockEmitter) -> str | None:
        # A chunk the template (if any) did not match, parsed whole. The hot path reads the
        # parsed JSON (Any) directly: a chunk of another shape raises AttributeError /
        # KeyError / TypeError here, which drive() reports as malformed.
        try:
            chunk: Any = orjson.loads(data)
        except orjson.JSONDecodeError:
            # The rare paths: an empty event or `[DONE]` (nothing), bytes that are not UTF-8
            # or a lone surrogate (`json_of` reads them).
            if not data or data == b"[DONE]":
                return None
            chunk = json_of(data)
        if not self._identified or "modelStatus" in chunk:
            self._response_fields(chunk, emitter)
        candidates = chunk.get("candidates")
        if not candidates:
            self._no_candidate(chunk, emitter)
            return None
        candidate = candidates[0]
        # `index` read once: absent is the first candidate, as 0 is.
        index = candidate.get("index", _ABSENT)
        if index is not _ABSENT and index != 0:
            candidate = _first(candidates)
            index = candidate.get("index", _ABSENT)
        content = candidate.get("content")
        if content:
            parts = content.get("parts") or ()
            if len(parts) == 1 and len(candidate) == 1 + (index is not _ABSENT):
                # The hot path: one part and a candidate of only `content` (and `index`): no
                # finish reason nor metadata to emit after it, so a piece of answer text is
                # handed to `drive`, which makes its event (no append to `out` per chunk).
                part = parts[0]
                text = part.get("text")
                if text and text.__class__ is str and len(part) == 1:
                    self._texts.append(text)
                    self._took(data, chunk)
                    return text
            self._parts(parts, candidate, emitter)
        # More than `content` and `index` (either may be absent: a last chunk of only a
        # finish reason, as after thinking spent every token): a finish reason, metadata, …
        # (`content is not None` for `"content" in candidate`: a null one only costs a look.)
        if len(candidate) > (content is not None) + (index is not _ABSENT):
            self._candidate_fields(candidate, emitter)
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._usage = usage
        return None

    def _took(self, data: bytes, chunk: Any) -> None:
        # A text chunk the hot path read (the template, if any, did not match): its usage,
        # and its own template if provable — once the response is identified, and not of a
        # chunk that `_response_fields` reads (`modelStatus`: a matched chunk skips it).
        # (Imported here, at a stream's first text: not part of importing or building.)
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._usage = usage
        if not self._tries or not self._identified or "modelStatus" in chunk:
            return
        from llm_worker.providers._gemini_template import gemini_text_template

        self._tries -= 1
        self._template = gemini_text_template(data) or self._template

    def _parts(self, parts: Any, candidate: Any, emitter: BlockEmitter) -> None:
        # A candidate's parts, but for one piece of text `on_event` hands on itself.
        if "logprobsResult" in candidate:
            self._scored(parts, candidate["logprobsResult"], emitter)
            return
        for part in parts:
            text = part.get("text")
            if text and text.__class__ is str and len(part) == 1:
                # The common case, inline: a piece of answer text. (An empty one, nothing
                # to say, is passed over by `_part`.)
                emitter.text(text)
                self._texts.append(text)
            else:
                self._part(as_dict(part), emitter)

    def _no_candidate(self, chunk: Any, emitter: BlockEmitter) -> None:
        if "error" in chunk:
            self.end_of_read(emitter)
            raise stream_error(as_dict(chunk["error"]))
        if "promptFeedback" in chunk:
            self._usage = chunk.get("usageMetadata", self._usage)
            self.end_of_read(emitter)
            check_prompt(as_dict(chunk["promptFeedback"]))
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._usage = usage

    def _candidate_fields(self, candidate: Any, emitter: BlockEmitter) -> None:
        if (
            "groundingMetadata" in candidate
            or "citationMetadata" in candidate
            or "urlContextMetadata" in candidate
        ):
            self._metadata.read(candidate, emitter)
        if candidate.get("finishReason") is not None:
            self._finished(candidate, emitter)

    def end_of_read(self, emitter: BlockEmitter) -> None:
        """After the events of one network read: one usage snapshot, if the counts changed.

        Gemini repeats its running counts in every chunk; when several chunks arrive in one
        read, only the latest counts are news. Paced, every read is one chunk whose counts
        changed: this runs per event, so it compares and converts the six counts it reads
        (raw fields this library does not read may differ) and nothing else.
        """
        usage = self._usage
        if usage is self._seen:
            return
        self._seen = usage
        counts = counts_of(usage)
        if counts == self._counts:
            return
        self._counts = counts
        event = snapshot(counts)
        if self._carried is not None:
            event = self._carried + event
            if event == self._emitted:
                return
        self._emitted = event
        emitter.out.append(event)

    def on_end(self, emitter: BlockEmitter) -> None:
        """Emit the last usage, the citations and the kept metadata, then finish.

        The last block is closed with the mapped finish reason and Gemini's `finishMessage`.
        """
        self.end_of_read(emitter)
        if self._partial is not None:
            self._end_call(emitter)  # its last piece came with the finish: keep what arrived
        self._metadata.finish(self._texts, emitter)
        raw = self._finish
        if raw == "STOP":
            reason = StopReason.TOOL_USE if self._calls else StopReason.END_TURN
        elif raw in ("MAX_TOKENS", CONTINUATION):  # CONTINUATION here: it could not go on
            reason = StopReason.MAX_TOKENS
        elif raw in _FILTERED:
            reason = StopReason.CONTENT_FILTER
        elif raw in _MALFORMED_CALL:
            reason = StopReason.MALFORMED_TOOL_CALL
        else:
            reason = StopReason.OTHER
        emitter.finish(reason, raw, stop_message=self._finish_message)

    def _response_fields(self, chunk: Any, emitter: BlockEmitter) -> None:
        if not self._identified:
            # Gemini repeats the id and version in every chunk: the first says them (a
            # follow-up request of a CONTINUATION keeps the first response's).
            self._identified = True
            emitter.response_info(
                response_id=as_str(chunk.get("responseId")),
                model=as_str(chunk.get("modelVersion")),
            )
        if "modelStatus" in chunk:
            log_model_status(self._model, chunk["modelStatus"])

    def _scored(self, parts: Any, result: Any, emitter: BlockEmitter) -> None:
        # The chunk's token log probabilities go with its (first) answer text.
        self._logprobs = token_logprobs(as_dict(result))
        for part in parts:
            self._part(as_dict(part), emitter)
        self._logprobs = None

    def _say(self, text: str, emitter: BlockEmitter) -> None:
        emitter.text(text, self._logprobs)
        self._logprobs = None
        self._texts.append(text)

    def resume_token(self) -> str | None:
        """The token to continue the answer with, taken; the usage so far is carried over.

        Called by `Hops` once a response was read whole (see `_gemini_continuation`).
        """
        token, self._resume = self._resume, None
        if token is not None and self._usage is not None:
            hop = snapshot(counts_of(self._usage))
            self._carried = hop if self._carried is None else self._carried + hop
            self._usage = self._seen = self._counts = None
        return token

    def _continues(self, candidate: Any) -> bool:
        # A CONTINUATION finish goes on with a token not used before, within MAX_HOPS.
        token = candidate.get("continuationToken")
        if type(token) is not str or not token or token in self._tokens:
            return False
        if len(self._tokens) + 1 >= MAX_HOPS:
            return False
        self._tokens.add(token)
        self._resume = token
        return True

    def _finished(self, candidate: Any, emitter: BlockEmitter) -> None:
        finish = candidate["finishReason"]
        if finish.__class__ is not str:
            raise wrong_type("a candidate", "finishReason", finish)
        if finish == CONTINUATION and self._continues(candidate):
            return  # not the end: the next request continues this answer
        self._finish = finish
        self._finish_message = as_str(candidate.get("finishMessage")) or self._finish_message
        if self._finish in _FILTERED and emitter.index < 0:
            self.end_of_read(emitter)
            raise filtered(self._finish, as_dict(candidate))

    def _part(self, part: dict[str, Any], emitter: BlockEmitter) -> None:
        # Every block other than text appends `None` to `_texts`: the next text starts a
        # text block of its own.
        text = part.get("text")
        signature = part.get("thoughtSignature")
        if signature is not None and signature.__class__ is not str:
            raise wrong_type(_PART, "thoughtSignature", signature)
        if text is not None:
            if text.__class__ is not str:
                raise wrong_type(_PART, "text", text)
            if part.get("thought"):
                self._texts.append(None)
                self._content(BlockType.THINKING, text, signature, emitter)
            else:
                self._content(BlockType.TEXT, text, signature, emitter)
            return
        call = part.get("functionCall")
        if call is not None:
            if call.__class__ is not dict:
                raise wrong_type(_PART, "functionCall", call, "an object")
            self._texts.append(None)
            self._call(call, signature, emitter)
        elif not part.keys() <= _NO_CONTENT:
            # executableCode, codeExecutionResult, inlineData, …: kept whole for the history.
            self._texts.append(None)
            emitter.provider_block(part)

    def _content(
        self, kind: BlockType, text: str, signature: str | None, emitter: BlockEmitter
    ) -> None:
        if signature is None:
            if text:
                if kind is BlockType.TEXT:
                    self._say(text, emitter)
                else:
                    emitter.thinking(text)
            return
        if emitter.open_type is not kind or emitter.index == self._signed:
            self._texts.append(None)
            emitter.start(kind, _TEXT_META if kind is BlockType.TEXT else ThinkingMetadata())
        if text:
            if kind is BlockType.TEXT:
                self._say(text, emitter)
            else:
                emitter.thinking(text)
        emitter.signature(signature)
        self._signed = emitter.index

    def _call(self, call: dict[str, Any], signature: str | None, emitter: BlockEmitter) -> None:
        if self._partial is not None:
            self._more_of_call(call, signature, emitter)
            return
        name = as_str(call.get("name"))
        if not name:
            raise MalformedStreamError(
                "a functionCall part without a name", provider=_PROVIDER, streamed=True
            )
        args = call.get("args")
        if args is not None and args.__class__ is not dict:
            raise wrong_type(_PART, "functionCall.args", args, "an object")
        # An id Gemini gave is echoed in the functionResponse (`item_id`, see _gemini_request).
        given = self._ids.given(call.get("id"))
        emitter.tool_use(self._ids.neutral(given), name, item_id=given)
        if signature is not None:
            emitter.signature(signature)
            self._signed = emitter.index
        if starts_partial_call(call):
            self._partial = PartialCall(call)
            self._more_of_call(call, None, emitter)
            return
        emitter.input_json(orjson.dumps({} if args is None else args).decode())
        emitter.stop()
        self._calls += 1

    def _more_of_call(
        self, call: dict[str, Any], signature: str | None, emitter: BlockEmitter
    ) -> None:
        # The next piece of a call whose arguments stream (see `_gemini_partial`).
        partial = self._partial
        if partial is None or emitter.open_type is not BlockType.TOOL_USE:
            raise MalformedStreamError(
                "another part arrived inside a functionCall whose arguments were streaming",
                provider=_PROVIDER,
                streamed=True,
            )
        if signature is not None and self._signed != emitter.index:
            emitter.signature(signature)
            self._signed = emitter.index
        held = partial.size
        done = partial.feed(call)
        emitter.charge(partial.size - held)  # what the call holds stays within the bound
        if done:
            self._end_call(emitter)

    def _end_call(self, emitter: BlockEmitter) -> None:
        partial = self._partial
        self._partial = None
        if partial is None or emitter.open_type is not BlockType.TOOL_USE:
            raise MalformedStreamError(
                "a functionCall whose arguments were streaming was cut by another part",
                provider=_PROVIDER,
                streamed=True,
            )
        emitter.input_json(partial.arguments(), charged=partial.size)
        emitter.stop()
        self._calls += 1


def _first(candidates: Any) -> Any:
    # The event model has one answer: the candidate of index 0 (the only one by default).
    # A chunk with no such candidate (another one's, when several were asked for) is passed
    # over, so an index of the wrong type must not be: its text would be dropped unsaid.
    for candidate in candidates:
        index = candidate.get("index")
        if index is not None and index.__class__ is not int:
            raise wrong_type("a candidate", "index", index, "an integer")
        if not index:
            return candidate
    return {}
