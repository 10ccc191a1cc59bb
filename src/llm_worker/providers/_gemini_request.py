"""The neutral `Request` as a Gemini `streamGenerateContent` body.

- Messages become `contents` with roles `user` / `model`; adjacent messages of one role are
  merged (Gemini expects the roles to alternate) and messages left with no part are skipped.
  A tool call in a user message or a tool result in an assistant message is refused
  (`InvalidMessagesError`): Gemini would reject the turn.
- Tool calls become `functionCall` parts (`name`, `args`), tool results `functionResponse`
  parts (`name`, `response: {"output": …}` or `{"error": …}` for a failed call, the keys the
  Gemini documentation names). A result without `name` takes it from the call it answers.
  An id Gemini gave a call (`functionCall.id`, kept as the part's `item_id`) goes back on the
  call and on its `functionResponse`, as the API asks; ids this library made up (see
  `gemini.py`) and other providers' ids are not sent: Gemini then matches results to calls
  by name and order.
- `thoughtSignature` goes back on the part that carried it, only when the part's `origin` is
  Gemini with the same model: a signature is bound to the model that made it, and a foreign
  one is rejected with HTTP 400. For Gemini 3 and later, which reject a replayed
  `functionCall` without a signature, a step whose first call has no valid signature (a
  history from another provider or model) gets Google's documented placeholder
  `skip_thought_signature_validator` instead.
- Thinking is not sent back as text. A Gemini thought part of the same model that carries a
  signature goes back as it came (`thought: true`, text, signature); every other thinking part
  (Gemini thought summaries without a signature, other providers' reasoning) is dropped: it is
  the model's private reasoning, and as plain text it would read as something said aloud.
- A `ProviderPart` (a part of a kind the neutral model has none for, such as `executableCode`
  or `codeExecutionResult`, kept whole by `gemini.py`) goes back verbatim, in place and with
  its `thoughtSignature`, only when its origin is Gemini with the same model: a code-execution
  step must be replayed as it came, and its signature is bound to the model. One of another
  origin (an Anthropic server-tool block, a part of another Gemini model) is dropped.
- A `ProviderPart` of grounding / URL-context metadata (`_gemini_metadata`) is never sent:
  it describes an answer, it is not part of one.
- `generationConfig`: `maxOutputTokens`, `temperature`, `stopSequences`, `thinkingConfig`
  (`includeThoughts`, and `thinkingBudget` from `budget_tokens`, or else from `effort`: a
  `thinkingLevel` on Gemini 3 and later, a budget on earlier models, which know no level;
  Gemini rejects both at once). `request.options` is deep-merged last.
- Efforts per model family (no Gemini 3 model can turn thinking off): Gemini 3 Pro takes
  `low` / `high`, later Pro models `low` / `medium` / `high`, Flash and Flash-Lite models
  `minimal` to `high`; an effort the model lacks becomes the nearest level below it (the
  lowest level when there is none below: `none` and `minimal` on a Pro model are `low`), and
  `xhigh` / `max` are `high`. The `gemini-*-latest` aliases name Gemini 3+ models. Gemini 2.x
  budgets: `none` / `minimal` 0 (128 on Pro, which always thinks), `low` 1024, `medium` 8192,
  `high` 24576, `xhigh` / `max` the model's most (32768 on Pro).
- `Request.parallel_tool_calls` has no Gemini equivalent: Gemini always may call several
  functions at once, and the setting is not sent.
"""

from __future__ import annotations

import re
from typing import Any, Final

from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Origin,
    Part,
    ProviderPart,
    Request,
    SpecificTool,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers._base import checked_tool_choice, deep_merge, unsupported_part
from llm_worker.providers._gemini_media import media_part, with_media
from llm_worker.providers._gemini_metadata import METADATA_KEYS
from llm_worker.providers._gemini_schema import gemini_schema
from llm_worker.providers._media import GEMINI, MediaTotal
from llm_worker.providers._output import sent_schema

__all__ = ("SKIP_SIGNATURE", "build_body")

SKIP_SIGNATURE: Final = "skip_thought_signature_validator"
"""Google's documented placeholder for a function call whose real signature is unknown."""

