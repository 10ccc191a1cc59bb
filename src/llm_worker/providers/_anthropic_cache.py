"""The prompt-cache breakpoints the library places in an Anthropic body (`Request.prompt_cache`).

Anthropic caches a prompt's prefix up to a `cache_control` breakpoint, and a request may carry
at most 4 of them (HTTP 400 "A maximum of 4 blocks with cache_control may be provided"). The
library places two, after everything else the body holds (the client's `prompt_cache`
breakpoints, top-level automatic caching, blocks given whole) and only while the total
stays within 4:

- one at the conversation's end (the last block that may carry one), which slides with it:
  each request reads the previous one's prefix from the cache and writes its own growth;
  Anthropic looks up to 20 blocks back from a breakpoint for an earlier entry, more than a
  turn adds;
- one anchor after the system prompt and tools (the order the cache reads them in is tools,
  system, messages), so that a conversation whose messages change (a compaction, a hook's
  edit) still reads them from the cache.

- one at the previous request's end (the message before the last answer), when the turn
  added more blocks than the lookback reaches (a wide batch of parallel calls: 12 calls and
  their results are 24 blocks); without it, each such turn reads nothing back but the anchor.

The end is placed first: alone, it caches the whole prefix.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ("MAX_BREAKPOINTS", "count_breakpoints", "mark_conversation")

MAX_BREAKPOINTS: Final = 4
_LOOKBACK: Final = 20  # blocks Anthropic looks back from a breakpoint for an earlier entry
# Thinking blocks cannot carry a breakpoint, nor can an empty text block.
_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})

Block = dict[str, Any]


def count_breakpoints(body: Block) -> int:
    """The `cache_control` markers in a body: top level, system, tools and message blocks."""
    count = 1 if "cache_control" in body else 0  # automatic caching takes a slot too
    system = body.get("system")
    if isinstance(system, list):
        count += _marked(system)  # pyright: ignore[reportUnknownArgumentType]
    count += _marked(body.get("tools") or [])
    messages: list[Block] = body.get("messages") or []
    for message in messages:
        count += _marked(message["content"])
    return count


def mark_conversation(body: Block, marker: Block) -> None:
    """Place the end breakpoint, then the anchor, each while the body has fewer than 4."""
    budget = MAX_BREAKPOINTS - count_breakpoints(body)
    end = _last_markable(body.get("messages") or [])
    if budget > 0 and end is not None and "cache_control" not in end:
        end["cache_control"] = dict(marker)
        budget -= 1
    if budget > 0 and _bridge(body.get("messages") or [], marker):
        budget -= 1
    if budget > 0:
        _anchor(body, marker)


def _marked(blocks: list[Block]) -> int:
    return sum(1 for block in blocks if "cache_control" in block)


def _last_markable(messages: list[Block]) -> Block | None:
    return _markable(messages[-1]) if messages else None


def _markable(message: Block) -> Block | None:
    for block in reversed(message["content"]):
        if block.get("type") not in _UNMARKABLE and block.get("text", True) != "":
            return block
    return None


def _bridge(messages: list[Block], marker: Block) -> bool:
    """Mark the previous request's end if this turn's blocks are past the lookback from it."""
    answer = next(
        (i for i in range(len(messages) - 1, 0, -1) if messages[i]["role"] == "assistant"), 0
    )
    if answer < 1 or sum(len(m["content"]) for m in messages[answer:]) < _LOOKBACK:
        return False
    block = _markable(messages[answer - 1])
    if block is None or "cache_control" in block:
        return False
    block["cache_control"] = dict(marker)
    return True


def _anchor(body: Block, marker: Block) -> None:
    """A breakpoint on the system prompt (after the tools), else on the last tool."""
    system = body.get("system")
    tools: list[Block] = body.get("tools") or []
    if isinstance(system, list) and _marked(system):  # pyright: ignore[reportUnknownArgumentType]
        return
    if _marked(tools):
        return
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": dict(marker)}]
    elif isinstance(system, list) and system:
        last: Block = system[-1]  # pyright: ignore[reportUnknownVariableType]
        last["cache_control"] = dict(marker)
    elif tools:
        tools[-1]["cache_control"] = dict(marker)
