"""The history as the `ai` package's `UIMessage`s and back, without loss.

One assistant `UIMessage` holds a whole run: each model request is a step (a `step-start`
part), each tool call one `tool-<name>` part that carries its result. Going back, each step
becomes an assistant `Message` followed by a user message with its results, as the Worker
keeps them; opaque provider data comes back from `providerMetadata.llmWorker`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from llm_worker._json import as_dict, as_list, as_str
from llm_worker._wide_json import json_bytes
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.state import Decision
from llm_worker.ui._media import data_url, media_from_url, media_hidden
from llm_worker.ui._parts import (
    KEY,
    WITHDRAWN,
    media_json,
    opaque,
    rebuild,
    result_mac,
    result_proven,
)
from llm_worker.ui._record import Proven
from llm_worker.ui._sign import MAC
from llm_worker.ui._unicode import readable, sendable

__all__ = ("DENIED", "decisions_from_ui", "messages_from_ui", "messages_to_ui", "read_ui")

DENIED = "Denied: "
"""How the Worker's result of a denied call begins (`Decision.deny`)."""
_DEFAULT_DENIAL = "denied by the user"
_IGNORED = frozenset({"step-start", "source-url", "source-document"})


# -- from the browser ----------------------------------------------------------------------


def messages_from_ui(ui_messages: Iterable[object]) -> list[Message]:
    """`UIMessage`s (as `useChat` sends them) as the history the Worker produced.

    A user's text and `file` parts become text, image (`image/*`) and document parts, in
    order (a `data:` URL is decoded and checked). Text and reasoning parts become text and
    thinking parts with their signatures and item ids
    (from `providerMetadata.llmWorker`); each tool part becomes the call and, once it has one,
    its result (output, error or denial). Parts no model reads (`step-start`, sources, `data-*`
    parts other than llm-worker's provider blocks) are left out; a tool call still waiting
    for its input or its approval is kept without a result. Opaque data this server did not
    sign (or that was altered) is dropped (see `signing_key`).

    Raises:
        InvalidMessagesError: A message is not a UIMessage (no role or parts, an unknown
            role), a user's file is not of its media type (`MediaError`), an assistant's
            message holds a file, or a string holds text that is not valid Unicode (a lone
            surrogate `json.loads` let through), named by message and field.
    """
    return readable(read_ui, ui_messages, "UI")[0]


def read_ui(ui_messages: Iterable[object]) -> tuple[list[Message], Proven]:
    """`messages_from_ui`, and the results in it the server signed.

    Raises:
        InvalidMessagesError: As `messages_from_ui`.
    """
    out: list[Message] = []
    proven = Proven()
    for n, raw in enumerate(ui_messages):
        try:
            out.extend(_message(as_dict(raw), proven))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidMessagesError(f"UI message {n} is not valid: {exc}") from exc
    return out, proven


def _message(message: dict[str, Any], proven: Proven) -> list[Message]:
    role = message.get("role")
    given: object = message.get("parts")
    if given is not None and not isinstance(given, list):
        # A string, an object, a number: read as no parts, the message was dropped without a
        # word (the model got no user turn in place of what the browser meant).
        raise TypeError(f"its parts must be a list, not {type(given).__name__}")
    parts = [as_dict(p) for p in as_list(message.get("parts"))]
    if role == "user":
        content = [_user_part(p) for p in parts if _kind(p) in ("text", "file")]
        return [Message("user", content)] if content else []
    if role == "assistant":
        return _assistant(parts, proven)
    raise InvalidMessagesError(
        f"role {role!r:.40} is not supported (user or assistant; give a system prompt to the "
        "Worker)"
    )


def _kind(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"a part has no type: {part!r}")
    return kind


def _user_part(p: dict[str, Any]) -> Part:
    if _kind(p) == "text":
        return TextPart(str(p["text"]))
    hidden = _hidden(p.get("providerMetadata"))
    name = as_str(p.get("filename"))
    url, media_type = str(p["url"]), as_str(p.get("mediaType"))
    return media_from_url(url, media_type, name=name, detail=hidden.get("detail"))


def _assistant(parts: list[dict[str, Any]], proven: Proven) -> list[Message]:
    out: list[Message] = []
    calls: list[Part] = []
    results: list[Part] = []
    for p in parts:
        kind = _kind(p)
        if kind == "step-start" and calls:
            _flush(out, calls, results)
            calls, results = [], []
        elif kind in ("data-llm-worker-error", "data-llm-worker-cancelled", WITHDRAWN):
            calls, results = [], []  # the step failed or was cancelled: the Worker kept none of it
        elif kind == "file":
            raise InvalidMessagesError("files an assistant generated are not supported yet")
        elif kind not in _IGNORED:
            _part(p, kind, calls, results, proven)
    _flush(out, calls, results)
    return out


