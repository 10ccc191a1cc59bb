"""The neutral `Request` as a Gemini `streamGenerateContent` body.

- Messages become `contents` with roles `user` / `model`; adjacent messages of one role are
  merged (Gemini expects the roles to alternate) and messages left with no part are skipped.
  A tool call in a user message or a tool result in an assistant message is refused
  (`InvalidMessagesError`): Gemini would reject the turn.
- Tool calls become `functionCall` parts (`name`, `args`), tool results `functionResponse`
  parts (`name`, `response: {"output": …}` or `{"error": …}` for a failed call, the keys the
  Gemini documentation names). A result without `name` takes it from the call it answers.
  Call ids are not sent: Gemini matches results to calls by name and order, and the ids in
  the history are this library's own (see `gemini.py`).
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
- `generationConfig`: `maxOutputTokens`, `temperature`, `stopSequences`, `thinkingConfig`
  (`includeThoughts`, and `thinkingBudget` from `budget_tokens`, or else from `effort`: a
  `thinkingLevel` on Gemini 3 and later, a budget on earlier models, which know no level;
  Gemini rejects both at once). `request.options` is deep-merged last.
"""

from __future__ import annotations

import re
from typing import Any, Final

from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
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
from llm_worker.providers._gemini_schema import gemini_schema

__all__ = ("SKIP_SIGNATURE", "build_body")

SKIP_SIGNATURE: Final = "skip_thought_signature_validator"
"""Google's documented placeholder for a function call whose real signature is unknown."""

_MODES: Final = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
_GENERATION: Final = re.compile(r"(?:^|/)gemini-(\d+)")


def build_body(request: Request, model: str) -> dict[str, Any]:
    """The Gemini JSON body for a neutral request sent to `model`."""
    body: dict[str, Any] = {"contents": _contents(request.messages, model)}
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
    names = {p.id: p.name for m in messages for p in m.content if isinstance(p, ToolUsePart)}
    own = Origin("gemini", model)
    contents: list[dict[str, Any]] = []
    for message in messages:
        _check_roles(message)
        parts = [p for p in (_part(part, own, names) for part in message.content) if p]
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


def _part(part: Part, own: Origin, names: dict[str, str]) -> dict[str, Any] | None:
    if isinstance(part, ToolResultPart):
        return {"functionResponse": _response(part, names)}
    if isinstance(part, ProviderPart):
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
        out = {"functionCall": {"name": part.name, "args": part.input}}
    if signature is not None:
        out["thoughtSignature"] = signature
    return out


def _response(part: ToolResultPart, names: dict[str, str]) -> dict[str, Any]:
    name = part.name or names.get(part.tool_use_id)
    if not name:
        raise InvalidMessagesError(
            f"the tool result for call {part.tool_use_id!r} has no name and no tool call in "
            "the history has that id: Gemini needs the function's name"
        )
    key = "error" if part.is_error else "output"
    return {"name": name, "response": {key: part.content}}


def _validates_signatures(model: str) -> bool:
    # Gemini 3 and later: thought signatures are checked, and thinking takes a level.
    match = _GENERATION.search(model)
    return match is not None and int(match.group(1)) >= 3


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
    return config


# Gemini 2.x takes a token budget, not a level: an effort maps to these budgets (a "pro"
# model cannot turn thinking off, so its least is the smallest budget it accepts).
_EFFORT_BUDGETS: Final = {"minimal": 0, "low": 1024, "medium": 8192, "high": 24576}
_PRO_MINIMAL_BUDGET: Final = 128


def _thinking(thinking: ThinkingConfig, model: str) -> dict[str, Any]:
    # Thought summaries are shown unless refused: `None` (not asked either way) means shown.
    config: dict[str, Any] = {"includeThoughts": thinking.include_thoughts is not False}
    if thinking.budget_tokens is not None:
        config["thinkingBudget"] = thinking.budget_tokens
    elif thinking.effort is not None:
        if _validates_signatures(model):  # Gemini 3 and later: thinkingLevel
            config["thinkingLevel"] = thinking.effort
        else:
            budget = _EFFORT_BUDGETS[thinking.effort]
            if budget == 0 and "pro" in model:
                budget = _PRO_MINIMAL_BUDGET
            config["thinkingBudget"] = budget
    return config
