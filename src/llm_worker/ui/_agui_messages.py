"""The history as AG-UI 1.0 messages and back, without loss.

Each assistant `Message` becomes its reasoning messages (one per thinking part, opaque data in
`encryptedValue`) and one assistant message: its texts joined in `content`, its calls in
`toolCalls`. The assistant message's `encryptedValue` holds the layout — the order of its
parts, each text's length, each part's opaque data — so the exact parts come back. Tool
results are `tool` messages (`error` set for a failed call).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any, cast

import orjson

from llm_worker._json import as_dict, as_list, as_str, not_unicode
from llm_worker._wide_json import exact_loads, json_bytes
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
from llm_worker.ui._media import agui_media, media_from_agui
from llm_worker.ui._parts import KEY, opaque, rebuild, result_mac, result_proven
from llm_worker.ui._record import Proven
from llm_worker.ui._sign import MAC
from llm_worker.ui._unicode import readable, sendable

__all__ = (
    "encrypted",
    "layout_of",
    "messages_from_agui",
    "messages_to_agui",
    "read_agui",
    "snapshot_messages",
)


def encrypted(data: dict[str, Any]) -> str:
    """Opaque data as the string an `encryptedValue` field holds."""
    return orjson.dumps({KEY: data}).decode()


def _decrypted(value: object) -> dict[str, Any]:
    if not isinstance(value, str):
        return {}
    try:
        return as_dict(as_dict(orjson.loads(value)).get(KEY))
    except orjson.JSONDecodeError:
        return {}  # another producer's value: not ours to read


# -- to the browser ------------------------------------------------------------------------


def messages_to_agui(history: Iterable[Message], *, prefix: str = "m") -> list[dict[str, Any]]:
    """The history as AG-UI messages (ids `<prefix>-<n>`), e.g. for `MESSAGES_SNAPSHOT`.

    Raises:
        InvalidMessagesError: A message holds text that is not valid Unicode (a lone
            surrogate) or a value that is not JSON, named by message, part and field.
    """
    return snapshot_messages(history, prefix=prefix)


def snapshot_messages(
    history: Iterable[Message], *, prefix: str = "m", calls: Mapping[str, object] | None = None
) -> list[dict[str, Any]]:
    """`messages_to_agui`, knowing the arguments of `calls` made before `history` starts.

    Each result is signed over the call it answers (the latest of its id before it): one of
    the history's, else of `calls` (a resumed run's, whose calls its history does not hold);
    a result of a call neither holds goes unsigned.

    Raises:
        InvalidMessagesError: As `messages_to_agui`.
    """
    return sendable(partial(_to_agui, prefix=prefix, calls=calls), history)


def _to_agui(
    history: list[Message], prefix: str, calls: Mapping[str, object] | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    known: dict[str, object] = dict(calls or {})
    for m in history:
        if m.role == "assistant":
            known.update({c.id: c.input for c in m.tool_uses})
            out.extend(_assistant(m, f"{prefix}-{len(out)}"))
            continue
        shown = [p for p in m.content if not isinstance(p, ToolResultPart)]
        if shown:
            out.append({"id": f"{prefix}-{len(out)}", "role": "user", "content": _content(shown)})
        out.extend(
            _tool_message(r, f"{prefix}-{len(out)}-{r.tool_use_id}", known.get(r.tool_use_id))
            for r in m.tool_results
        )
    return out


def _content(parts: Sequence[Part]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts) and len(parts) == 1:
        return cast(TextPart, parts[0]).text
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, ImagePart | DocumentPart):
            out.append(agui_media(p))
        elif isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
    return out


def _tool_message(result: ToolResultPart, ident: str, arguments: object) -> dict[str, Any]:
    message: dict[str, Any] = {"id": ident, "role": "tool", "toolCallId": result.tool_use_id}
    message["content"] = result.content
    if result.media:  # images a tool returned: AG-UI tool content may hold them
        text = [{"type": "text", "text": result.content}]
        message["content"] = text + [agui_media(m) for m in result.media]
    if result.is_error:
        message["error"] = result.content
    # Signed over the call it answers: the browser sends it back as a result the server's
    # tool made. Unsigned when that call is not known.
    mac = None
    if arguments is not None:
        mac = result_mac(
            result.tool_use_id,
            result.name,
            result.content,
            result.is_error,
            result.media,
            arguments=arguments,
        )
    hidden: dict[str, Any] = {} if mac is None else {MAC: mac}
    if result.name:
        hidden["name"] = result.name
    message["encryptedValue"] = encrypted(hidden)
    return message


def _assistant(message: Message, ident: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    layout: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for n, part in enumerate(message.content):
        hidden = opaque(part)
        if isinstance(part, ThinkingPart):
            reasoning = {"id": f"{ident}-r{n}", "role": "reasoning", "content": part.text}
            if hidden:
                reasoning["encryptedValue"] = encrypted(hidden)
            out.append(reasoning)
            layout.append({"type": "thinking"})
        elif isinstance(part, TextPart):
            texts.append(part.text)
            layout.append({"type": "text", "length": len(part.text), **hidden})
        elif isinstance(part, ToolUsePart):
            calls.append(tool_call(part))
            layout.append({"type": "tool_use", "id": part.id})
        elif isinstance(part, ProviderPart):
            layout.append({"type": "provider", "data": part.data, **hidden})
    body: dict[str, Any] = {"id": ident, "role": "assistant", "content": "".join(texts)}
    if calls:
        body["toolCalls"] = calls
    body["encryptedValue"] = encrypted({"layout": layout})
    out.append(body)
    return out


def layout_of(parts: Sequence[Part]) -> str:
    """The `encryptedValue` `messages_to_agui` writes for an assistant message of these parts.

    The layout alone, as the AG-UI encoder writes it at each step's end: the calls' arguments
    and the thinking's and calls' signed fields, which the layout does not hold, are not
    worked out (a tool call's MAC and its arguments' JSON are most of a step's layout cost).
    """
    layout: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ThinkingPart):
            layout.append({"type": "thinking"})
        elif isinstance(part, TextPart):
            layout.append({"type": "text", "length": len(part.text), **opaque(part)})
        elif isinstance(part, ToolUsePart):
            layout.append({"type": "tool_use", "id": part.id})
        elif isinstance(part, ProviderPart):
            layout.append({"type": "provider", "data": part.data, **opaque(part)})
    return encrypted({"layout": layout})


def tool_call(part: ToolUsePart) -> dict[str, Any]:
    """A call as an AG-UI `ToolCall` (opaque data in its `encryptedValue`)."""
    call: dict[str, Any] = {
        "id": part.id,
        "type": "function",
        "function": {"name": part.name, "arguments": json_bytes(part.input).decode()},
    }
    if hidden := opaque(part):
        call["encryptedValue"] = encrypted(hidden)
    return call


# -- from the browser ----------------------------------------------------------------------


def messages_from_agui(messages: Iterable[object]) -> list[Message]:
    """AG-UI messages (`RunAgentInput.messages`) as the history the Worker produced.

    Reasoning messages become the thinking parts of the assistant message after them; an
    assistant message's `encryptedValue` (written by `messages_to_agui` or the stream)
    restores its parts' order and opaque data; consecutive tool messages become one user
    message of results. Activity messages (UI only) are left out, and so are the messages a
    failed run marked (`{"failed": true}` in their `encryptedValue`, sent before `RUN_ERROR`)
    with the results of their calls. Opaque data this server did not sign (or that was
    altered) is dropped (see `signing_key`).

    Raises:
        InvalidMessagesError: A message is not valid, has a role llm-worker does not send
            to a model (system, developer: give the Worker its system prompt instead), or
            holds text that is not valid Unicode (a lone surrogate `json.loads` let
            through), named by message and field.
    """
    return readable(read_agui, messages, "AG-UI")[0]


def read_agui(messages: Iterable[object]) -> tuple[list[Message], Proven]:
    """`messages_from_agui`, and the results in it the server signed.

    Raises:
        InvalidMessagesError: As `messages_from_agui`.
    """
    reader = _Reader()
    for n, raw in enumerate(messages):
        try:
            reader.read(as_dict(raw))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidMessagesError(f"AG-UI message {n} is not valid: {exc}") from exc
    return reader.out, reader.proven


class _Reader:
    def __init__(self) -> None:
        self.out: list[Message] = []
        self.proven = Proven()
        self.failed: set[str] = set()  # calls of messages a failed step left behind
        self.reasoning: list[dict[str, Any]] = []
        self.names: dict[str, str] = {}
        self.calls: dict[str, object] = {}  # each call id's latest arguments, as read

    def read(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if _decrypted(message.get("encryptedValue")).get("failed") is True:
            # A step that failed (`RUN_ERROR`): the Worker kept none of it.
            self.failed.update(str(as_dict(c).get("id")) for c in as_list(message.get("toolCalls")))
            return
        if role == "tool" and str(message.get("toolCallId")) in self.failed:
            return
        if role == "reasoning":
            self.reasoning.append(message)
        elif role == "assistant":
            self.out.append(Message("assistant", self._assistant(message)))
            self.calls.update({c.id: c.input for c in self.out[-1].tool_uses})
            self.reasoning = []
        elif role == "tool":
            self._tool(message)
        elif role == "user":
            self.out.append(Message("user", _user_content(message.get("content"))))
        elif role != "activity":
            raise InvalidMessagesError(
                f"role {role!r:.40} is not supported (user, assistant, tool, reasoning; give a "
                "system prompt to the Worker)"
            )

    def _assistant(self, message: dict[str, Any]) -> list[Part]:
        calls = {str(as_dict(c)["id"]): as_dict(c) for c in as_list(message.get("toolCalls"))}
        for ident, call in calls.items():
            self.names[ident] = str(as_dict(call.get("function")).get("name"))
        layout = [
            as_dict(e) for e in as_list(_decrypted(message.get("encryptedValue")).get("layout"))
        ]
        content = as_str(message.get("content")) or ""
        if not layout:
            layout = [{"type": "thinking"} for _ in self.reasoning]
            layout += [{"type": "text", "length": len(content)}] if content else []
            layout += [{"type": "tool_use", "id": i} for i in calls]
        return _parts(layout, content, list(self.reasoning), calls)

    def _tool(self, message: dict[str, Any]) -> None:
        call_id = str(message["toolCallId"])
        hidden = _decrypted(message.get("encryptedValue"))
        name = as_str(hidden.get("name")) or self.names.get(call_id)
        error = message.get("error")
        content = _tool_content(message.get("content"), call_id)
        text = content if isinstance(content, str) else _joined(content)
        media = [media_from_agui(as_dict(c)) for c in as_list(content) if _is_media(c)]
        part = ToolResultPart(call_id, text, is_error=error is not None, name=name, media=media)
        # Proven only after the call it was signed for: its arguments as the browser sent them.
        if result_proven(part, hidden.get(MAC), self.calls.get(call_id)):
            self.proven.add(part)
        last = self.out[-1] if self.out else None
        if last is not None and last.role == "user" and last.tool_results:
            last.content.append(part)
        else:
            self.out.append(Message("user", [part]))


def _parts(
    layout: list[dict[str, Any]],
    content: str,
    reasoning: list[dict[str, Any]],
    calls: dict[str, dict[str, Any]],
) -> list[Part]:
    parts: list[Part] = []
    at = 0
    for entry in layout:
        kind = entry.get("type")
        if kind == "thinking" and reasoning:
            r = reasoning.pop(0)
            hidden = _decrypted(r.get("encryptedValue"))
            parts.append(rebuild("thinking", {"text": str(r.get("content") or "")}, hidden))
        elif kind == "text":
            # The layout comes back from the browser: a length past the text (edited on the
            # way) or below zero (tampered) must neither repeat text nor make empty parts.
            length = max(0, min(int(entry.get("length") or 0), len(content) - at))
            hidden = {k: v for k, v in entry.items() if k not in ("length", "type")}
            if length or hidden:
                parts.append(rebuild("text", {"text": content[at : at + length]}, hidden))
            at += length
        elif kind == "tool_use" and str(entry.get("id")) in calls:
            parts.append(_call(calls.pop(str(entry["id"]))))
        elif kind == "provider":
            parts.append(rebuild("provider", {"data": as_dict(entry.get("data"))}, entry))
    if at < len(content):  # text the front end added: kept, as a text part of its own
        parts.append(TextPart(content[at:]))
    parts.extend(_call(c) for c in calls.values())
    return parts


def _call(call: dict[str, Any]) -> Part:
    function = as_dict(call.get("function"))
    raw = as_str(function.get("arguments")) or "{}"
    call_id = str(call["id"])
    try:
        args = as_dict(exact_loads(raw))  # an integer past 64 bits keeps its digits
    except orjson.JSONDecodeError:
        if not_unicode(raw, "") is not None:  # given by hand: not broken JSON, not Unicode
            shown = call_id if len(call_id) <= 80 else call_id[:80] + "…"
            raise InvalidMessagesError(
                f"the arguments of tool call {shown!r} hold text that is not valid Unicode "
                "(a lone surrogate)"
            ) from None
        args = {}  # the Worker keeps a call with broken arguments with empty ones too
    visible = {"id": call_id, "name": str(function["name"]), "input": args}
    return rebuild("tool_use", visible, _decrypted(call.get("encryptedValue")))


def _user_content(content: object) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        # A number, an object, `true` or nothing: read as no parts, the model would be
        # sent an empty user turn in place of what the browser meant.
        raise InvalidMessagesError(
            "a user message's content must be a string or a list of text, image and "
            f"document parts, not {type(content).__name__}"
        )
    parts: list[Part] = []
    for item in cast("list[Any]", content):
        entry = as_dict(item)
        kind = entry.get("type")
        if kind == "text":
            parts.append(TextPart(str(entry.get("text") or "")))
        elif kind in ("image", "document"):
            parts.append(media_from_agui(entry))
        else:
            raise InvalidMessagesError(
                f"user content of type {kind!r} is not supported by llm_worker.ui yet"
            )
    return parts


def _tool_content(content: object, call_id: str) -> str | list[Any]:
    """A tool message's content: a string, or a list of text, image and document parts.

    Anything else (a number, an object, parts of another kind) is refused rather than read
    as an empty output: the model would be told the tool returned nothing.

    Raises:
        InvalidMessagesError: The content is of no such shape.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        items = cast("list[Any]", content)
        if all(as_dict(c).get("type") in ("text", "image", "document") for c in items):
            return items
    shown = call_id if len(call_id) <= 80 else call_id[:80] + "…"
    raise InvalidMessagesError(
        f"the tool message for call {shown!r} has content that is neither a string nor a list"
        " of text, image and document parts"
    )


def _is_media(item: object) -> bool:
    return as_dict(item).get("type") in ("image", "document")


def _joined(content: object) -> str:
    return "".join(str(as_dict(c).get("text") or "") for c in as_list(content))