def _flush(out: list[Message], parts: list[Part], results: list[Part]) -> None:
    if parts:
        out.append(Message("assistant", parts))
    if results:
        out.append(Message("user", results))


def _hidden(meta: object) -> dict[str, Any]:
    return as_dict(as_dict(meta).get(KEY))


def _part(
    p: dict[str, Any], kind: str, parts: list[Part], results: list[Part], proven: Proven
) -> None:
    hidden = _hidden(p.get("providerMetadata"))
    if "aborted" in hidden:
        return  # a block the provider broke off: the Worker never keeps it
    if kind == "text":
        text = str(p.get("text") or "")
        if text or hidden:
            parts.append(rebuild("text", {"text": text}, hidden))
    elif kind == "reasoning":
        parts.append(rebuild("thinking", {"text": str(p.get("text") or "")}, hidden))
    elif kind == "data-llm-worker-provider":
        data = as_dict(p.get("data"))
        parts.append(rebuild("provider", {"data": as_dict(data.get("data"))}, data))
    elif kind.startswith("tool-") or kind == "dynamic-tool":
        _tool(p, kind, parts, results, proven)


def _tool(
    p: dict[str, Any], kind: str, parts: list[Part], results: list[Part], proven: Proven
) -> None:
    state = p.get("state")
    hidden = _hidden(p.get("callProviderMetadata"))
    if state == "input-streaming" or "aborted" in hidden:
        return  # never a complete call
    name = str(p["toolName"]) if kind == "dynamic-tool" else kind[len("tool-") :]
    call_id = str(p["toolCallId"])
    broken = state == "output-error" and p.get("input") is None and "rawInput" in p
    args = {} if broken else as_dict(p.get("input"))
    call = rebuild("tool_use", {"id": call_id, "name": name, "input": args}, hidden)
    parts.append(call)
    hidden = _hidden(p.get("resultProviderMetadata"))
    result = _result(p, state, call_id, name, hidden)
    if result is not None:
        results.append(result)
        # Proven only beside the call it was signed for: its arguments as this part shows them.
        arguments = call.input if isinstance(call, ToolUsePart) else None
        if result_proven(result, hidden.get(MAC), arguments):
            proven.add(result)


def _result(
    p: dict[str, Any], state: object, call_id: str, name: str, hidden: dict[str, Any]
) -> ToolResultPart | None:
    if state == "output-available":
        output = p.get("output")
        text = output if isinstance(output, str) else _output_json(output, call_id)
        visible = {"tool_use_id": call_id, "content": text, "name": name}
        return _tool_result(visible, hidden)
    if state == "output-error":
        text = str(p.get("errorText") or "")
        visible = {"tool_use_id": call_id, "content": text, "name": name, "is_error": True}
        return _tool_result(visible, hidden)
    if state == "output-denied":
        reason = as_str(as_dict(p.get("approval")).get("reason")) or _DEFAULT_DENIAL
        return ToolResultPart(call_id, DENIED + reason, is_error=True, name=name)
    return None


def _output_json(output: object, call_id: str) -> str:
    try:
        return json_bytes(output).decode()  # an integer past 64 bits with its digits
    except orjson.JSONEncodeError as exc:  # given by hand: a lone surrogate, a set
        shown = call_id if len(call_id) <= 80 else call_id[:80] + "…"
        raise InvalidMessagesError(
            f"the output of tool call {shown!r} is not JSON UTF-8 can carry: {exc}"
        ) from None


def _tool_result(visible: dict[str, Any], hidden: dict[str, Any]) -> ToolResultPart:
    part = rebuild("tool_result", visible, {"media": hidden.get("media") or []})
    assert isinstance(part, ToolResultPart)  # rebuild makes the kind it is given
    return part


def decisions_from_ui(ui_messages: list[object]) -> dict[str, Decision]:
    """The approvals answered in the last message (an assistant's), by call id.

    A tool part in state `approval-responded` carries `approval: {id, approved, reason}`;
    llm-worker also reads an optional `approval.input` (edited arguments) the `ai` client
    passes through untouched.
    """
    last = as_dict(ui_messages[-1]) if ui_messages else {}
    if last.get("role") != "assistant":
        # The client answers a pause by posting the assistant message last; after it the
        # user's new message leaves the answer behind (a resume cut off: nothing waits).
        return {}
    decisions: dict[str, Decision] = {}
    for p in as_list(last.get("parts")):
        part = as_dict(p)
        if part.get("state") != "approval-responded":
            continue
        approval = as_dict(part.get("approval"))
        call_id = str(part.get("toolCallId"))
        if approval.get("approved") is True:
            edited = approval.get("input")
            decisions[call_id] = Decision.approve(input=as_dict(edited) if edited else None)
        else:
            decisions[call_id] = Decision.deny(as_str(approval.get("reason")) or _DEFAULT_DENIAL)
    return decisions


