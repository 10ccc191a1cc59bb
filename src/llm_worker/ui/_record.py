"""The server's own record of a chat's tool results, and how it wins over the browser's.

Each request brings the whole conversation from the browser, which may differ from what the
server did: a stop (the `ai` client's `stop()` only aborts its fetch) leaves a call the
server completed showing `input-available`, and a hostile client can write any result it
likes. Before a run starts, `reconcile` rewrites the history's tool results: a result the
server recorded is the one the model reads; a result the browser claims for a call it must
prove (a tool that asks for approval, or every server tool when the app does not trust
the browser's history) and that carries no valid signature (`_parts.result_mac`) becomes an
error result saying no run of the call is on record.

The record knows a result by its call id and by the call itself (`RecordedResult.call`, a
short hash of the tool's name and arguments): a provider reuses call ids (OpenAI-compatible
servers' `call_0` each turn; Gemini's `gemini_call_<n>` numbered again after a regenerate
dropped the first), and a later call of the same id that never ran must not read as done.

`ToolRecord` is the seam: `MemoryToolRecord` keeps the latest results per chat in memory;
a session store that keeps the conversation implements the same two methods over it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from llm_worker._run_events import ToolCallComplete, ToolResultReady
from llm_worker.messages import Message, Part, ToolResultPart, ToolUsePart
from llm_worker.ui._auth import owner_part

__all__ = (
    "NO_RECORD",
    "MemoryToolRecord",
    "Proven",
    "RecordedResult",
    "Recorder",
    "ToolRecord",
    "call_digest",
    "reconcile",
)

NO_RECORD = (
    "No result of this call is on record: the server did not run it (the result the "
    "conversation showed did not come from the tool)."
)
"""What the model reads for a result the browser claimed but cannot prove."""

_DENIED = "Denied: "


class Proven:
    """The tool results of a request that carry the server's signature, each part itself.

    Kept by part, not by call id: a signature proves the one result it came with, never a
    second result the browser adds under the same call id.
    """

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[int, ToolResultPart] = {}  # kept alive here, so ids stay unique

    def add(self, part: ToolResultPart) -> None:
        """Count `part` as proven."""
        self._parts[id(part)] = part

    def __contains__(self, part: object) -> bool:
        return self._parts.get(id(part)) is part

    def __len__(self) -> int:
        return len(self._parts)


@dataclass(frozen=True, slots=True)
class RecordedResult:
    """A result a server tool gave, and which call it answers: an entry of a `ToolRecord`.

    Attributes:
        part: The result, as the history holds it.
        call: `call_digest` of the call it answers (its tool's name and arguments, as the
            model sent them): 24 hex digits, no content. The record gives `part` only to a
            call of that digest.
    """

    part: ToolResultPart
    call: str


class ToolRecord(Protocol):
    """Keeps the results of the tools the server ran, by chat key, for `reconcile`.

    A chat key is the owner and the chat id together (see `Authorize`). Implement it over a
    session store or a database to keep the record across restarts and servers: keep each
    entry's `call` beside its result. An entry of another shape (a bare `ToolResultPart`,
    as kept before entries named their call) never applies: it proves nothing.
    """

    async def add(self, key: str, results: Sequence[RecordedResult]) -> None:
        """Record `results` (the Worker's, as it ran them) for the chat `key`."""
        ...

    async def results(self, key: str) -> Mapping[str, RecordedResult]:
        """The recorded results of the chat `key`, by call id (empty when none)."""
        ...


def call_digest(name: str, arguments: object) -> str | None:
    """A short hash of a call (its tool's name and arguments, as canonical JSON).

    Floats of integral value count as integers: a browser (JavaScript numbers) gives back
    `2` for the `2.0` a model sent, and the call is still the same. `None` for arguments
    too deeply nested to hash: such a call matches no entry.
    """
    try:
        text = json.dumps(
            [name, _plain(arguments)], sort_keys=True, separators=(",", ":"), default=repr
        )
    except (RecursionError, ValueError):  # ValueError: a cycle (not JSON from anywhere)
        return None
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _plain(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        items = cast("dict[object, object]", value)  # JSON: the keys are strings
        return {str(k): _plain(v) for k, v in items.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in cast("list[object] | tuple[object, ...]", value)]
    return value


class Recorder:
    """The record's entries a run's events make: each result of the run's own calls.

    A result is known by its call's digest, taken when the call completes (or, for a
    resumed run, from the paused calls): the call as the history holds it, not as a
    `before_tool_call` hook or an edited approval rewrote its arguments. A sub-agent's
    results are not the chat's: its calls are in no history the browser sends.
    """

    __slots__ = ("_calls",)

    def __init__(self, paused: Sequence[ToolUsePart] = ()) -> None:
        self._calls = {c.id: call_digest(c.name, c.input) for c in paused}

    def entry(self, event: object) -> RecordedResult | None:
        """The entry `event` makes (a result of the run's own call), else `None`."""
        if isinstance(event, ToolCallComplete) and not event.path:
            self._calls[event.call.id] = call_digest(event.call.name, event.call.input)
        elif isinstance(event, ToolResultReady) and not event.path:
            digest = self._calls.get(event.result.tool_use_id)
            if digest is not None:
                return RecordedResult(event.result.to_part(), digest)
        return None


class MemoryToolRecord:
    """A `ToolRecord` in this process's memory, bounded in chats and in bytes.

    Past `max_chats` (or `max_bytes` of result text in all) a chat is dropped: the one
    recorded longest ago of the owner holding the most chats (or bytes), so one owner's
    many chats push out their own, never another owner's. A chat keeps at most
    `max_results` results (the oldest go first). A dropped result is then proven only by
    its signature.
    """

    def __init__(
        self, *, max_chats: int = 1000, max_results: int = 1000, max_bytes: int = 64 << 20
    ) -> None:
        if min(max_chats, max_results, max_bytes) < 1:
            raise ValueError("max_chats, max_results and max_bytes must be at least 1")
        self.max_chats, self.max_results, self.max_bytes = max_chats, max_results, max_bytes
        self._chats: dict[str, OrderedDict[str, RecordedResult]] = {}
        self._owners: dict[str, _Owner] = {}
        self._bytes = 0
        self._clock = 0  # counts the adds: when each chat was last recorded

    def __len__(self) -> int:
        return len(self._chats)

    async def add(self, key: str, results: Sequence[RecordedResult]) -> None:
        """Record `results` for `key`; drop the oldest past the bounds."""
        owner = self._owners.setdefault(owner_part(key), _Owner())
        owner.keys.pop(key, None)
        self._clock += 1
        owner.keys[key] = self._clock  # the owner's most recent chat
        chat = self._chats.setdefault(key, OrderedDict())
        for result in results:
            self._drop(chat, owner, result.part.tool_use_id)
            chat[result.part.tool_use_id] = result
            owner.bytes += _size(result)
            self._bytes += _size(result)
        while len(chat) > self.max_results:
            self._drop(chat, owner, next(iter(chat)))
        while len(self._chats) > self.max_chats or self._bytes > self.max_bytes:
            if not self._evict(key, by_bytes=len(self._chats) <= self.max_chats):
                break

    async def results(self, key: str) -> Mapping[str, RecordedResult]:
        """The results recorded for `key`."""
        return dict(self._chats.get(key, {}))

    def _evict(self, keep: str, *, by_bytes: bool) -> bool:
        """Drop the oldest chat (not `keep`) of the owner holding the most; False if none."""
        best: tuple[int, int, str] | None = None
        for name, owner in self._owners.items():
            if len(owner.keys) == 1 and keep in owner.keys:
                continue
            weight = owner.bytes if by_bytes else len(owner.keys)
            # The heaviest owner; of owners alike, the one whose oldest chat is oldest.
            rank = (weight, -next(iter(owner.keys.values())), name)
            if best is None or rank[:2] > best[:2]:
                best = rank
        if best is None:
            return False
        owner = self._owners[best[2]]
        key = next(k for k in owner.keys if k != keep)
        del owner.keys[key]
        dropped = sum(_size(r) for r in self._chats.pop(key).values())
        owner.bytes -= dropped
        self._bytes -= dropped
        if not owner.keys:
            del self._owners[best[2]]
        return True

    def _drop(self, chat: OrderedDict[str, RecordedResult], owner: _Owner, call_id: str) -> None:
        old = chat.pop(call_id, None)
        if old is not None:
            owner.bytes -= _size(old)
            self._bytes -= _size(old)


class _Owner:
    """One owner's chats in the record, oldest first, and the bytes they hold."""

    __slots__ = ("bytes", "keys")

    def __init__(self) -> None:
        self.keys: OrderedDict[str, int] = OrderedDict()  # chat key: when last recorded
        self.bytes = 0


def _size(result: RecordedResult) -> int:
    return len(result.part.content) + len(result.part.tool_use_id) + len(result.call)


def reconcile(
    history: Sequence[Message],
    recorded: Mapping[str, object],
    proven: Proven,
    guarded: Callable[[str | None], bool],
) -> list[Message]:
    """The browser's `history` with the server's record of tool results winning.

    A recorded result (a `RecordedResult`; an entry of another shape never applies) replaces
    the browser's, or is added where the browser shows none (a call it stopped waiting for),
    when the history holds one call of its id and that call is the one it answers (the same
    tool and arguments); a result of a tool `guarded(name)` says must be proven, neither
    recorded nor in `proven` (signed by the server: that very part), becomes `NO_RECORD`. A
    denial stays: it says the call did not run, as the browser may say of any call.
    """
    answered = {r.tool_use_id for m in history for r in m.tool_results}
    names: dict[str, set[str]] = {}  # every name a call id goes by in the history
    calls: dict[str, ToolUsePart] = {}
    counts: Counter[str] = Counter()
    for call in (c for m in history for c in m.tool_uses):
        names.setdefault(call.id, set()).add(call.name)
        calls[call.id] = call
        counts[call.id] += 1
    applying = _applying(recorded, calls, counts)
    out: list[Message] = []
    carried: list[Part] = []  # recorded results of the last assistant message's calls
    for message in history:
        if message.role == "assistant":
            if carried:
                out.append(Message("user", carried))
            uses = message.tool_uses
            carried = [applying[c.id] for c in uses if c.id not in answered and c.id in applying]
            out.append(message)
            continue
        checked = [_checked(p, applying, proven, guarded, names) for p in message.content]
        content: list[Part] = [*carried, *checked]
        carried = []
        out.append(dataclasses.replace(message, content=content))
    if carried:
        out.append(Message("user", carried))
    return out


def _applying(
    recorded: Mapping[str, object], calls: Mapping[str, ToolUsePart], counts: Counter[str]
) -> dict[str, ToolResultPart]:
    """The recorded results, by call id, that answer the history's calls.

    A provider that numbers its calls afresh reuses ids: the record holds the latest call's
    result only, so it applies where the history holds one call of its id (an earlier
    turn's call of the id keeps its own result), and only when that call is the one it
    answers: a later call of the same id and tool (after a regenerate dropped the first)
    that never ran has no result. Hashed only for the ids on record.
    """
    applying: dict[str, ToolResultPart] = {}
    for call_id, entry in recorded.items():
        if not isinstance(entry, RecordedResult) or counts[call_id] != 1:
            continue  # a bare ToolResultPart: kept before entries named their call
        part, call = entry.part, calls[call_id]
        if part.tool_use_id == call_id and call_digest(call.name, call.input) == entry.call:
            applying[call_id] = part
    return applying


def _checked(
    part: Part,
    recorded: Mapping[str, ToolResultPart],
    proven: Proven,
    guarded: Callable[[str | None], bool],
    names: Mapping[str, set[str]],
) -> Part:
    if not isinstance(part, ToolResultPart):
        return part
    call_id = part.tool_use_id
    if call_id in recorded:
        return recorded[call_id]
    # The result's own name and every call of its id: a result naming another tool (or a
    # twin call of the same id) must not lead it out of the guard of the call it answers.
    claimed = {part.name, *names.get(call_id, ())} - {None} or {None}
    if part in proven or not any(guarded(n) for n in claimed):
        return part
    name = part.name or next(iter(names.get(call_id, ())), None)
    if part.is_error and part.content.startswith(_DENIED):
        return part
    return ToolResultPart(call_id, NO_RECORD, is_error=True, name=name)
