"""What a Gemini candidate says about its answer besides the parts: sources and probabilities.

- `citationMetadata.citationSources` (`citations` on Vertex AI): each source becomes a
  `Citation` (its `uri`, `title`, and the span of the answer it covers).
- `groundingMetadata` (Google Search, URL context, file search, Maps grounding): each
  `groundingSupports[]` entry becomes one `Citation` per grounding chunk it names
  (`data = {"groundingSupport": …, "groundingChunk": …}`; the chunk's `uri` and `title`, and
  its `text` as the cited passage when the chunk quotes one, as file search does).
- The whole `groundingMetadata` (the search entry point's `renderedContent`, which Google
  requires to be shown with a grounded answer, the chunks, supports and search queries) and
  `urlContextMetadata` are kept as one `ProviderPart`
  (`{"groundingMetadata": …, "urlContextMetadata": …}`) after the answer's content. It is
  candidate metadata, not content: no request sends it back (`_gemini_request`).

Gemini repeats the grounding in later chunks (an empty object while searching, the whole of
it with the last chunk): the newest non-empty value of each of its keys wins. Citation sources
of every chunk are kept, each once.

Gemini gives spans in UTF-8 bytes of the answer's text (all text parts, across chunks); they
become character offsets in the text part the citations are attached to, checked against the
segment's own text when Gemini quotes it (a span that does not match is looked up by that
text, else left unset).

`logprobsResult` (asked for with `generationConfig.responseLogprobs` / `logprobs`) becomes
`TokenLogprob`s on the chunk's text: `chosenCandidates[i]` with `topCandidates[i]` as the
alternatives. `avgLogprobs` is not kept (the mean of the tokens' values).

A response's `modelStatus` (the model's stage and retirement time) is logged once per model,
stage and retirement time in a process (`log_model_status`).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker._log import DEBUG, WARNING, logger
from llm_worker.events import BlockType, TokenLogprob
from llm_worker.messages import Citation, Origin
from llm_worker.providers._blocks import BlockEmitter

__all__ = ("METADATA_KEYS", "CandidateMetadata", "log_model_status", "token_logprobs")

_log = logger("llm_worker")

METADATA_KEYS: Final = frozenset({"groundingMetadata", "urlContextMetadata"})
"""The keys of the `ProviderPart` that keeps a candidate's grounding and URL context."""

_SOURCE_KEYS: Final = ("citationSources", "citations")


class CandidateMetadata:
    """Collects one answer's citation, grounding and URL-context metadata."""

    __slots__ = ("_grounding", "_origin", "_seen", "_sources", "_url_context")

    def __init__(self, origin: Origin) -> None:
        self._origin = origin
        self._grounding: dict[str, Any] = {}
        self._url_context: dict[str, Any] = {}
        self._sources: list[dict[str, Any]] = []
        self._seen: set[bytes] = set()  # the sources' JSON: a repeat is found in O(1)

    def read(self, candidate: dict[str, Any], emitter: BlockEmitter) -> None:
        """Take the metadata of one chunk's candidate.

        Each new citation source is counted against the answer's bound as it is kept (it
        becomes a citation only at the end), so a stream of distinct sources stays bounded.
        """
        grounding = as_dict(candidate.get("groundingMetadata"))
        self._grounding.update((k, v) for k, v in grounding.items() if v)
        self._url_context.update(as_dict(candidate.get("urlContextMetadata")))
        cited = as_dict(candidate.get("citationMetadata"))
        for key in _SOURCE_KEYS:
            for source in as_list(cited.get(key)):
                data = as_dict(source)
                text = orjson.dumps(data, option=orjson.OPT_SORT_KEYS) if data else b""
                if data and text not in self._seen:
                    emitter.charge(len(text))
                    self._seen.add(text)
                    self._sources.append(data)

    def finish(self, texts: list[str | None], emitter: BlockEmitter) -> None:
        """Emit the citations (on the open text block), then the kept metadata block.

        Args:
            texts: The answer's text pieces in order, `None` where a text block ended.
            emitter: The answer's emitter, before its `finish`.
        """
        if self._sources or "groundingSupports" in self._grounding:
            # The spans join the whole answer's text: only for citations to place (a plain
            # answer would pay a pass over every piece of it).
            spans = _Spans(texts, emitter)
            counted = {id(source) for source in self._sources}
            for citation in self._citations(spans):
                # A source's were counted as it came; a grounding support's are counted here.
                emitter.citation(citation, charged=id(citation.data) in counted)
        kept: dict[str, Any] = {}
        if self._grounding:
            kept["groundingMetadata"] = self._grounding
        if self._url_context:
            kept["urlContextMetadata"] = self._url_context
        if kept:
            emitter.provider_block(kept)

    def _citations(self, spans: _Spans) -> list[Citation]:
        out: list[Citation] = []
        for source in self._sources:
            start, end = spans.span(source, None)
            out.append(
                Citation(
                    source,
                    url=as_str(source.get("uri")),
                    title=as_str(source.get("title")),
                    start_index=start,
                    end_index=end,
                    origin=self._origin,
                )
            )
        chunks = as_list(self._grounding.get("groundingChunks"))
        for entry in as_list(self._grounding.get("groundingSupports")):
            support = as_dict(entry)
            segment = as_dict(support.get("segment"))
            start, end = spans.span(segment, as_str(segment.get("text")))
            for n in as_list(support.get("groundingChunkIndices")):
                index = as_int(n)
                if index is None or not 0 <= index < len(chunks):
                    index = None  # names no chunk (a negative one would count from the end)
                chunk = as_dict(chunks[index]) if index is not None else {}
                out.append(self._grounded(support, chunk, start, end))
        return out

    def _grounded(
        self, support: dict[str, Any], chunk: dict[str, Any], start: int | None, end: int | None
    ) -> Citation:
        # A chunk holds one source under its kind: `web`, `retrievedContext`, `maps`, …
        sources = [as_dict(v) for v in chunk.values() if as_dict(v)]
        source = sources[0] if sources else {}
        return Citation(
            {"groundingSupport": support, "groundingChunk": chunk},
            url=as_str(source.get("uri")),
            title=as_str(source.get("title")),
            cited_text=as_str(source.get("text")),
            start_index=start,
            end_index=end,
            origin=self._origin,
        )