_MODES: Final = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
_VERSION: Final = re.compile(r"(?:^|/)gemini-(\d+)(?:\.(\d+))?")
# `gemini-flash-latest`, `gemini-pro-latest`, `gemini-flash-lite-latest`: Gemini 3+ models.
_ALIAS: Final = re.compile(r"(?:^|/)gemini-[a-z-]*latest\b")


def build_body(request: Request, model: str) -> dict[str, Any]:
    """The Gemini JSON body for a neutral request sent to `model`."""
    with MediaTotal(GEMINI):  # the parts' total, after each part's own check
        contents = _contents(request.messages, model)
    body: dict[str, Any] = {"contents": contents}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        if request.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _calling(request.tool_choice)}
    config = _generation(request, model)
    if config:
        body["generationConfig"] = config
    return deep_merge(body, request.options)


def _contents(messages: list[Message], model: str) -> list[dict[str, Any]]:
    calls = {p.id: p for m in messages for p in m.content if isinstance(p, ToolUsePart)}
    own = Origin("gemini", model)
    contents: list[dict[str, Any]] = []
    for message in messages:
        _check_roles(message)
        parts = [p for part in message.content for p in _parts(part, own, calls)]
        if not parts:
            continue
        role = "model" if message.role == "assistant" else "user"
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    if _validates_signatures(model):
        for content in contents:
            if content["role"] == "model":
                _placeholder_signature(content["parts"])
    return contents


def _check_roles(message: Message) -> None:
    # Gemini rejects a functionCall in a user turn and a functionResponse in a model turn.
    misplaced = ToolUsePart if message.role == "user" else ToolResultPart
    for part in message.content:
        if isinstance(part, misplaced):
            owner = "assistant" if message.role == "user" else "user"
            raise InvalidMessagesError(
                f"a {message.role} message holds a {part.type} part; {part.type} parts belong "
                f"to {owner} messages"
            )


def _parts(part: Part, own: Origin, calls: dict[str, ToolUsePart]) -> list[dict[str, Any]]:
    if isinstance(part, ImagePart | DocumentPart):
        return [media_part(part)]
    out = _part(part, own, calls)
    if out is None:
        return []
    if isinstance(part, ToolResultPart):
        return with_media(out, part, nested=_validates_signatures(own.model))
    return [out]


def _part(part: Part, own: Origin, calls: dict[str, ToolUsePart]) -> dict[str, Any] | None:
    if isinstance(part, ToolResultPart):
        return {"functionResponse": _response(part, calls)}
    if isinstance(part, ProviderPart):
        if part.data.keys() <= METADATA_KEYS:
            return None  # grounding / URL context: about the answer, not in it
        # A copy: the body must not share dicts with the history. See the module docstring.
        return dict(part.data) if part.origin == own else None
    if not isinstance(part, TextPart | ThinkingPart | ToolUsePart):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise unsupported_part(part)
    signature = part.signature if part.origin == own else None
    if isinstance(part, TextPart):
        out: dict[str, Any] = {"text": part.text}
        if not part.text and signature is None:
            return None
    elif isinstance(part, ThinkingPart):
        if signature is None:
            return None
        out = {"text": part.text, "thought": True}
    else:
        out = {"functionCall": _call(part)}
    if signature is not None:
        out["thoughtSignature"] = signature
    return out


def _call(part: ToolUsePart) -> dict[str, Any]:
    call: dict[str, Any] = {"name": part.name, "args": part.input}
    given = _given_id(part)
    if given is not None:
        call["id"] = given
    return call


def _given_id(call: ToolUsePart | None) -> str | None:
    # Gemini's own id of a call (never one this library made up, nor another provider's).
    if call is None or call.origin is None or call.origin.provider != "gemini":
        return None
    return call.item_id


def _response(part: ToolResultPart, calls: dict[str, ToolUsePart]) -> dict[str, Any]:
    call = calls.get(part.tool_use_id)
    name = part.name or (call.name if call is not None else None)
    if not name:
        raise InvalidMessagesError(
            f"the tool result for call {part.tool_use_id!r} has no name and no tool call in "
            "the history has that id: Gemini needs the function's name"
        )
    key = "error" if part.is_error else "output"
    response: dict[str, Any] = {"name": name, "response": {key: part.content}}
    given = _given_id(call)
    if given is not None:
        response["id"] = given
    return response


