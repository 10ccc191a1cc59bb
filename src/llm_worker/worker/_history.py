"""Keep a history that providers accept: every tool call answered by exactly one result.

Providers reject (HTTP 400) a history in which a tool call has no result in the next message, a
result answers no call, or a call is answered twice. A history can get that way through a crash,
a cancellation, a skipped or denied call, or a history loaded from elsewhere. `repair` fixes it
before every request, saying in each synthesized result why there was none.

`Checked` makes that cost flat over a long run: a history grows by appending, so a request
checks only the messages added since the last one (`repair` is local: a message's fate
depends on it and the one after it only, so a checked prefix stays checked).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message, Part, ToolResultPart, ToolUsePart

__all__ = ("Checked", "as_messages", "missing_result", "repair")


def missing_result(call: ToolUsePart, why: str) -> ToolResultPart:
    """The error result that stands in for a call that got none."""
    return ToolResultPart(
        call.id,
        f"No result: the call was {why} before it returned. It did not complete.",
        is_error=True,
        name=call.name,
    )


def repair(messages: list[Message], *, why: str = "interrupted") -> tuple[list[Message], int]:
    """Return a history where each tool call has exactly one result, in call order.

    A tool call that repeats the id of an earlier call of its message is dropped (one id,
    one call, one result). Results are moved first into the user message that follows their
    call, ordered as the calls; missing ones are synthesized (`why` says what happened);
    results that answer no call of the preceding message, and duplicates, are dropped. The
    input is not modified.

    Returns:
        The repaired messages and the number of changes made.
    """
    out: list[Message] = []
    changes = 0
    i = 0
    while i < len(messages):
        message, repeats = _unique_calls(messages[i])
        changes += repeats
        calls = message.tool_uses if message.role == "assistant" else []
        if not calls:
            if message.role == "user" and message.tool_results:
                kept: list[Part] = [p for p in message.content if not isinstance(p, ToolResultPart)]
                changes += len(message.content) - len(kept)
                if kept:
                    out.append(Message("user", kept))
            else:
                out.append(message)
            i += 1
            continue
        out.append(message)
        follower = messages[i + 1] if i + 1 < len(messages) else None
        if follower is not None and follower.role != "user":
            follower = None
        answer, changed = _answer(calls, follower, why)
        # An answer that needed nothing stays the same object: `Checked` knows it by identity.
        out.append(answer if changed or follower is None else follower)
        changes += changed
        i += 2 if follower is not None and follower.role == "user" else 1
    return out, changes


@dataclass(slots=True)
class Checked:
    """`repair` that checks only what changed since its last call, for one conversation.

    It keeps the messages it last returned (a history `repair` leaves as it is). A list that
    starts with those messages — the same objects, compared at C speed by identity, or equal
    ones — needs only its tail checked, with the last answered call pair checked again (an
    edit in place, such as a hook appending a part to the last message, comes there). Any
    other change (a message replaced, removed or inserted, a shorter list) makes a full pass.
    A message edited in place further back is the same object: the caller names it
    (`edited`, the messages an on_message_send hook edited), and it is checked with its
    neighbours; only if that finds something to repair is the whole list checked. An edit
    the caller cannot name (the history changed in place between runs) is caught by the
    provider's refusal (HTTP 400), after which the Worker checks everything again and sends
    once more (`Conversation.recheck`).

    Attributes:
        full_passes: Calls that checked every message (the first, and after an edit).
    """

    valid: list[Message] = field(default_factory=lambda: [])
    full_passes: int = 0

    def repair(
        self, messages: list[Message], *, why: str = "interrupted", edited: Iterable[int] = ()
    ) -> tuple[list[Message], int]:
        """`repair(messages, why=why)`, checking only the messages not checked already.

        Args:
            messages: The messages.
            why: What the result synthesized for a call that has none says happened.
            edited: Indexes of messages edited in place since the last call.
        """
        start = self._checked_prefix(messages)
        if start and any(i < start and not _still_valid(messages, i) for i in edited):
            start = 0
        if start == 0:
            self.full_passes += 1
        tail, changes = repair(messages[start:], why=why)
        out = messages[:start] + tail if changes else messages
        self.valid = list(out)  # a copy: the caller's list grows under it
        return out, changes

    def _checked_prefix(self, messages: list[Message]) -> int:
        """How many leading messages need no check: the checked ones, short of the last pair."""
        valid = self.valid
        size = len(valid)
        if not size or len(messages) < size or messages[:size] != valid:
            return 0
        size = max(size - 2, 0)
        # A prefix ending in calls would leave their answer to the tail: start at the calls.
        while size and valid[size - 1].role == "assistant" and valid[size - 1].tool_uses:
            size -= 1
        return size


def _still_valid(messages: list[Message], index: int) -> bool:
    """Whether the message at `index` still fits its neighbours.

    `repair` is local: a message's fate depends on it and on the one next to it.
    """
    start = index
    if index and _calls(messages[index - 1]):
        start = index - 1  # it answers the calls before it
    end = index + 1
    if messages[index].role == "assistant":
        end += 1  # the message after it answers its calls (or answered the ones taken out)
    while end < len(messages) and _calls(messages[end - 1]):
        end += 1  # the answer to the last message's calls
    return not repair(messages[start:end])[1]


def _calls(message: Message) -> bool:
    return message.role == "assistant" and bool(message.tool_uses)


def _unique_calls(message: Message) -> tuple[Message, int]:
    """`message` without the tool calls that repeat an earlier call's id in it."""
    if message.role != "assistant":
        return message, 0
    seen: set[str] = set()
    kept: list[Part] = []
    for part in message.content:
        if isinstance(part, ToolUsePart):
            if part.id in seen:
                continue
            seen.add(part.id)
        kept.append(part)
    repeats = len(message.content) - len(kept)
    return (Message("assistant", kept), repeats) if repeats else (message, 0)


def _answer(calls: list[ToolUsePart], follower: Message | None, why: str) -> tuple[Message, int]:
    by_id: dict[str, ToolResultPart] = {}
    others: list[Part] = []
    changes = 0
    for part in follower.content if follower is not None else []:
        if isinstance(part, ToolResultPart):
            if part.tool_use_id in by_id:
                changes += 1  # a second result for one call
            else:
                by_id[part.tool_use_id] = part
        else:
            others.append(part)
    results: list[Part] = []
    for call in calls:
        result = by_id.pop(call.id, None)
        if result is None:
            result = missing_result(call, why)
            changes += 1
        results.append(result)
    changes += len(by_id)  # results that answer no call of this message
    if follower is not None and not changes:
        ordered = [p for p in follower.content if isinstance(p, ToolResultPart)]
        if [p.tool_use_id for p in ordered] != [c.id for c in calls] or follower.content[
            : len(calls)
        ] != ordered:
            changes += 1
    return Message("user", results + others), changes


def as_messages(input: str | Message | Iterable[Message]) -> list[Message]:
    """A run's input as messages (a str is one user message).

    Raises:
        ConfigurationError: An item is not a Message.
    """
    if isinstance(input, str):
        return [Message.user(input)]
    if isinstance(input, Message):
        return [input]
    messages = list(input)
    for m in messages:
        if not isinstance(m, Message):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError(f"run() takes a str, a Message or Messages, not {m!r}")
    return messages
