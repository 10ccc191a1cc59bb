"""The OpenAI Chat Completions request body, built from a neutral `Request`.

The mapping, part by part:

- the system prompt becomes a first `system` message;
- a user message's text parts become one `user` message (a plain string for one part, a list of
  text parts for several); each of its `ToolResultPart`s becomes a `role: "tool"` message with
  `tool_call_id`, in order and before the user text, since Chat requires the tool messages to
  follow the assistant message that made the calls. Chat has no error flag for a tool result:
  `is_error` results are sent as their text, which says what went wrong;
- an assistant message's text parts are joined into `content` and its `ToolUsePart`s become
  `tool_calls` (arguments as JSON text). Its thinking parts that this client read from
  `reasoning_content` (their `origin` is `openai_chat` with this same model) are joined into
  the message's `reasoning_content`: DeepSeek's thinking mode answers HTTP 400 "Missing
  `reasoning_content` field" to an assistant message that made tool calls without it, and
  Kimi and Z.ai (preserved thinking) read it too; where it is not needed DeepSeek ignores it.
  Thinking this client read from Mistral's thinking content parts (`item_id` `"thinking"`,
  same origin) goes back the way Mistral's request types take it: the message's `content`
  becomes a list of parts, `{"type": "thinking", "thinking": [{"type": "text", …}]}` and
  `{"type": "text", …}` in the order the answer gave them (Mistral refuses a
  `reasoning_content` field it does not know).
  Every other thinking part is dropped: thinking of another provider or model, and thinking
  streamed as `reasoning` (OpenRouter, Groq), since Groq and Cerebras reject a request that
  carries either field. Citations are not sent: Chat has no request field for them.
  A `ProviderPart` (another provider's native block, such as an Anthropic server-tool call)
  is dropped too: Chat has no kind for it, and it is only ever sent back to its producer.
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker._wide_json import json_bytes
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Origin,
    OutputSchema,
    ProviderPart,
    Request,
    SpecificTool,
    TextPart,
    ThinkingPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers._base import checked_tool_choice, deep_merge, unsupported_part
from llm_worker.providers._media import OPENAI_CHAT, MediaTotal
from llm_worker.providers._openai_media import (
    chat_part,
    chat_result_media,
    chat_tool_text,
    misplaced,
)
from llm_worker.providers._output import sent_schema

__all__ = ("PROVIDER", "THINKING_PART", "build_chat_body", "chat_messages")

PROVIDER: Final = "openai_chat"
"""The wire protocol's name, also the `Origin.provider` of the reasoning it reads."""

THINKING_PART: Final = "thinking"
"""The `item_id` of thinking read from a Mistral thinking content part (its `type`)."""

# Neutral efforts no OpenAI model takes, as the nearest one that exists.
_EFFORTS: Final[dict[str, str]] = {"max": "xhigh"}


