"""An Anthropic `POST /v1/messages` body read back into the neutral `Request`.

The inverse of `providers._anthropic_request.build_body`: `system` (a string or text blocks),
`messages` (a string or blocks: `text`, `image`, `document`, `thinking` with its signature,
`redacted_thinking`, `tool_use`, `tool_result` with text or block content and `is_error`;
any other block, a server-tool or MCP block, becomes a `ProviderPart`), `tools` with an
`input_schema` (server tools stay in `options`), `tool_choice` (`any` is "required"),
`max_tokens`, `temperature`, `stop_sequences`, and `thinking` (`enabled` with its budget,
`adaptive`) with `output_config.effort`.
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Message,
    Origin,
    Part,
    ProviderPart,
    Request,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.testing._decode_media import anthropic_media
from llm_worker.testing._decoding import (
    choice,
    finished,
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
        "system",
        "max_tokens",
        "temperature",
        "stop_sequences",
        "tool_choice",
        "thinking",
        "stream",
    }
)


def decode(body: dict[str, Any], *, model: str) -> Request:
    """The neutral request an Anthropic body carries (see the module docstring)."""
    origin = Origin("anthropic", as_str(body.get("model")) or model)
    messages = [_message(as_dict(m), origin) for m in as_list(body.get("messages"))]
    tools = [as_dict(t) for t in as_list(body.get("tools"))]
    options = leftover(body, _MAPPED | {"tools", "output_config"})
    server_tools = [t for t in tools if "input_schema" not in t]
    if server_tools:
        options["tools"] = server_tools
    config = dict(as_dict(body.get("output_config")))
    level = config.pop("effort", None)
    output = output_schema(as_dict(config.pop("format", None)), strict=True)
    if config:
        options["output_config"] = config
    return Request(
        finished(messages),
        system=_system(body.get("system")),
        tools=[_tool(t) for t in tools if "input_schema" in t],
        tool_choice=_tool_choice(as_dict(body.get("tool_choice"))),
        max_tokens=as_int(body.get("max_tokens")),
        temperature=number(body.get("temperature")),
        stop_sequences=[str(s) for s in as_list(body.get("stop_sequences"))],
        thinking=_thinking(as_dict(body.get("thinking")), level),
        options=options,
        output_schema=output,
    )


def _system(system: object) -> str | None:
    return "".join(texts(system)) or None


def _message(wire: dict[str, Any], origin: Origin) -> Message:
    role = wire.get("role")
    if role not in ("user", "assistant"):
        raise InvalidMessagesError(f"an Anthropic message has no known role: {role!r}")
    content = wire.get("content")
    if isinstance(content, str):
        return Message(role, [TextPart(content)])
    return Message(role, [_part(as_dict(block), origin) for block in as_list(content)])


def _part(block: dict[str, Any], origin: Origin) -> Part:
    media = anthropic_media(block)
    return media if media is not None else _other(block, origin)


def _other(block: dict[str, Any], origin: Origin) -> Part:
    match block.get("type"):
        case "text":
            return TextPart(as_str(block.get("text")) or "")
        case "thinking":
            text = as_str(block.get("thinking")) or ""
            return ThinkingPart(text, signature=as_str(block.get("signature")), origin=origin)
        case "redacted_thinking":
            return ThinkingPart("", redacted=as_str(block.get("data")) or "", origin=origin)
        case "tool_use":
            name = as_str(block.get("name")) or ""
            return ToolUsePart(as_str(block.get("id")) or "", name, as_dict(block.get("input")))
        case "tool_result":
            content = block.get("content")
            media = [anthropic_media(as_dict(b)) for b in as_list(content)]
            return ToolResultPart(
                as_str(block.get("tool_use_id")) or "",
                "".join(texts(content)),
                is_error=block.get("is_error") is True,
                media=[m for m in media if m is not None],
            )
        case _:
            # cache_control markers are the client's, not the model's: not part of the block.
            data = {k: v for k, v in block.items() if k != "cache_control"}
            return ProviderPart(data, origin=origin)


def _tool(tool: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        as_str(tool.get("name")) or "",
        as_str(tool.get("description")) or "",
        as_dict(tool.get("input_schema")),
    )


def _tool_choice(wire: dict[str, Any]) -> ToolChoice | None:
    kind = wire.get("type")
    if kind == "tool":
        return named_choice(wire.get("name"))
    return choice(kind, forced="any")


def _thinking(wire: dict[str, Any], level: object) -> ThinkingConfig | None:
    kind = wire.get("type")
    # "summarized" is also what the builder sends when nothing was asked: it reads as None.
    shown = False if wire.get("display") == "omitted" else None
    if kind == "enabled":
        budget = as_int(wire.get("budget_tokens"))
        return thinking_config(budget=budget, level=level, include_thoughts=shown)
    if kind == "adaptive" or level is not None:
        # Without `thinking` the builder left thinking off for a pending tool loop; the effort
        # still says what was asked for.
        return thinking_config(level=level, include_thoughts=shown)
    return None
