"""The stages of a compaction, each on one message or one span of messages.

- `stored_results`: a message's large inline tool results as the blob summaries of
  `llm_worker.blobs` (the result stored first, so `inspect` reads the original back);
- `without_thinking`: an assistant message's thinking dropped, with the OpenAI item ids
  that pair with it (the Responses API refuses a message or call naming a reasoning item
  that is not sent);
- `summary`: an LLM's summary of a span of messages, from a plain-text transcript (so any
  provider's summarizer reads any provider's history);
- `marked`: the one user message that stands for the replaced turns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llm_worker._wide_json import json_bytes
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.messages import (
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore, OutputPolicy
    from llm_worker.providers._base import LLMClient

__all__ = ("MARK", "marked", "stored_results", "summary", "transcript", "without_thinking")

MARK = "[llm-worker: context summary]"
"""The first line of the message that stands for compacted turns."""

SUMMARY_SYSTEM = (
    "You compact the history of a conversation between a user and an AI assistant that "
    "uses tools, so that the assistant can continue the task from your summary alone. "
    "Keep: the user's goals and constraints, decisions made, facts and results found (with "
    "the exact identifiers, names, numbers, file paths and blob ids they came with), what "
    "was tried and failed, and what remains to do. Leave out pleasantries and repetition. "
    "Write plain prose and short lists; do not address the user."
)

# A tool result at most this many times its summary's size stays as it is: storing it
# would save too little to be worth a blob and an inspect call.
_WORTH_STORING = 2
# The most characters of one tool result or argument object a transcript quotes.
_QUOTE = 2_000


async def stored_results(
    message: Message, store: BlobStore, policy: OutputPolicy, inspect: str | None
) -> tuple[Message, int]:
    """`message` with its large inline tool results as blob summaries; how many changed.

    Raises:
        BlobError: A result could not be stored.
    """
    from llm_worker.blobs import externalize
    from llm_worker.blobs._output import promote

    parts: list[Part] = []
    changed = 0
    for part in message.content:
        if isinstance(part, ToolResultPart) and _worth_storing(part, policy):
            stored = promote(part.content, 0, policy.array_head)
            output = await externalize(stored, store, policy, inspect=inspect)
            parts.append(dataclasses.replace(part, content=output.text))
            changed += 1
        else:
            parts.append(part)
    return (Message(message.role, parts), changed) if changed else (message, 0)


def _worth_storing(part: ToolResultPart, policy: OutputPolicy) -> bool:
    content = part.content
    if part.is_error or content.startswith("[blob:"):  # an error, or stored already
        return False
    return len(content.encode("utf-8", "surrogatepass")) > _WORTH_STORING * (
        policy.summary_max_bytes
    )


def without_thinking(message: Message) -> tuple[Message, int]:
    """An assistant message without its thinking (and the item ids paired with it)."""
    dropped = sum(1 for p in message.content if isinstance(p, ThinkingPart))
    if message.role != "assistant" or not dropped:
        return message, 0
    parts: list[Part] = []
    for part in message.content:
        if isinstance(part, ThinkingPart):
            continue
        if isinstance(part, TextPart | ToolUsePart) and part.item_id is not None:
            # OpenAI pairs a reasoning item with the item after it, by id: a message or call
            # naming an id requires its reasoning item, which is no longer sent.
            parts.append(dataclasses.replace(part, item_id=None))
        else:
            parts.append(part)
    return Message("assistant", parts), dropped


def transcript(previous: str | None, messages: Sequence[Message]) -> str:
    """The span to summarize as plain text, after the summary it extends."""
    lines: list[str] = []
    if previous:
        lines += ["Summary of the conversation before this part:", previous, ""]
    for message in messages:
        who = "User" if message.role == "user" else "Assistant"
        for part in message.content:
            line = _line(who, part)
            if line:
                lines.append(line)
    return "\n".join(lines)


def _line(who: str, part: Part) -> str | None:
    if isinstance(part, TextPart):
        return f"{who}: {part.text}" if part.text else None
    if isinstance(part, ToolUsePart):
        arguments = json_bytes(part.input).decode()
        return f"{who} called {part.name} {_cut(arguments)}"
    if isinstance(part, ToolResultPart):
        status = " (error)" if part.is_error else ""
        return f"Result of {part.name or part.tool_use_id}{status}: {_cut(part.content)}"
    return None  # thinking, media, provider-native blocks: not for a text summary


def _cut(text: str) -> str:
    return text if len(text) <= _QUOTE else f"{text[:_QUOTE]}… [{len(text)} characters]"


async def summary(client: LLMClient, text: str, max_tokens: int) -> str:
    """The summarizer's answer to the transcript `text`, whole (text blocks joined).

    Raises:
        ProviderError: The summarizer failed.
        ValueError: It answered no text.
    """
    request = Request(
        [Message.user(f"Summarize this conversation:\n\n{text}")],
        system=SUMMARY_SYSTEM,
        max_tokens=max_tokens,
    )
    pieces: list[str] = []
    async for event in client.stream(request):
        if type(event) is BlockDelta and type(event.delta) is TextDelta:
            pieces.append(event.delta.text)
    written = "".join(pieces).strip()
    if not written:
        raise ValueError("the summarizer answered no text")
    return written


def marked(head: Sequence[Message], text: str) -> Message:
    """The user message that stands for the replaced turns: the opening request, then `text`."""
    parts: list[Part] = [
        p for m in head if m.role == "user" for p in m.content if not isinstance(p, ToolResultPart)
    ]
    parts.append(TextPart(f"{MARK}\n{text}"))
    return Message("user", parts)