def build_chat_body(request: Request, model: str, *, cache_key: bool = False) -> dict[str, Any]:
    """The Chat Completions JSON body for a neutral request.

    The output limit is sent as `max_completion_tokens`, not `max_tokens`: OpenAI deprecated
    `max_tokens` and its reasoning models (o-series, gpt-5) reject it. For a compatible server
    that knows only `max_tokens`, pass `options={"max_tokens": n}`: the builder then leaves
    `max_completion_tokens` out. `ThinkingConfig.effort` becomes `reasoning_effort` (`max`
    is sent as `xhigh`, the most OpenAI models take, which DeepSeek reads as its `max`); Chat
    has no field for a thinking budget or for asking to see the thoughts, so those settings
    are not sent. `tool_choice` and `parallel_tool_calls` are sent only with tools (OpenAI
    rejects them alone). Log probabilities come back when asked for with
    `options={"logprobs": True, "top_logprobs": n}`.

    `request.prompt_cache` goes as `prompt_cache_key` only with `cache_key` (the client sends
    it to OpenAI's own host: compatible servers such as Mistral refuse unknown fields).

    `request.options` is deep-merged last (`deep_merge`: lists are joined); an option set to
    `None` removes that field (e.g. `{"stream_options": None}` for a server that rejects it).
    """
    with MediaTotal(OPENAI_CHAT):  # the parts' total, after each part's own check
        messages = chat_messages(request, model)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.max_tokens is not None and "max_tokens" not in request.options:
        body["max_completion_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop_sequences:
        body["stop"] = list(request.stop_sequences)
    if request.thinking is not None and request.thinking.effort is not None:
        effort: str = request.thinking.effort
        body["reasoning_effort"] = _EFFORTS.get(effort, effort)
    if request.output_schema is not None:
        body["response_format"] = chat_response_format(request.output_schema)
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if cache_key and request.prompt_cache is not None:
        body["prompt_cache_key"] = request.prompt_cache
    deep_merge(body, request.options)
    for key, value in request.options.items():
        if value is None:
            body.pop(key, None)
    return body


def chat_response_format(output: OutputSchema) -> dict[str, Any]:
    """Structured output as Chat's `response_format` (`json_schema`)."""
    sent = sent_schema(output)
    spec: dict[str, Any] = {"name": sent.name, "schema": sent.schema, "strict": sent.strict}
    if sent.description:
        spec["description"] = sent.description
    return {"type": "json_schema", "json_schema": spec}


def chat_messages(request: Request, model: str) -> list[dict[str, Any]]:
    """The `messages` array: system prompt first, then the history in order.

    Args:
        request: The request.
        model: The model the request goes to: its own reasoning goes back to it.
    """
    own = Origin(PROVIDER, model)
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            _user(message, out)
        else:
            out.append(_assistant(message, own))
    return out


def _user(message: Message, out: list[dict[str, Any]]) -> None:
    content: list[dict[str, Any]] = []
    results_media: list[dict[str, Any]] = []  # after every tool message: see _openai_media
    for part in message.content:
        match part:
            case ToolResultPart():
                tool = {"role": "tool", "tool_call_id": part.tool_use_id}
                out.append({**tool, "content": chat_tool_text(part)})
                results_media.extend(chat_result_media(part))
            case TextPart():
                content.append({"type": "text", "text": part.text})
            case ImagePart() | DocumentPart():
                content.append(chat_part(part))
            case ThinkingPart() | ProviderPart():
                pass  # no reasoning to send; provider-native content: see the module docstring
            case ToolUsePart():
                raise InvalidMessagesError(
                    f"a user message holds a tool call ({part.name!r}); tool calls belong to "
                    "assistant messages"
                )
            case _:
                raise unsupported_part(part)
    content = results_media + content
    if content:
        out.append({"role": "user", "content": _content(content)})


def _content(content: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(content) == 1 and content[0]["type"] == "text":
        return content[0]["text"]
    return content


def _assistant(message: Message, own: Origin) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []  # one entry per part, empty texts included
    chunks: list[dict[str, Any]] = []  # text, and Mistral's thinking parts, in order
    for part in message.content:
        match part:
            case TextPart():
                _add_text(chunks, part.text)
            case ToolUsePart():
                calls.append(_tool_call(part))
            case ThinkingPart():
                if part.origin == own:  # see the module docstring
                    _own_thinking(part, reasoning, chunks)
            case ProviderPart():
                pass  # Chat has no kind for it: see the module docstring
            case ImagePart() | DocumentPart():
                raise misplaced(part)
            case ToolResultPart():
                raise InvalidMessagesError(
                    f"an assistant message holds a tool result (for {part.tool_use_id!r}); "
                    "tool results belong to user messages"
                )
            case _:
                raise unsupported_part(part)
    return _assistant_entry(chunks, reasoning, calls)


def _assistant_entry(
    chunks: list[dict[str, Any]], reasoning: list[str], calls: list[dict[str, Any]]
) -> dict[str, Any]:
    content: str | list[dict[str, Any]] | None = None
    if any(chunk["type"] == THINKING_PART for chunk in chunks):
        content = [chunk for chunk in chunks if chunk.get("text", True)]  # no empty text
    elif chunks:
        content = chunks[0]["text"]  # text parts alone were joined into one
    entry: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        entry["reasoning_content"] = "".join(reasoning)
    if calls:
        entry["tool_calls"] = calls
    elif entry["content"] is None:
        entry["content"] = ""  # OpenAI requires content when there are no tool calls
    return entry


def _own_thinking(part: ThinkingPart, reasoning: list[str], chunks: list[dict[str, Any]]) -> None:
    if part.item_id == THINKING_PART:
        chunks.append(_thinking_part(part.text))  # Mistral's form
    else:
        reasoning.append(part.text)  # `reasoning_content`


def _add_text(chunks: list[dict[str, Any]], text: str) -> None:
    if chunks and chunks[-1]["type"] == "text":
        chunks[-1]["text"] += text  # one text part between two thinking parts
    else:
        chunks.append({"type": "text", "text": text})


def _thinking_part(text: str) -> dict[str, Any]:
    # Mistral's `ThinkChunk`: its `thinking` holds text (and reference) chunks.
    return {"type": THINKING_PART, "thinking": [{"type": "text", "text": text}]}


def _tool_call(part: ToolUsePart) -> dict[str, Any]:
    return {
        "id": part.id,
        "type": "function",
        "function": {"name": part.name, "arguments": json_bytes(part.input).decode()},
    }


def _tool(spec: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.input_schema,
    }
    if spec.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    choice = checked_tool_choice(choice)
    if isinstance(choice, SpecificTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice
