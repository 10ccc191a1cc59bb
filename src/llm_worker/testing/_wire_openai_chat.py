"""`encode(ScriptedResponse)` → the SSE bytes OpenAI Chat Completions would stream for it.

The shape follows the recorded streams in `fixtures/recorded/openai_chat/`: `data:` lines of
`chat.completion.chunk` objects, a first chunk with `role: "assistant"`, content deltas, tool
calls by `index` (id, type and name in the first fragment, the arguments after it), a chunk
with the `finish_reason`, a usage chunk with `choices: []`, and `data: [DONE]`.

Mapping of a `ScriptedResponse`:

- `TextPart` → `content` deltas of `chunk_size` characters; with `stop_reason=REFUSAL` they are
  `refusal` deltas instead;
- `ThinkingPart` → `reasoning_content` deltas (the DeepSeek field); a redacted part and any
  signature are left out: Chat has no place for them;
- `ToolUsePart` → one tool call (`call_<n>` when the id is empty), arguments in `chunk_size`
  pieces;
- `stop_reason` → `finish_reason`: END_TURN, STOP_SEQUENCE and REFUSAL → `stop` (Chat does not
  tell a stop sequence apart), MAX_TOKENS → `length`, TOOL_USE → `tool_calls`,
  CONTENT_FILTER → `content_filter`, OTHER → `other`; PAUSE_TURN cannot be expressed and
  raises `ValueError`;
- `fail_with` → a `StreamInterruptedError` ends the body after the parts (no finish, no
  `[DONE]`); a `MalformedStreamError` adds a `data:` line that is not JSON; any other error is
  an `{"error": {...}}` chunk (OpenRouter's mid-stream form) with its message, `error_type` and
  status.
"""

from __future__ import annotations

from typing import Any

import orjson

from llm_worker.errors import MalformedStreamError, ProviderError, StreamInterruptedError
from llm_worker.events import StopReason, UsageEvent
from llm_worker.messages import Part, TextPart, ThinkingPart, ToolUsePart
from llm_worker.testing._script import ScriptedResponse

__all__ = ("encode",)

_FINISH: dict[StopReason, str] = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.REFUSAL: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.TOOL_USE: "tool_calls",
    StopReason.CONTENT_FILTER: "content_filter",
    StopReason.OTHER: "other",
}


def encode(response: ScriptedResponse, *, model: str) -> bytes:
    """The Chat Completions SSE stream of one scripted answer.

    Args:
        response: The answer.
        model: The model name the chunks report.

    Raises:
        ValueError: The answer holds a tool result or a stop reason Chat cannot express.
    """
    stop = response.resolved_stop_reason()
    if stop not in _FINISH:
        raise ValueError(f"Chat Completions cannot express the stop reason {stop.value!r}")
    writer = _Writer(model, response.chunk_size)
    writer.chunk({"role": "assistant", "content": ""})
    writer.parts(response.with_ids(0), refusal=stop is StopReason.REFUSAL)
    if response.fail_with is not None:
        writer.fail(response.fail_with)
    else:
        writer.chunk({}, finish_reason=_FINISH[stop])
        writer.usage(response.resolved_usage())
        writer.out.append(b"data: [DONE]\n\n")
    return b"".join(writer.out)


class _Writer:
    def __init__(self, model: str, chunk_size: int) -> None:
        self.model = model
        self.size = max(1, chunk_size)
        self.out: list[bytes] = []
        self.calls = 0

    def emit(self, data: dict[str, Any]) -> None:
        self.out.append(b"data: " + orjson.dumps(data) + b"\n\n")

    def base(self) -> dict[str, Any]:
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
        }

    def chunk(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        self.emit({**self.base(), "choices": [choice], "usage": None})

    def pieces(self, text: str) -> list[str]:
        return [text[i : i + self.size] for i in range(0, len(text), self.size)] or [""]

    def parts(self, parts: list[Part], *, refusal: bool) -> None:
        for part in parts:
            if isinstance(part, TextPart):
                field = "refusal" if refusal else "content"
                for piece in self.pieces(part.text):
                    self.chunk({field: piece})
            elif isinstance(part, ThinkingPart):
                if part.redacted is None:
                    for piece in self.pieces(part.text):
                        self.chunk({"reasoning_content": piece})
            elif isinstance(part, ToolUsePart):
                self.tool_call(part)
            else:
                raise ValueError("an answer cannot hold a tool result")

    def tool_call(self, part: ToolUsePart) -> None:
        index = self.calls
        self.calls += 1
        first = {
            "index": index,
            "id": part.id,
            "type": "function",
            "function": {"name": part.name, "arguments": ""},
        }
        self.chunk({"tool_calls": [first]})
        for piece in self.pieces(orjson.dumps(part.input).decode()):
            self.chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

    def usage(self, usage: UsageEvent) -> None:
        # The three counts are required (the SDK's `CompletionUsage`): an unknown one is 0,
        # the total their sum. Other fields the script leaves unknown (None) are left out, as
        # a server that does not report them would.
        prompt_tokens = usage.input_tokens or 0
        completion_tokens = usage.output_tokens or 0
        total = usage.total_tokens
        body: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": total if total is not None else prompt_tokens + completion_tokens,
        }
        prompt = _present(
            cached_tokens=usage.cache_read_input_tokens,
            cache_write_tokens=usage.cache_creation_input_tokens,  # OpenRouter's name
        )
        completion = _present(reasoning_tokens=usage.reasoning_tokens)
        if prompt:
            body["prompt_tokens_details"] = prompt
        if completion:
            body["completion_tokens_details"] = completion
        self.emit({**self.base(), "choices": [], "usage": body})

    def fail(self, error: ProviderError) -> None:
        if isinstance(error, StreamInterruptedError):
            return  # the body just ends
        if isinstance(error, MalformedStreamError):
            self.out.append(b'data: {"choices": [{"delta": \n\n')
            return
        detail: dict[str, Any] = {"message": error.message, "type": error.error_type}
        if error.status_code is not None:
            detail["status_code"] = error.status_code
        self.emit({**self.base(), "error": detail, "choices": []})


def _present(**fields: int | None) -> dict[str, int]:
    return {name: value for name, value in fields.items() if value is not None}
