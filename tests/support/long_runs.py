"""What the long-run (ContextPolicy) tests share: a 4 KB page tool, request checks, and the
wire runs' model and Worker."""

from __future__ import annotations

import re
from typing import Any

from llm_worker import ContextPolicy, MemoryBlobStore, OutputPolicy, Worker, tool
from llm_worker.messages import Message, Request, ThinkingConfig, ThinkingPart, ToolUsePart
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.testing._script import prompt_tokens

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


class WireModel:
    """Thinks (signed), then reads a page, each turn; inspects a compacted page once."""

    def __init__(self, turns: int, inspect_at: int = -1, thinking: bool = True) -> None:
        self.turns, self.inspect_at, self.thinking = turns, inspect_at, thinking
        self.answers = 0
        self.counted: list[int] = []
        self.requests: list[Any] = []
        self.inspected: tuple[str, int] | None = None
        self.read_back: str | None = None

    def __call__(self, ask: ScriptedRequest) -> ScriptedResponse:
        index, self.answers = self.answers, self.answers + 1
        self.counted.append(prompt_tokens(ask.request))
        self.requests.append(ask.request)
        if self.inspected is not None and self.read_back is None:
            self.read_back = ask.request.messages[-1].tool_results[0].content
        if index >= self.turns:
            return ScriptedResponse.text("done")
        if index == self.inspect_at:
            self.inspected = stored_page(ask.request)
            assert self.inspected is not None
            call = ToolUsePart("", "inspect", {"blob_id": self.inspected[0]})
        else:
            call = ToolUsePart("", "read", {"n": index})
        thought = [ThinkingPart(f"step {index}: " + "hmm " * 40, signature=f"sig{index}")]
        return ScriptedResponse([*thought, call] if self.thinking else [call])


def worker_on(client: Any, store: MemoryBlobStore, **options: Any) -> Worker:
    """A Worker reading pages with thinking on, in the 16,000-token window, with a summarizer."""
    options.setdefault("max_requests", 1_000)
    return Worker(
        client,
        tools=[read],
        blob_store=store,
        output_policy=OutputPolicy(inline_threshold=8_000),
        thinking=ThinkingConfig(budget_tokens=1024),
        context=ContextPolicy(
            window_tokens=WINDOW,
            summarizer=ScriptedClient(ScriptedResponse.text("Pages were read in order.")),
        ),
        **options,
    )
