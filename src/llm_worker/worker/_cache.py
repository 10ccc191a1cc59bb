"""Prompt caching by default, and why a request missed the cache.

The Worker gives each request its conversation's cache key (`Request.prompt_cache`), from
which each client asks for caching its own way (Anthropic breakpoints, OpenAI
`prompt_cache_key`). The key is a hash of the conversation's first message, so it is the same
for every request of a run, after a pause resumed in another process, and for a Worker rebuilt
from a stored history.

A provider caches a request's prefix; the next request reads it back only if it starts with
exactly the same tools, system prompt and messages. `CacheWatch` compares each request with
the previous one — the same message objects compare by identity at C speed, so a long run
pays nothing per turn for it — and, where they part, makes a `CacheMiss` naming the place.
A message an on_message_send hook edited in place is the same object with other content:
the hooks' messages note what a hook read (`_lent.Lent`), and those messages are compared
with their `sent_print` from before the hooks ran.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import operator
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias, cast

import orjson

from llm_worker._log import logger
from llm_worker._run_events import CacheMiss
from llm_worker.messages import (
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)

if TYPE_CHECKING:
    from llm_worker.messages import Message, Request, ToolSpec

__all__ = ("CacheWatch", "Edited", "SentPrint", "conversation_key", "sent_print")

_log = logger("llm_worker")
_SHOWN = 40  # characters of each side a CacheMiss shows (in process only)
# A miss's hashes are keyed by this process's own secret: logged, an unkeyed hash of a short
# text (a PIN, a date in a tool result) would give the text back to whoever tries candidates.
_MISS_KEY = secrets.token_bytes(16)


_PartPrint: TypeAlias = tuple[Part, str, object]
SentPrint: TypeAlias = tuple[str, tuple[_PartPrint, ...]]
"""What a message says, as sent: its role, and per part the part, its text and its fields."""


def sent_print(message: Message) -> SentPrint:
    """What `message` says now.

    Another print after an edit in place: a part's text or any other field it is sent with
    (ids, signatures, a result's media, a provider block's data), a part replaced, added or
    taken out.
    """
    return message.role, tuple(map(_part_print, message.content))


def _part_print(part: Part) -> _PartPrint:
    # The part itself (replaced: another object, compared by value), its text, and its other
    # fields as they are now. A part compares equal to itself however it was edited, so the
    # fields are taken out (at C speed): the strings are the part's own (no copy), what is
    # mutable inside (a call's input, a block's data, a result's media, citations) a copy —
    # an empty one costs nothing: a hook that reads every message pays this per message.
    if type(part) is TextPart:
        rest = _TEXT(part)
        return part, part.text, (rest, _items(part.citations)) if part.citations else rest
    if type(part) is ToolResultPart:
        rest = _RESULT(part)
        return part, part.content, (rest, _items(part.media)) if part.media else rest
    if type(part) is ToolUsePart:
        rest = _CALL(part) if part.caller is None else (_CALL(part), _json(part.caller))
        return part, _part_text(part), rest
    if type(part) is ThinkingPart:
        return part, part.text, _THINKING(part)
    if type(part) is ProviderPart:
        return part, _json(part.data), part.origin
    return part, "", _fields(part)  # an image or a document: edited in place, it is sent so


_TEXT = operator.attrgetter("signature", "item_id", "phase", "origin")
_THINKING = operator.attrgetter("signature", "redacted", "item_id", "origin")
_CALL = operator.attrgetter("id", "signature", "item_id", "origin")
_RESULT = operator.attrgetter("tool_use_id", "is_error", "name")


def _items(items: Sequence[object]) -> tuple[object, ...]:
    return tuple(map(_fields, items))


def _fields(item: object) -> tuple[object, ...]:
    """A media part's or citation's fields now (a dict as its JSON)."""
    values = _getter(type(item))(item)
    return tuple(_json(cast("object", v)) if isinstance(v, dict) else v for v in values)


@functools.cache
def _getter(kind: type) -> Callable[[object], tuple[object, ...]]:
    names = [f.name for f in dataclasses.fields(kind)]
    getter = operator.attrgetter(*names)
    if len(names) == 1:  # attrgetter of one name gives the value, not a tuple
        return lambda item: (getter(item),)
    return getter


def _json(data: object) -> str:
    try:
        return orjson.dumps(data).decode()
    except TypeError:  # not JSON data (or a lone surrogate): the request builder will say so
        return repr(data)


@dataclass(slots=True)
class Edited:
    """A message the on_message_send hooks edited in place.

    Attributes:
        index: Where it is in the messages sent.
        message: The message (its content now).
        before: Its print before the hooks ran: what the previous request sent.
    """

    index: int
    message: Message
    before: SentPrint


def conversation_key(first: Message) -> str:
    """The cache key of the conversation that starts with `first`."""
    return "llmw-" + _digest(repr(first), 16)


@dataclass(slots=True)
class CacheWatch:
    """The previous request of a conversation, to find where the next one parts from it."""

    key: str | None = None
    first: Message | None = None  # the message the key was made from
    tools: list[ToolSpec] = field(default_factory=lambda: [])
    system: str | None = None
    messages: list[Message] | None = None  # None: no request seen yet

    def key_for(self, history: list[Message]) -> str | None:
        """The conversation's key (made again only when its first message is another)."""
        if not history:
            return None
        if history[0] is not self.first:
            self.first, self.key = history[0], conversation_key(history[0])
        return self.key

    def check(
        self, request: Request, number: int, edited: list[Edited] | None = None
    ) -> CacheMiss | None:
        """Compare `request` with the previous one and remember it; a miss says where.

        Args:
            request: The request about to be sent.
            number: Its number in the run.
            edited: The messages the hooks edited in place (the same objects as before).
        """
        miss = None
        if self.messages is not None:
            miss = self._parted(request, number)
            if edited and (miss is None or miss.where == "messages"):
                miss = _edited_miss(self.messages, edited, number, miss)
        self.tools, self.system = request.tools, request.system
        self.messages = list(request.messages)  # a copy: the request's list may be edited
        if miss is not None:
            _log.info("prompt cache miss: %s", miss)  # no content: see CacheMiss.__str__
        return miss

    def _parted(self, request: Request, number: int) -> CacheMiss | None:
        if request.tools != self.tools:
            return _tools_miss(self.tools, request.tools, number)
        if request.system != self.system:
            return _miss(
                number, "system", None, None, before=self.system or "", after=request.system or ""
            )
        previous = self.messages or []
        size = len(previous)
        current = request.messages
        if len(current) >= size and current[:size] == previous:
            return None  # the same objects: identity, at C speed
        return _messages_miss(previous, current, number)


