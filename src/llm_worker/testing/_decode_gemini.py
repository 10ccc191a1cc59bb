"""A Gemini `streamGenerateContent` body read back into the neutral `Request`.

The inverse of `providers._gemini_request.build_body`: `systemInstruction` is the system
prompt; `contents` (roles `user` / `model`) the conversation — `text` parts as text,
`thought: true` parts as thinking, `functionCall` parts as tool calls, `functionResponse`
parts as tool results (`response.error` marks a failed call), any other part
(`executableCode`, `codeExecutionResult`, …) as a `ProviderPart`; `thoughtSignature` is the
part's signature (Google's placeholder `skip_thought_signature_validator` is no signature).

Gemini sends no call ids: a call gets `gemini_call_<n>`, its position among the calls of the
conversation (the ids `GeminiClient` gives calls when it reads them), and a result the id of
the call it answers — the first call of the step before with its name, as Gemini pairs them.
Function declarations keep their parameters as sent (Gemini's schema dialect, type names in
upper case); other tools (`googleSearch`, `codeExecution`), `toolConfig` beyond the calling
mode, and `generationConfig` fields without a neutral one go to `options`.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

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
from llm_worker.providers._gemini_request import SKIP_SIGNATURE
from llm_worker.testing._decode_media import gemini_media
from llm_worker.testing._decoding import (
    choice,
    finished,
    leftover,
    named_choice,
    number,
    output_schema,
)
from llm_worker.testing._decoding import thinking_config as _config

__all__ = ("decode",)

_MAPPED: Final = frozenset({"contents", "systemInstruction", "tools", "toolConfig"})
_GENERATION: Final = frozenset({"maxOutputTokens", "temperature", "stopSequences"})


def decode(body: dict[str, Any], *, model: str) -> Request:
    """The neutral request a Gemini body carries (see the module docstring)."""
    reader = _Contents(Origin("gemini", model))
    messages = [reader.message(as_dict(c)) for c in as_list(body.get("contents"))]
    declarations: list[ToolSpec] = []
    options = leftover(body, _MAPPED | {"generationConfig"})
    for tool in as_list(body.get("tools")):
        found = as_list(as_dict(tool).get("functionDeclarations"))
        declarations.extend(_tool(as_dict(d)) for d in found)
        if not found:
            options.setdefault("tools", []).append(tool)
    config = as_dict(body.get("generationConfig"))
    rest = leftover(config, _GENERATION | {"thinkingConfig"})
    output = output_schema({"schema": rest.pop("responseJsonSchema", None)}, strict=True)
    if output is not None and rest.get("responseMimeType") == "application/json":
        del rest["responseMimeType"]
    if rest:
        options["generationConfig"] = rest
    system = as_dict(body.get("systemInstruction")).get("parts")
    return Request(
        finished(messages),
        system="".join(as_str(as_dict(p).get("text")) or "" for p in as_list(system)) or None,
        tools=declarations,
        tool_choice=_tool_choice(
            as_dict(as_dict(body.get("toolConfig")).get("functionCallingConfig"))
        ),
        max_tokens=as_int(config.get("maxOutputTokens")),
        temperature=number(config.get("temperature")),
        stop_sequences=[str(s) for s in as_list(config.get("stopSequences"))],
        thinking=_thinking(config.get("thinkingConfig")),
        options=options,
        output_schema=output,
    )


class _Contents:
    """Reads contents in order, numbering the calls and pairing each result with its call."""

    __slots__ = ("_calls", "_origin", "_pending")

    def __init__(self, origin: Origin) -> None:
        self._origin = origin
        self._calls = 0
        self._pending: list[ToolUsePart] = []  # the calls of the last model step, unanswered

    def message(self, content: dict[str, Any]) -> Message:
        role = "assistant" if content.get("role") == "model" else "user"
        if role == "assistant":
            self._pending = []
        return Message(role, [self._part(as_dict(p)) for p in as_list(content.get("parts"))])

    def _part(self, part: dict[str, Any]) -> Part:
        signature = as_str(part.get("thoughtSignature"))
        if signature == SKIP_SIGNATURE:
            signature = None
        origin = self._origin if signature is not None else None
        if "functionCall" in part:
            return self._call(as_dict(part["functionCall"]), signature, origin)
        if "functionResponse" in part:
            return self._result(as_dict(part["functionResponse"]))
        media = gemini_media(part)
        if media is not None:
            return media
        text = as_str(part.get("text"))
        if text is None:
            return ProviderPart(dict(part), origin=self._origin)
        if part.get("thought") is True:
            return ThinkingPart(text, signature=signature, origin=origin)
        return TextPart(text, signature=signature, origin=origin)

    def _call(self, call: dict[str, Any], signature: str | None, origin: Origin | None) -> Part:
        call_id = as_str(call.get("id")) or f"gemini_call_{self._calls}"
        self._calls += 1
        name = as_str(call.get("name")) or ""
        part = ToolUsePart(
            call_id, name, as_dict(call.get("args")), signature=signature, origin=origin
        )
        self._pending.append(part)
        return part

    def _result(self, response: dict[str, Any]) -> Part:
        name = as_str(response.get("name")) or ""
        call_id = as_str(response.get("id")) or self._answered(name)
        body = as_dict(response.get("response"))
        is_error = "error" in body and "output" not in body
        value = body.get("error") if is_error else body.get("output", body or None)
        try:
            text = value if isinstance(value, str) else orjson.dumps(value).decode()
        except TypeError as exc:  # a dict built in Python: e.g. an integer wider than 64 bits
            raise InvalidMessagesError(
                f"the result of {name!r} cannot be written as JSON: {exc}"
            ) from exc
        media = [gemini_media(as_dict(p)) for p in as_list(response.get("parts"))]
        return ToolResultPart(
            call_id,
            text,
            is_error=is_error,
            name=name or None,
            media=[m for m in media if m is not None],
        )

    def _answered(self, name: str) -> str:
        for n, call in enumerate(self._pending):
            if call.name == name:
                return self._pending.pop(n).id
        return name


def _tool(declaration: dict[str, Any]) -> ToolSpec:
    parameters = as_dict(declaration.get("parameters")) or {"type": "object", "properties": {}}
    return ToolSpec(
        as_str(declaration.get("name")) or "",
        as_str(declaration.get("description")) or "",
        parameters,
    )


def _tool_choice(config: dict[str, Any]) -> ToolChoice | None:
    mode = config.get("mode")
    names = as_list(config.get("allowedFunctionNames"))
    if mode == "ANY" and len(names) == 1:
        return named_choice(names[0])
    return choice(str(mode).lower() if isinstance(mode, str) else None, forced="any")


def _thinking(wire: object) -> ThinkingConfig | None:
    config = as_dict(wire)
    if not config:
        return None
    return _config(
        budget=as_int(config.get("thinkingBudget")),
        level=config.get("thinkingLevel"),
        # True is also what the builder sends when nothing was asked: it reads as None.
        include_thoughts=False if config.get("includeThoughts") is False else None,
    )
