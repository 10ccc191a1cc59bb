"""What every decoder of `llm_worker.testing._decode_<provider>` shares.

Kept apart from `_decode` (which loads the decoders by name) so that no decoder imports the
module that loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

import orjson

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Message,
    OutputSchema,
    SpecificTool,
    ThinkingConfig,
    ToolChoice,
    ToolResultPart,
    ToolUsePart,
)

Effort: TypeAlias = Literal["minimal", "low", "medium", "high"]
_EFFORTS: Final[dict[str, Effort]] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
_CHOICES: Final[dict[str, ToolChoice]] = {"auto": "auto", "none": "none", "required": "required"}


def finished(messages: Iterable[Message]) -> list[Message]:
    """The messages with same-role neighbours merged and every tool result named.

    Wire formats split one neutral message into several (OpenAI sends each tool result as its
    own message) or name a result only by id: merged and named, every format reads the same.
    """
    out: list[Message] = []
    for message in messages:
        if not message.content:
            continue
        if out and out[-1].role == message.role:
            out[-1].content.extend(message.content)
        else:
            out.append(Message(message.role, list(message.content)))
    names = {p.id: p.name for m in out for p in m.content if isinstance(p, ToolUsePart)}
    for message in out:
        for part in message.content:
            if isinstance(part, ToolResultPart) and part.name is None:
                part.name = names.get(part.tool_use_id)
    return out


def leftover(body: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The body's top-level fields a decoder did not map, for `Request.options`."""
    skip = set(known)
    return {key: value for key, value in body.items() if key not in skip}


def flag(value: object) -> bool | None:
    """A JSON boolean, else `None`."""
    return value if isinstance(value, bool) else None


def texts(content: object) -> list[str]:
    """The texts of a content list (`[{"text": …}, …]`), or a plain string as the one text."""
    if isinstance(content, str):
        return [content]
    return [as_str(as_dict(p).get("text")) or "" for p in as_list(content)]


def arguments(text: object, *, name: str) -> dict[str, Any]:
    """A tool call's arguments, sent as JSON text (OpenAI), as a JSON object.

    No text at all (some compatible servers send `""` for a call without arguments) is `{}`.

    Raises:
        InvalidMessagesError: The text is not a JSON object.
    """
    given = as_dict(text)
    if given is text:
        return given
    if text is None or text == "":
        return {}
    try:
        value: Any = orjson.loads(text if isinstance(text, str | bytes) else repr(text))
    except orjson.JSONDecodeError as exc:
        raise InvalidMessagesError(
            f"the arguments of the call of {name!r} are not JSON: {text!r}"
        ) from exc
    data = as_dict(value)
    if data is not value:
        raise InvalidMessagesError(
            f"the arguments of the call of {name!r} are not a JSON object: {text!r}"
        )
    return data


def number(value: object) -> float | None:
    """`value` as a float if it is a JSON number (not a bool), else `None`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def choice(value: object, *, forced: str = "required") -> ToolChoice | None:
    """A neutral tool choice from a provider's mode name (`forced`: its name for "required")."""
    if value == forced:
        return "required"
    return _CHOICES.get(value) if isinstance(value, str) else None


def named_choice(name: object) -> SpecificTool | None:
    """`SpecificTool(name)` when `name` is a string."""
    return SpecificTool(name) if isinstance(name, str) else None


def effort(value: object) -> Effort | None:
    """A neutral `ThinkingConfig.effort` (a level every provider spells alike), else `None`."""
    return _EFFORTS.get(value) if isinstance(value, str) else None


def thinking_config(
    *, budget: int | None = None, level: object = None, include_thoughts: bool | None = None
) -> ThinkingConfig:
    """A `ThinkingConfig` from decoded settings (`include_thoughts` `None`: not said)."""
    return ThinkingConfig(
        budget_tokens=budget, effort=effort(level), include_thoughts=include_thoughts
    )


def output_schema(spec: Mapping[str, Any], *, strict: bool | None = None) -> OutputSchema | None:
    """A structured output as a body states it (`name`, `schema`, `strict`, `description`).

    Args:
        spec: Chat's `json_schema` object, the Responses `text.format`, Anthropic's
            `output_config.format`, or `{"schema": ...}` for Gemini.
        strict: Strictness where the wire has no field for it (Anthropic, Gemini).
    """
    schema = as_dict(spec.get("schema"))
    if not schema:
        return None
    return OutputSchema(
        schema,
        name=as_str(spec.get("name")) or "output",
        description=as_str(spec.get("description")),
        strict=spec.get("strict") is True if strict is None else strict,
    )
