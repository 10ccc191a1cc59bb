"""A part's opaque provider data (signatures, item ids, origins) as JSON a browser carries back.

Both protocols let a message part carry data the front end keeps without showing it (Vercel
`providerMetadata`, AG-UI `encryptedValue`); this module turns a neutral part's non-visible
fields into such a JSON object, and rebuilds the part from the visible fields and that object.

The object is signed (`_sign`): what comes back unsigned or altered is dropped, so the part
reaches no provider as the model's own (a part without an origin is sent nowhere). The
signature binds the opaque fields to the part's kind, and a call's to its id and name; the
visible text is not bound (the encoders never hold it), and a browser may edit it as it may
write any message.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any, cast

import orjson

from llm_worker.messages import (
    MediaPart,
    Message,
    Origin,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.state import PauseState
from llm_worker.ui._sign import MAC, current

__all__ = (
    "KEY",
    "WITHDRAWN",
    "media_json",
    "opaque",
    "paused_calls",
    "rebuild",
    "result_mac",
    "result_proven",
)

KEY = "llmWorker"
"""The key under which llm-worker's data travels in `providerMetadata` and custom fields."""

WITHDRAWN = "data-llm-worker-withdrawn"
"""The Vercel data part that ends a withdrawn step: the Worker kept none of its parts."""

_VISIBLE = frozenset({"type", "text", "id", "name", "input", "data"})
_LEAVES = frozenset({str, int, float, bool, type(None)})


# Per part type, its hidden fields that hold a string, an `Origin` or nothing, in the order
# `to_dict` writes them; a part with anything richer set (citations, a caller) takes the
# general path. Both encoders read every part's hidden fields at least once (at its block's
# stop), and the general path is a pydantic serialisation of a whole message (~6 µs).
_PLAIN: dict[type, tuple[str, ...]] = {
    TextPart: ("signature", "item_id", "origin", "phase"),
    ThinkingPart: ("signature", "redacted", "item_id", "origin"),
    ToolUsePart: ("signature", "item_id", "origin"),
}


_KINDS: dict[type, str] = {
    TextPart: "text",
    ThinkingPart: "thinking",
    ToolUsePart: "tool_use",
    ProviderPart: "provider",
}


def opaque(part: Part) -> dict[str, Any]:
    """The part's fields a front end does not show (empty ones left out), signed."""
    fields = _hidden(part)
    if fields:
        kind = _KINDS.get(type(part), type(part).__name__)
        fields[MAC] = current().mac(kind, _bound_of(part), fields)
    return fields


def _bound_of(part: Part) -> object:
    if isinstance(part, ToolUsePart):
        return [part.id, part.name]
    if isinstance(part, ProviderPart):
        return part.data
    return None


def _bound(kind: str, visible: dict[str, Any]) -> object:
    if kind == "tool_use":
        return [visible.get("id"), visible.get("name")]
    if kind == "provider":
        return visible.get("data")
    return None


def _hidden(part: Part) -> dict[str, Any]:
    names = _PLAIN.get(type(part))
    if names is None or _rich(part):
        return _serialised(part)
    fields: dict[str, Any] = {}
    for name in names:
        value = getattr(part, name)
        if value is None:
            continue
        if type(value) is str:
            fields[name] = value
        elif type(value) is Origin and type(value.provider) is str and type(value.model) is str:
            fields[name] = {"provider": value.provider, "model": value.model}
        else:
            return _serialised(part)
    return fields


def _rich(part: Part) -> bool:
    if isinstance(part, TextPart):
        return bool(part.citations)
    if isinstance(part, ToolUsePart):
        # The general path also checks that the input is JSON (and raises if not).
        return part.caller is not None or not _json_data(part.input)
    return False


