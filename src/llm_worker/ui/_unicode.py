"""Histories written for a browser: refused, naming where, when JSON cannot carry them.

A history built by hand (or kept by a store) may hold text no UTF-8 stream can carry: a lone
surrogate from `os.fsdecode` or a cut UTF-16 string, in a text, a call's arguments, a tool's
result, opaque data. The library's rule for the history a caller gives is to refuse it with
`InvalidMessagesError` naming the place (as a request does before anything is sent); text
a tool or a model produced is made valid where it enters the history instead (U+FFFD). So
`messages_to_ui` and `messages_to_agui` refuse too: what they return is sent as JSON, and a
browser must not get half a history or a broken stream. The place is named by message and
part, never by the text.

The other way, `messages_from_ui` and `messages_from_agui` refuse the same text in what a
browser sent (`readable`): the adapters parse a body with orjson, which refuses it, but a
caller who parsed one with `json.loads` gets lone surrogates through, and the history would
fail only at its next request, far from the cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import TypeVar

import orjson

from llm_worker._json import json_type, lone_surrogate, not_unicode
from llm_worker._wide_json import json_bytes
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import Message

__all__ = ("readable", "sendable")

_T = TypeVar("_T")
# Where a path into a part leaves its own field (`input.city`, `media[0]`, `input: a key`).
_INSIDE = re.compile(r"[.\[:]")
# A key of a browser's message shown in an error: a protocol's field name, not a value.
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,39}")
_Path = tuple[str | int, ...]


def sendable(build: Callable[[list[Message]], _T], history: Iterable[Message]) -> _T:
    """`build(history)`, made sure JSON can carry it whole.

    Raises:
        InvalidMessagesError: A message holds text that is not valid Unicode (a lone
            surrogate) or a value that is not JSON: named by message, part and field.
    """
    messages = list(history)
    try:
        out = build(messages)
        # One pass over what the browser is sent (about 2 % of building it): texts go into
        # it as they are, and a lone surrogate in one would fail only where it is written.
        # An integer past 64 bits passes: the streams write it with its digits.
        json_bytes(out)
    except orjson.JSONEncodeError as exc:
        raise _refused(messages, exc) from None
    return out


def _refused(messages: Sequence[Message], exc: Exception) -> InvalidMessagesError:
    """The error naming the first message (and part) JSON cannot carry; walked on failure."""
    for i, message in enumerate(messages):
        try:
            data = message.to_dict()  # a value that is not JSON data (a cycle, a set)
        except InvalidMessagesError as error:
            return InvalidMessagesError(f"message {i}: {error}")
        for j, part in enumerate(message.content):
            # The part itself, not `to_dict`'s copy: pydantic writes a key's lone surrogate
            # as U+FFFD but leaves a value's as it is.
            where = not_unicode(asdict(part), "")
            if where is not None:
                field = _INSIDE.split(where, maxsplit=1)[0]
                return InvalidMessagesError(
                    f"message {i}, part {j} ({part.type}): its `{field}` holds text that is "
                    "not valid Unicode (a lone surrogate), which no browser's stream can "
                    "carry; replace it first (e.g. text.encode('utf-8', 'replace').decode())"
                )
        try:
            json_bytes(data)
        except orjson.JSONEncodeError as error:  # nesting past orjson's depth
            return InvalidMessagesError(f"message {i} holds a value that is not JSON: {error}")
    return InvalidMessagesError(f"the messages cannot be written as JSON: {exc}")


def readable(build: Callable[[list[object]], _T], messages: Iterable[object], protocol: str) -> _T:
    """`build(messages)`, refused if a string in what the browser sent is not valid Unicode.

    One `json_bytes` pass over the messages once they are read (the place is walked only on
    failure). What orjson refuses for another reason (an object no JSON has) is the reader's
    to judge, as before; an integer past 64 bits passes.

    Raises:
        InvalidMessagesError: The messages are not a list (null, a whole body), or a string
            or key holds a lone surrogate: named by message and field (`UI message 3: text
            in its `parts[2].text` ...`), never by the text.
    """
    if not _a_list(messages):
        raise InvalidMessagesError(
            f"the {protocol} messages must be a list of messages, not {json_type(messages)}"
        )
    items = list(messages)
    out = build(items)
    try:
        json_bytes(items)
    except orjson.JSONEncodeError:
        for n, message in enumerate(items):
            found = lone_surrogate(message)
            if found is not None:
                raise _not_unicode(f"{protocol} message {n}", *found) from None
    return out


def _a_list(given: object) -> bool:
    # A body's `messages` missing (None) or the body itself: read item by item, its
    # characters or keys would be refused as messages one by one, or a bare TypeError.
    return isinstance(given, Iterable) and not isinstance(given, str | bytes | Mapping)


def _not_unicode(message: str, path: _Path, key: bool) -> InvalidMessagesError:
    # Named down to a field of the message or of one of its items (`parts[2].input`):
    # deeper keys are a value's (a call's argument names), not the protocol's fields.
    shown = ""
    for i, step in enumerate(path[:3]):
        if isinstance(step, int) != (i == 1):
            break
        if isinstance(step, int):
            shown += f"[{step}]"
        elif _FIELD.fullmatch(step) is None:
            break
        else:
            shown += f".{step}" if shown else step
    where = f"its `{shown}`" if shown else "it"
    return InvalidMessagesError(
        f"{message}: {'a key' if key else 'text'} in {where} is not valid Unicode (a lone "
        "surrogate), which no model's request can carry; replace it first (e.g. "
        "text.encode('utf-8', 'replace').decode())"
    )