def _version(model: str) -> tuple[int, int] | None:
    """The Gemini version a model name says (`gemini-3.1-pro-preview`: 3.1), if it says one."""
    match = _VERSION.search(model)
    return (int(match.group(1)), int(match.group(2) or 0)) if match is not None else None


def _validates_signatures(model: str) -> bool:
    # Gemini 3 and later (the -latest aliases too): thought signatures are checked, and
    # thinking takes a level.
    version = _version(model)
    return version >= (3, 0) if version is not None else _ALIAS.search(model) is not None


def _placeholder_signature(parts: list[dict[str, Any]]) -> None:
    # Gemini 3 checks the signature of the first functionCall of each model step only (later
    # parallel calls never carry one).
    for part in parts:
        if "functionCall" in part:
            part.setdefault("thoughtSignature", SKIP_SIGNATURE)
            return


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = gemini_schema(tool.input_schema)
    # A tool without arguments sends no `parameters`: an empty OBJECT is rejected by some
    # Gemini versions ("properties: should be non-empty for OBJECT type").
    if parameters.get("properties"):
        declaration["parameters"] = parameters
    return declaration


def _calling(choice: ToolChoice) -> dict[str, Any]:
    choice = checked_tool_choice(choice)
    if isinstance(choice, SpecificTool):
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    return {"mode": _MODES[choice]}


def _generation(request: Request, model: str) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.stop_sequences:
        config["stopSequences"] = list(request.stop_sequences)
    if request.thinking is not None:
        config["thinkingConfig"] = _thinking(request.thinking, model)
    if request.output_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = sent_schema(request.output_schema).schema
    return config


# Gemini 2.x takes a token budget, not a level: an effort maps to these budgets (a "pro"
# model cannot turn thinking off, so its least is the smallest budget it accepts).
_EFFORT_BUDGETS: Final = {
    "none": 0,
    "minimal": 0,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
    "xhigh": 24576,
    "max": 24576,
}
_PRO_MINIMAL_BUDGET: Final = 128
_PRO_MAXIMAL_BUDGET: Final = 32768

_LEVELS: Final = ("minimal", "low", "medium", "high")
_FLASH_LEVELS: Final = frozenset(_LEVELS)
_PRO_LEVELS: Final = frozenset({"low", "medium", "high"})
_FIRST_PRO_LEVELS: Final = frozenset({"low", "high"})


def _thinking(thinking: ThinkingConfig, model: str) -> dict[str, Any]:
    # Thought summaries are shown unless refused: `None` (not asked either way) means shown.
    config: dict[str, Any] = {"includeThoughts": thinking.include_thoughts is not False}
    if thinking.budget_tokens is not None:
        config["thinkingBudget"] = thinking.budget_tokens
    elif thinking.effort is not None:
        if _validates_signatures(model):  # Gemini 3 and later: thinkingLevel
            config["thinkingLevel"] = _level(thinking.effort, model)
        else:
            config["thinkingBudget"] = _budget(thinking.effort, model)
    return config


def _level(effort: str, model: str) -> str:
    """The nearest thinking level `model` takes, not above `effort` (else its lowest)."""
    pro = "pro" in model
    levels = _FLASH_LEVELS
    if pro:
        levels = _FIRST_PRO_LEVELS if _version(model) == (3, 0) else _PRO_LEVELS
    wanted = "high" if effort in ("xhigh", "max") else "minimal" if effort == "none" else effort
    candidates = [level for level in _LEVELS[: _LEVELS.index(wanted) + 1] if level in levels]
    return candidates[-1] if candidates else min(levels, key=_LEVELS.index)


def _budget(effort: str, model: str) -> int:
    budget = _EFFORT_BUDGETS[effort]
    if "pro" in model:
        if budget == 0:
            return _PRO_MINIMAL_BUDGET
        if effort in ("xhigh", "max"):
            return _PRO_MAXIMAL_BUDGET
    return budget