def _json_data(value: object) -> bool:
    """Whether a value is plain JSON data: dicts with string keys, lists, strings, numbers."""
    stack = [value]
    seen: set[int] = set()  # a container met twice (a cycle): the general path's to judge
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if id(item) in seen:
                return False
            seen.add(id(item))
        if kind is dict:
            for key, inner in cast("dict[object, object]", item).items():
                if type(key) is not str:
                    return False
                stack.append(inner)
        elif kind is list:
            stack.extend(cast("list[object]", item))
        elif kind not in _LEAVES or (kind is float and not math.isfinite(cast(float, item))):
            return False
    return True


def _serialised(part: Part) -> dict[str, Any]:
    content: list[Any] = Message("assistant", [part]).to_dict()["content"]
    fields: dict[str, Any] = content[0]
    return {k: v for k, v in fields.items() if k not in _VISIBLE and v not in (None, [], {})}


def rebuild(kind: str, visible: dict[str, Any], hidden: object) -> Part:
    """A part of type `kind` from its visible fields and the `opaque` data sent back.

    Raises:
        InvalidMessagesError: The fields do not make a valid part.
    """
    fields: dict[str, Any] = {}
    if isinstance(hidden, dict):
        fields.update({str(k): v for k, v in hidden.items() if k not in _VISIBLE})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if kind in _SIGNED and fields and not current().verify(kind, _bound(kind, visible), fields):
        fields = {}  # unsigned or altered: the browser's, not the provider's
    fields.pop(MAC, None)
    fields.update(visible)
    fields["type"] = kind
    return Message.from_dict({"role": "assistant", "content": [fields]}).content[0]


_SIGNED = frozenset(_KINDS.values())


def result_mac(
    call_id: str,
    name: str | None,
    content: str,
    is_error: bool,
    media: Sequence[MediaPart] = (),
    *,
    arguments: object,
) -> str | None:
    """The signature of a tool result the server's tool made (its call, name, text, media).

    `arguments` are the call's as the history holds them (the model's, which the browser
    shows and sends back with the result; not a before_tool_call hook's rewrite): the
    signature proves the result of that one call, not of a later call reusing its id.
    `None` (leave the result unsigned) for arguments no browser could send back (not JSON).
    """
    bound = _result_bound(call_id, name, content, is_error, media, arguments=arguments)
    try:
        return current().mac("tool_result", bound, {})
    except (TypeError, RecursionError, orjson.JSONEncodeError):
        return None


def result_proven(result: ToolResultPart, mac: object, arguments: object) -> bool:
    """Whether `mac` (sent back with `result`) proves the server's tool made it.

    `arguments` are those of the call the browser sends `result` with (`None`: it sent no
    call of its id, so nothing is proven).
    """
    if arguments is None:
        return False
    bound = _result_bound(
        result.tool_use_id,
        result.name,
        result.content,
        result.is_error,
        result.media,
        arguments=arguments,
    )
    return current().verify("tool_result", bound, {MAC: mac})


def paused_calls(paused: PauseState | None) -> dict[str, object]:
    """The arguments of the calls a pause waits on, by id, as its history holds them.

    The model's (a resumed run's results answer these calls; the browser shows them), not
    what a before_tool_call hook or an edited approval made of them.
    """
    if paused is None or not paused.history:
        return {}
    return {c.id: c.input for c in paused.history[-1].tool_uses}


def _result_bound(
    call_id: str,
    name: str | None,
    content: str,
    is_error: bool,
    media: Sequence[MediaPart],
    *,
    arguments: object,
) -> list[object]:
    # The images and documents are bound too: the model reads them as the tool's output as
    # much as its text. Each by its bytes' digest (not the base64 the browser carries).
    files = [
        [
            m.type,
            m.media_type,
            m.url,
            None if m.data is None else hashlib.sha256(m.data).hexdigest(),
        ]
        for m in media
    ]
    return [call_id, name or "", content, is_error, arguments, *([files] if files else [])]


def media_json(media: Sequence[MediaPart]) -> list[Any]:
    """Images and documents as JSON (bytes in base64), as a tool result's `media` saves them."""
    part = ToolResultPart("", "", media=list(media))
    content: list[Any] = Message("user", [part]).to_dict()["content"]
    return content[0]["media"]