# -- to the browser ------------------------------------------------------------------------


def messages_to_ui(history: Iterable[Message]) -> list[dict[str, Any]]:
    """The history as `UIMessage`s, to show a stored conversation (`useChat({messages})`).

    The inverse of `messages_from_ui`: a run's assistant messages and their tool results
    become one assistant `UIMessage` with a `step-start` per model request.

    Raises:
        InvalidMessagesError: A message holds text that is not valid Unicode (a lone
            surrogate) or a value that is not JSON, named by message, part and field.
    """
    return sendable(_to_ui, history)


def _to_ui(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    answers = _answers(messages)
    for m, results in zip(messages, answers, strict=True):
        if m.role == "user":
            shown = [_ui_user_part(p) for p in m.content if not isinstance(p, ToolResultPart)]
            if shown:
                out.append({"id": f"msg_{len(out)}", "role": "user", "parts": shown})
            continue
        if not out or out[-1]["role"] != "assistant":
            out.append({"id": f"msg_{len(out)}", "role": "assistant", "parts": []})
        parts: list[dict[str, Any]] = out[-1]["parts"]
        parts.append({"type": "step-start"})
        parts.extend(_ui_part(p, results) for p in m.content if not isinstance(p, ToolResultPart))
    return out


def _answers(messages: list[Message]) -> list[dict[str, ToolResultPart]]:
    """Per message, the results of its calls: those in the user messages up to the next answer.

    By position, not by id alone: a provider reuses call ids (`call_0` each turn), and an
    earlier turn's call must show its own result, never a later call's (signed over its
    arguments, that would prove the later result for it).
    """
    answers: list[dict[str, ToolResultPart]] = []
    current: dict[str, ToolResultPart] = {}
    for m in messages:
        if m.role == "assistant":
            current = {}
        else:
            for r in m.tool_results:
                current.setdefault(r.tool_use_id, r)
        answers.append(current)  # an assistant message's dict fills as its answers follow
    return answers


def _ui_user_part(part: Part) -> dict[str, Any]:
    if isinstance(part, ImagePart | DocumentPart):
        out: dict[str, Any] = {"type": "file", "mediaType": part.media_type, "url": data_url(part)}
        if isinstance(part, DocumentPart) and part.name:
            out["filename"] = part.name
        if hidden := media_hidden(part):
            out["providerMetadata"] = {KEY: hidden}
        return out
    assert isinstance(part, TextPart), part  # a user message holds text, media and results
    return {"type": "text", "text": part.text}


def _ui_part(part: Part, results: dict[str, ToolResultPart]) -> dict[str, Any]:
    hidden = opaque(part)
    meta = {"providerMetadata": {KEY: hidden}} if hidden else {}
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text, "state": "done", **meta}
    if isinstance(part, ThinkingPart):
        return {"type": "reasoning", "text": part.text, "state": "done", **meta}
    if isinstance(part, ProviderPart):
        return {"type": "data-llm-worker-provider", "data": hidden | {"data": part.data}}
    assert isinstance(part, ToolUsePart)
    out: dict[str, Any] = {"type": f"tool-{part.name}", "toolCallId": part.id, "input": part.input}
    if hidden:
        out["callProviderMetadata"] = {KEY: hidden}
    return out | _ui_result(part, results.get(part.id))


def _ui_result(call: ToolUsePart, result: ToolResultPart | None) -> dict[str, Any]:
    call_id = call.id
    if result is None:
        return {"state": "input-available"}
    if result.is_error and result.content.startswith(DENIED):
        reason = result.content[len(DENIED) :]
        approval = {"id": f"approval_{call_id}", "approved": False, "reason": reason}
        return {"state": "output-denied", "approval": approval}
    mac = result_mac(
        call_id, result.name, result.content, result.is_error, result.media, arguments=call.input
    )
    hidden: dict[str, Any] = {} if mac is None else {MAC: mac}
    if result.media:
        hidden["media"] = media_json(result.media)
    extra = {"resultProviderMetadata": {KEY: hidden}}
    if result.is_error:
        return {"state": "output-error", "errorText": result.content, **extra}
    return {"state": "output-available", "output": result.content, **extra}
