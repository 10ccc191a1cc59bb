"""The server's own record of a chat's tool results, and how it wins over the browser's.

Each request brings the whole conversation from the browser, which may differ from what the
server did: a stop (the `ai` client's `stop()` only aborts its fetch) leaves a call the
server completed showing `input-available`, and a hostile client can write any result it
likes. Before a run starts, `reconcile` rewrites the history's tool results: a result the
server recorded is the one the model reads; a result the browser claims for a call it must
prove (a tool that asks for approval, or every server tool when the app does not trust
the browser's history) and that carries no valid signature (`_parts.result_mac`) becomes an
error result saying no run of the call is on record.

`ToolRecord` is the seam: `MemoryToolRecord` keeps the latest results per chat in memory;
a session store that keeps the conversation implements the same two methods over it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from llm_worker.messages import Message, Part, ToolResultPart
from llm_worker.ui._auth import owner_part

__all__ = ("NO_RECORD", "MemoryToolRecord", "Proven", "ToolRecord", "reconcile")

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


class ToolRecord(Protocol):
    """Keeps the results of the tools the server ran, by chat key, for `reconcile`.

    A chat key is the owner and the chat id together (see `Authorize`). Implement it over a
    session store or a database to keep the record across restarts and servers.
    """

    async def add(self, key: str, results: Sequence[ToolResultPart]) -> None:
        """Record `results` (the Worker's, as it ran them) for the chat `key`."""
        ...

    async def results(self, key: str) -> Mapping[str, ToolResultPart]:
        """The recorded results of the chat `key`, by call id (empty when none)."""
        ...


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
        self._chats: dict[str, OrderedDict[str, ToolResultPart]] = {}
        self._owners: dict[str, _Owner] = {}
        self._bytes = 0
        self._clock = 0  # counts the adds: when each chat was last recorded

    def __len__(self) -> int:
        return len(self._chats)

    async def add(self, key: str, results: Sequence[ToolResultPart]) -> None:
        """Record `results` for `key`; drop the oldest past the bounds."""
        owner = self._owners.setdefault(owner_part(key), _Owner())
        owner.keys.pop(key, None)
        self._clock += 1
        owner.keys[key] = self._clock  # the owner's most recent chat
        chat = self._chats.setdefault(key, OrderedDict())
        for result in results:
            self._drop(chat, owner, result.tool_use_id)
            chat[result.tool_use_id] = result
            owner.bytes += _size(result)
            self._bytes += _size(result)
        while len(chat) > self.max_results:
            self._drop(chat, owner, next(iter(chat)))
        while len(self._chats) > self.max_chats or self._bytes > self.max_bytes:
            if not self._evict(key, by_bytes=len(self._chats) <= self.max_chats):
                break

    async def results(self, key: str) -> Mapping[str, ToolResultPart]:
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

    def _drop(self, chat: OrderedDict[str, ToolResultPart], owner: _Owner, call_id: str) -> None:
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


def _size(result: ToolResultPart) -> int:
    return len(result.content) + len(result.tool_use_id)


def reconcile(
    history: Sequence[Message],
    recorded: Mapping[str, ToolResultPart],
    proven: Proven,
    guarded: Callable[[str | None], bool],
) -> list[Message]:
    """The browser's `history` with the server's record of tool results winning.

    A recorded result replaces the browser's, or is added where the browser shows none (a
    call it stopped waiting for); a result of a tool `guarded(name)` says must be proven,
    neither recorded nor in `proven` (signed by the server: that very part), becomes
    `NO_RECORD`. A denial stays: it says the call did not run, as the browser may say of
    any call.
    """
    answered = {r.tool_use_id for m in history for r in m.tool_results}
    names: dict[str, set[str]] = {}  # every name a call id goes by in the history
    counts: Counter[str] = Counter()
    for call in (c for m in history for c in m.tool_uses):
        names.setdefault(call.id, set()).add(call.name)
        counts[call.id] += 1
    # The record knows a result by its call id: it applies to a call only when the history
    # holds one call of that id, of the recorded tool. A provider that numbers its calls
    # afresh (OpenAI-compatible servers' `call_0`) reuses ids: the record holds the latest
    # call's result only, and must not overwrite an earlier turn's with it.
    recorded = {
        i: r
        for i, r in recorded.items()
        if counts[i] == 1 and (r.name is None or names[i] == {r.name})
    }
    out: list[Message] = []
    carried: list[Part] = []  # recorded results of the last assistant message's calls
    for message in history:
        if message.role == "assistant":
            if carried:
                out.append(Message("user", carried))
            calls = message.tool_uses
            carried = [recorded[c.id] for c in calls if c.id not in answered and c.id in recorded]
            out.append(message)
            continue
        checked = [_checked(p, recorded, proven, guarded, names) for p in message.content]
        content: list[Part] = [*carried, *checked]
        carried = []
        out.append(dataclasses.replace(message, content=content))
    if carried:
        out.append(Message("user", carried))
    return out


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