class _Spans:
    """Byte spans of the answer's text as character spans of the open text block."""

    __slots__ = ("_base", "_encoded", "_open", "_text")

    def __init__(self, texts: list[str | None], emitter: BlockEmitter) -> None:
        self._open = emitter.open_type is BlockType.TEXT
        ended = max((n for n, text in enumerate(texts) if text is None), default=-1)
        own = "".join(t for t in texts[ended + 1 :] if t is not None) if self._open else ""
        whole = "".join(t for t in texts if t is not None)
        self._text = own
        self._base = len(whole) - len(own)  # the open block is the answer's last
        self._encoded = whole.encode()

    def span(self, holder: dict[str, Any], quoted: str | None) -> tuple[int | None, int | None]:
        """The character span in the open text block of `holder`'s byte span, if it is there."""
        end_byte = as_int(holder.get("endIndex"))
        start_byte = as_int(holder.get("startIndex")) or 0
        if not self._open or end_byte is None:
            return None, None
        if not 0 <= start_byte <= end_byte <= len(self._encoded):
            # Not a span of this answer (a negative index would count from its end).
            return self._found(quoted)
        start = self._chars(start_byte) - self._base
        end = self._chars(end_byte) - self._base
        if quoted and (start < 0 or self._text[start:end] != quoted):
            return self._found(quoted)
        return (start, end) if 0 <= start <= end else (None, None)

    def _found(self, quoted: str | None) -> tuple[int | None, int | None]:
        found = self._text.find(quoted) if quoted else -1
        return (found, found + len(quoted)) if quoted and found >= 0 else (None, None)

    def _chars(self, byte: int) -> int:
        return len(self._encoded[:byte].decode("utf-8", "ignore"))


def token_logprobs(result: dict[str, Any]) -> list[TokenLogprob]:
    """The tokens of a `logprobsResult`, each with its top alternatives."""
    tops = as_list(result.get("topCandidates"))
    out: list[TokenLogprob] = []
    for n, entry in enumerate(as_list(result.get("chosenCandidates"))):
        alternatives = as_list(as_dict(tops[n]).get("candidates")) if n < len(tops) else []
        token, logprob = _scored(entry)
        out.append(TokenLogprob(token, logprob, [_scored(a) for a in alternatives]))
    return out


def _scored(entry: Any) -> tuple[str, float]:
    data = as_dict(entry)
    value = data.get("logProbability", 0.0)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"a log probability must be a number, got {type(value).__name__}")
    return as_str(data.get("token")) or "", float(value)


# Stages that say a model is going away: worth a warning. Others are logged at debug level.
_LEAVING: Final = frozenset({"LEGACY", "DEPRECATED", "RETIRED"})
_warned: set[tuple[str, str, str]] = set()  # (model, stage, retirement) already logged


def log_model_status(model: str, status: object) -> None:
    """Log a `modelStatus` once per model, stage and retirement time in this process."""
    fields = as_dict(status)
    stage = _field(fields, "modelStage", 64) or "MODEL_STAGE_UNSPECIFIED"
    retirement = _field(fields, "retirementTime", 64)
    key = (model, stage, retirement)
    if key in _warned or len(_warned) >= 1024:  # bounded: a few models per process
        return
    _warned.add(key)
    message = _field(fields, "message", 500)
    level = WARNING if stage in _LEAVING or retirement else DEBUG
    _log.log(
        level,
        "Gemini model %s is %s%s%s",
        model,
        stage,
        f", to be retired at {retirement}" if retirement else "",
        f": {message}" if message else "",
    )


def _field(fields: dict[str, Any], name: str, limit: int) -> str:
    """A server's string for a log line: one line, bounded (no forged lines, no megabytes)."""
    text = as_str(fields.get(name)) or ""
    if len(text) > limit:
        text = text[:limit] + "…"
    return "".join(c if c.isprintable() else " " for c in text)