def _edited_miss(
    previous: list[Message], edited: list[Edited], number: int, miss: CacheMiss | None
) -> CacheMiss | None:
    """The first message edited in place that the previous request sent, if before `miss`."""
    first: Edited | None = None
    for edit in edited:
        index = edit.index
        # Only a message the previous request sent at the same place was cached as it was.
        sent = index < len(previous) and previous[index] is edit.message
        if sent and (first is None or index < first.index):
            first = edit
    if first is None or (miss is not None and miss.index is not None and miss.index <= first.index):
        return miss
    (role, parts), (now_role, now_parts) = first.before, sent_print(first.message)
    if role != now_role:
        return _miss(number, "messages", first.index, None, before=role, after=now_role)
    for part, (old, new) in enumerate(zip(parts, now_parts, strict=False)):
        if old != new:
            return _miss(number, "messages", first.index, part, before=old[1], after=new[1])
    part = min(len(parts), len(now_parts))  # a part added or taken away
    old = parts[part][1] if part < len(parts) else ""
    new = now_parts[part][1] if part < len(now_parts) else ""
    return _miss(number, "messages", first.index, part, before=old, after=new)


def _tools_miss(before: list[ToolSpec], after: list[ToolSpec], number: int) -> CacheMiss:
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old != new:
            return _miss(
                number, "tools", index, None, before=_spec_text(old), after=_spec_text(new)
            )
    index = min(len(before), len(after))  # one list is the other's start
    old = _spec_text(before[index]) if index < len(before) else ""
    new = _spec_text(after[index]) if index < len(after) else ""
    return _miss(number, "tools", index, None, before=old, after=new)


def _messages_miss(before: list[Message], after: list[Message], number: int) -> CacheMiss:
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old == new:
            continue
        if old.role != new.role:
            return _miss(number, "messages", index, None, before=old.role, after=new.role)
        for part, (a, b) in enumerate(zip(old.content, new.content, strict=False)):
            if a != b:
                return _miss(
                    number, "messages", index, part, before=_part_text(a), after=_part_text(b)
                )
        part = min(len(old.content), len(new.content))  # a part added or taken away
        a = _part_text(old.content[part]) if part < len(old.content) else ""
        b = _part_text(new.content[part]) if part < len(new.content) else ""
        return _miss(number, "messages", index, part, before=a, after=b)
    # The new request is shorter: the conversation lost its end.
    return _miss(number, "messages", len(after), None, before="(a message)", after="")


def _miss(
    number: int, where: str, index: int | None, part: int | None, *, before: str, after: str
) -> CacheMiss:
    offset = _common_prefix(before, after)
    return CacheMiss(
        request=number,
        where=where,  # pyright: ignore[reportArgumentType]  # one of the Literal's, by call
        index=index,
        part=part,
        offset=offset,
        before_hash=_digest(before, 8, key=_MISS_KEY),
        after_hash=_digest(after, 8, key=_MISS_KEY),
        before=before[offset : offset + _SHOWN],
        after=after[offset : offset + _SHOWN],
    )


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share (a bisection of C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _digest(text: str, size: int, *, key: bytes = b"") -> str:
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=size, key=key).hexdigest()


def _spec_text(spec: ToolSpec) -> str:
    schema = orjson.dumps(spec.input_schema, option=orjson.OPT_SORT_KEYS).decode()
    return f"{spec.name}\n{spec.description}\n{schema}"


def _part_text(part: Part) -> str:
    if isinstance(part, TextPart | ThinkingPart):
        return part.text
    if isinstance(part, ToolUsePart):
        try:
            return f"{part.name} {orjson.dumps(part.input).decode()}"
        except TypeError:  # not JSON data: the request builder will say so
            return f"{part.name} {part.input!r}"
    if isinstance(part, ToolResultPart):
        return part.content
    return repr(part)
