"""An OpenAI Responses body read back into the neutral `Request`.

The inverse of `providers._openai_responses_request.build_body`: `instructions` is the system
prompt; `input` (a string, or items) becomes the conversation — user and system `message`
items (text parts), `function_call_output` items as tool results (Responses has no error
flag, so `is_error` is false), assistant `message` items as text (with their item id, phase
and annotations as citations), `function_call` items as tool calls (`call_id`, item id,
arguments parsed), `reasoning` items as one `ThinkingPart` per summary part (item id;
`encrypted_content` as the signature of the first), and any other item (a hosted-tool call)
as a `ProviderPart`. Function `tools` (with
`strict`), `tool_choice`, `parallel_tool_calls`, `max_output_tokens`, `temperature` and
`reasoning` (`effort`, `summary`) map to their neutral fields; hosted tools, `store`,
`include` and the rest go to `options`.
"""

from __future__ import annotations

from typing import Any, Final

from llm_worker._json import as_dict, as_int, as_list, as_str
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Citation,
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
from llm_worker.testing._decode_media import media_of, responses_content
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
        "input",
        "instructions",
        "max_output_tokens",
        "temperature",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "stream",
    }
)


def decode(body: dict[str, Any], *, model: str) -> Request:
    """The neutral request a Responses body carries (see the module docstring)."""
    origin = Origin("openai_responses", as_str(body.get("model")) or model)
    system: list[str] = []
    items = body.get("input")
    messages: list[Message | None] = [Message.user(items)] if isinstance(items, str) else []
    messages.extend(_item(as_dict(i), origin, system) for i in as_list(items))
    tools = [as_dict(t) for t in as_list(body.get("tools"))]
    options = leftover(body, _MAPPED | {"tools"})
    hosted = [t for t in tools if t.get("type") != "function"]
    if hosted:
        options["tools"] = hosted
    instructions = as_str(body.get("instructions"))
    text = dict(as_dict(options.pop("text", None)))
    output = None
    if as_dict(text.get("format")).get("type") == "json_schema":
        output = output_schema(as_dict(text.pop("format")))
    if text:
        options["text"] = text
    return Request(
        finished(m for m in messages if m is not None),
        system="\n\n".join([instructions or "", *system]).strip() or None,
        tools=[_tool(t) for t in tools if t.get("type") == "function"],
        tool_choice=_tool_choice(body.get("tool_choice")),
        parallel_tool_calls=flag(body.get("parallel_tool_calls")),
        max_tokens=as_int(body.get("max_output_tokens")),
        temperature=number(body.get("temperature")),
        thinking=_thinking(body.get("reasoning")),
        options=options,
        output_schema=output,
    )


def _item(item: dict[str, Any], origin: Origin, system: list[str]) -> Message | None:
    kind = item.get("type", "message")  # an easy input message may leave its type out
    if kind == "message":
        return _message(item, origin, system)
    if kind == "function_call_output":
        call_id = as_str(item.get("call_id")) or ""
        text, media = media_of(responses_content(item.get("output")))
        return Message("user", [ToolResultPart(call_id, text, media=media)])
    if kind == "function_call":
        name = as_str(item.get("name")) or ""
        call = ToolUsePart(
            as_str(item.get("call_id")) or "",
            name,
            arguments(item.get("arguments"), name=name),
            item_id=as_str(item.get("id")),
        )
        if call.item_id is not None:
            call.origin = origin
        return Message("assistant", [call])
    if kind == "reasoning":
        return Message("assistant", _reasoning(item, origin))
    return Message("assistant", [ProviderPart(dict(item), origin=origin)])


def _message(item: dict[str, Any], origin: Origin, system: list[str]) -> Message | None:
    role = item.get("role")
    pieces = texts(item.get("content"))
    if role in ("system", "developer"):
        system.append("".join(pieces))
        return None
    if role == "user":
        return Message("user", responses_content(item.get("content")))
    if role != "assistant":
        raise InvalidMessagesError(f"a Responses message item has no known role: {role!r}")
    item_id = as_str(item.get("id"))
    phase = as_str(item.get("phase"))
    own = origin if item_id is not None or phase is not None else None
    parts: list[Part] = []
    for content in as_list(item.get("content")) or [{"text": t} for t in pieces]:
        text = as_dict(content)
        cited = [_citation(as_dict(a), origin) for a in as_list(text.get("annotations"))]
        parts.append(
            TextPart(
                as_str(text.get("text")) or "",
                item_id=item_id,
                origin=own,
                citations=cited,
                phase=phase,
            )
        )
    return Message("assistant", parts)


def _citation(annotation: dict[str, Any], origin: Origin) -> Citation:
    start = as_int(annotation.get("start_index"))
    return Citation(
        annotation,
        url=as_str(annotation.get("url")),
        title=as_str(annotation.get("title")) or as_str(annotation.get("filename")),
        start_index=as_int(annotation.get("index")) if start is None else start,
        end_index=as_int(annotation.get("end_index")),
        origin=origin,
    )


def _reasoning(item: dict[str, Any], origin: Origin) -> list[Part]:
    item_id = as_str(item.get("id"))
    summaries = [as_str(as_dict(s).get("text")) or "" for s in as_list(item.get("summary"))]
    signature = as_str(item.get("encrypted_content"))
    parts: list[Part] = []
    for n, text in enumerate(summaries or [""]):
        sign = signature if n == 0 else None
        parts.append(ThinkingPart(text, signature=sign, item_id=item_id, origin=origin))
    return parts


def _tool(tool: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        as_str(tool.get("name")) or "",
        as_str(tool.get("description")) or "",
        as_dict(tool.get("parameters")),
        strict=tool.get("strict") is True,
    )


def _tool_choice(wire: object) -> ToolChoice | None:
    if isinstance(wire, str):
        return choice(wire)
    return named_choice(as_dict(wire).get("name"))


def _thinking(wire: object) -> ThinkingConfig | None:
    reasoning = as_dict(wire)
    if not reasoning:
        return None
    # A summary is asked for only when include_thoughts is True; its absence says no more.
    shown = True if reasoning.get("summary") is not None else None
    return thinking_config(level=reasoning.get("effort"), include_thoughts=shown)
