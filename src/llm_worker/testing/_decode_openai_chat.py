"""An OpenAI Chat Completions body read back into the neutral `Request`.

The inverse of `providers._openai_chat_request.build_chat_body`: `system` (and `developer`)
messages become the system prompt; `user` messages (a string or text parts) user text;
`tool` messages tool results in the user message that follows the calls (Chat has no error
flag, so `is_error` is false); `assistant` messages text and `tool_calls` (arguments parsed
from their JSON text). `tools` (function tools, `strict` kept), `tool_choice`,
`max_completion_tokens` (or `max_tokens`), `temperature`, `stop`, `parallel_tool_calls` and
`reasoning_effort` map to their neutral fields. An assistant message's `reasoning_content` is
a `ThinkingPart` of this provider and the body's model (the builder sends only such thinking).
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Message,
    Origin,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.testing._decode_media import chat_content
from llm_worker.testing._decoding import (
    arguments,
    choice,
    finished,
    flag,
    leftover,
    named_choice,
    number,
    output_schema,
    texts,
    thinking_config,
)

__all__ = ("decode",)

_MAPPED: Final = frozenset(
    {
        "model",
        "messages",
        "max_completion_tokens",
        "max_tokens",
        "temperature",
        "stop",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "stream",
        "stream_options",
    }
)


def decode(body: dict[str, Any], *, model: str) -> Request:
    """The neutral request a Chat Completions body carries (see the module docstring)."""
    origin = Origin("openai_chat", as_str(body.get("model")) or model)
    system: list[str] = []
    messages: list[Message] = []
    for wire in as_list(body.get("messages")):
        _message(as_dict(wire), origin, system, messages)
    tools = [as_dict(t) for t in as_list(body.get("tools"))]
    options = leftover(body, _MAPPED | {"tools"})
    others = [t for t in tools if t.get("type") != "function"]
    if others:
        options["tools"] = others
    output = None
    if as_dict(options.get("response_format")).get("type") == "json_schema":
        output = output_schema(as_dict(options.pop("response_format").get("json_schema")))
    effort = body.get("reasoning_effort")
    stop = body.get("stop")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    return Request(
        finished(messages),
        system="\n\n".join(system) or None,
        tools=[_tool(as_dict(t.get("function"))) for t in tools if t.get("type") == "function"],
        tool_choice=_tool_choice(body.get("tool_choice")),
        parallel_tool_calls=flag(body.get("parallel_tool_calls")),
        max_tokens=as_int(limit),
        temperature=number(body.get("temperature")),
        stop_sequences=[stop] if isinstance(stop, str) else [str(s) for s in as_list(stop)],
        thinking=thinking_config(level=effort) if effort is not None else None,
        options=options,
        output_schema=output,
    )


def _message(wire: dict[str, Any], origin: Origin, system: list[str], out: list[Message]) -> None:
    role = wire.get("role")
    content = wire.get("content")
    match role:
        case "system" | "developer":
            system.append("".join(texts(content)))
        case "user":
            out.append(Message("user", chat_content(content)))
        case "tool":
            call_id = as_str(wire.get("tool_call_id")) or ""
            result = ToolResultPart(call_id, "".join(texts(content)))
            out.append(Message("user", [result]))
        case "assistant":
            out.append(Message("assistant", _assistant(wire, origin)))
        case _:
            raise InvalidMessagesError(f"a Chat Completions message has no known role: {role!r}")


def _assistant(wire: dict[str, Any], origin: Origin) -> list[Part]:
    reasoning = as_str(wire.get("reasoning_content"))
    parts: list[Part] = [] if reasoning is None else [ThinkingPart(reasoning, origin=origin)]
    parts += [TextPart(t) for t in texts(wire.get("content")) if t]
    for call in as_list(wire.get("tool_calls")):
        function = as_dict(as_dict(call).get("function"))
        name = as_str(function.get("name")) or ""
        call_id = as_str(as_dict(call).get("id")) or ""
        parts.append(ToolUsePart(call_id, name, arguments(function.get("arguments"), name=name)))
    return parts


def _tool(function: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        as_str(function.get("name")) or "",
        as_str(function.get("description")) or "",
        as_dict(function.get("parameters")),
        strict=function.get("strict") is True,
    )


def _tool_choice(wire: object) -> ToolChoice | None:
    if isinstance(wire, str):
        return choice(wire)
    return named_choice(as_dict(as_dict(wire).get("function")).get("name"))
