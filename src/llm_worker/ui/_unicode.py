"""Histories written for a browser: refused, naming where, when JSON cannot carry them.

A history built by hand (or kept by a store) may hold text no UTF-8 stream can carry: a lone
surrogate from `os.fsdecode` or a cut UTF-16 string, in a text, a call's arguments, a tool's
result, opaque data. The library's rule for the history a caller gives is to refuse it with
`InvalidMessagesError` naming the place (as a request does before anything is sent); text
a tool or a model produced is made valid where it enters the history instead (U+FFFD). So
`messages_to_ui` and `messages_to_agui` refuse too: what they return is sent as JSON, and a
browser must not get half a history or a broken stream. The place is named by message and
part, never by the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import TypeVar

import orjson

from llm_worker._json import not_unicode
from llm_worker._wide_json import json_bytes
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import Message

__all__ = ("sendable",)

_T = TypeVar("_T")
# Where a path into a part leaves its own field (`input.city`, `media[0]`, `input: a key`).
_INSIDE = re.compile(r"[.\[:]")


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
