"""What the long-run (ContextPolicy) tests share: a 4 KB page tool and request checks."""

from __future__ import annotations

import re

from llm_worker import tool
from llm_worker.messages import Message, Request

WINDOW = 16_000
BLOB = re.compile(r"\[blob:([0-9a-f-]+)\]")
PAGE = "lorem ipsum dolor sit amet " * 150  # ~4 KB with its header


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}: {PAGE}"


def pairs_valid(messages: list[Message]) -> bool:
    """Every call answered in the next message, every result answering the call before it."""
    for i, message in enumerate(messages):
        calls = {p.id for p in message.tool_uses} if message.role == "assistant" else set()
        following = messages[i + 1] if i + 1 < len(messages) else None
        answers = {p.tool_use_id for p in following.tool_results} if following else set()
        if calls and (following is None or answers != calls):
            return False
        results = {p.tool_use_id for p in message.tool_results}
        before = {p.id for p in messages[i - 1].tool_uses} if i else set()
        if results and results != before:
            return False
    return True


def stored_page(request: Request) -> tuple[str, int] | None:
    """A compacted page's blob id and number, from what the model was sent."""
    for message in request.messages:
        for part in message.tool_results:
            found = BLOB.search(part.content)
            if found and "page " in part.content:
                return found.group(1), int(part.content.split("page ")[1].split(":")[0])
    return None


def prefix_shared_between(requests: list[Request], compactions: set[int]) -> None:
    """Assert each request sends its predecessor's messages again, unless compacted before it.

    All but the predecessor's last message (tool results the next answer's may join): the
    cacheable prefix holds between two compactions.
    """
    for k in range(1, len(requests)):
        if k in compactions:
            continue
        before, now = requests[k - 1].messages, requests[k].messages
        assert now[: len(before) - 1] == before[:-1], f"request {k} rewrote its prefix"
